package bedrock

import (
	"sync"

	"github.com/valyala/fastjson"

	"github.com/tollgate/tollgate/gateway/internal/openai"
)

// Wire constants of the Converse API.
const (
	// EventStreamContentType is the content type of a ConverseStream
	// reply: the AWS event-stream binary framing, not SSE.
	EventStreamContentType = "application/vnd.amazon.eventstream"
	// ErrorTypeHeader is the reply header naming an error's type
	// ("ValidationException", possibly followed by ":" and a URL).
	ErrorTypeHeader = "X-Amzn-Errortype"
)

// AppendPath appends the request path, relative to the runtime endpoint
// (https://bedrock-runtime.REGION.amazonaws.com), for model modelID:
// /model/{modelID}/converse, or /converse-stream when stream is true. The
// model id is escaped as the AWS SDK escapes it (every byte but
// A-Z a-z 0-9 - _ . ~), so "v1:0" becomes "v1%3A0" and an inference
// profile ARN stays one segment; the signer signs the path as written.
func AppendPath(dst []byte, modelID string, stream bool) []byte {
	const hexDigits = "0123456789ABCDEF"
	dst = append(dst, "/model/"...)
	for i := 0; i < len(modelID); i++ {
		switch c := modelID[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '_', c == '.', c == '~':
			dst = append(dst, c)
		default:
			dst = append(dst, '%', hexDigits[c>>4], hexDigits[c&15])
		}
	}
	if stream {
		return append(dst, "/converse-stream"...)
	}
	return append(dst, "/converse"...)
}

// requestWriter holds what one AppendRequest call needs; it is pooled.
type requestWriter struct {
	p    fastjson.Parser // the request body
	args fastjson.Parser // tool call arguments, parsed while p's values are in use

	out     []byte // the Converse body being written
	blk     []byte // the block being written
	results []byte // the open turn's toolResult blocks, comma-separated
	blocks  []byte // the open turn's other blocks, comma-separated
	role    string // the open turn's role: "user", "assistant" or ""
	turns   int    // turns written to out
	toolUse bool   // a toolUse or toolResult block was written
}

var requestWriters = sync.Pool{New: func() any { return new(requestWriter) }}

// maxKeptBuffer is the largest scratch buffer a pooled writer keeps.
const maxKeptBuffer = 64 << 10

func (w *requestWriter) release() {
	w.out = nil // the caller's
	for _, b := range []*[]byte{&w.blk, &w.results, &w.blocks} {
		if cap(*b) > maxKeptBuffer {
			*b = nil
		}
		*b = (*b)[:0]
	}
	w.role, w.turns, w.toolUse = "", 0, false
	requestWriters.Put(w)
}

// chatFields are the top-level members AppendRequest reads. When a key
// repeats the last occurrence wins, as with openai.RequestParser.
type chatFields struct {
	model, messages, maxTokens, maxCompletionTokens       *fastjson.Value
	stop, temperature, topP, topK, stream                 *fastjson.Value
	tools, toolChoice, parallelToolCalls, serviceTier     *fastjson.Value
	n, logprobs, topLogprobs, responseFormat, logitBias   *fastjson.Value
	functions, functionCall, audio, modalities, webSearch *fastjson.Value
}

func (f *chatFields) set(key []byte, v *fastjson.Value) {
	switch string(key) {
	case "model":
		f.model = v
	case "messages":
		f.messages = v
	case "max_tokens":
		f.maxTokens = v
	case "max_completion_tokens":
		f.maxCompletionTokens = v
	case "stop":
		f.stop = v
	case "temperature":
		f.temperature = v
	case "top_p":
		f.topP = v
	case "top_k":
		f.topK = v
	case "stream":
		f.stream = v
	case "tools":
		f.tools = v
	case "tool_choice":
		f.toolChoice = v
	case "parallel_tool_calls":
		f.parallelToolCalls = v
	case "service_tier":
		f.serviceTier = v
	default:
		f.setRefused(key, v)
	}
}

func (f *chatFields) setRefused(key []byte, v *fastjson.Value) {
	switch string(key) {
	case "n":
		f.n = v
	case "logprobs":
		f.logprobs = v
	case "top_logprobs":
		f.topLogprobs = v
	case "response_format":
		f.responseFormat = v
	case "logit_bias":
		f.logitBias = v
	case "functions":
		f.functions = v
	case "function_call":
		f.functionCall = v
	case "audio":
		f.audio = v
	case "modalities":
		f.modalities = v
	case "web_search_options":
		f.webSearch = v
	}
}

const badJSONHint = "(HINT: This likely means you aren't using your HTTP library correctly. " +
	"The API expects a JSON payload, but what was sent was not valid JSON.)"

// AppendRequest appends to dst the body of a Converse (or ConverseStream)
// request equivalent to openaiBody, an OpenAI chat.completions request,
// and returns the extended slice. The model is not in the body: it goes
// in the path (AppendPath), and "stream" decides which path. The mapping,
// the members it ignores and those it refuses are in the package
// documentation.
//
// Errors are *openai.Error with Status 400, type invalid_request_error, a
// Param naming the offending member and a message saying what is wrong;
// dst is then returned unchanged. The result is valid JSON; strings are
// re-escaped (invalid UTF-8 becomes U+FFFD). Safe for concurrent use.
func AppendRequest(dst, openaiBody []byte) ([]byte, error) {
	w := requestWriters.Get().(*requestWriter)
	defer w.release()
	w.out = dst
	if err := w.request(openaiBody); err != nil {
		return dst, err
	}
	return w.out, nil
}

func (w *requestWriter) request(body []byte) error {
	root, err := w.p.ParseBytes(body)
	if err == nil {
		// The parser bounds nesting depth, the validator rejects what the
		// lenient parser accepts ("nan", raw control characters), so
		// numbers can be copied as written.
		err = openai.ValidateJSON(body)
	}
	if err != nil {
		return openai.BadRequest("", "We could not parse the JSON body of your request: %s. %s", err.Error(), badJSONHint)
	}
	obj, err := root.Object()
	if err != nil {
		return openai.BadRequest("", "the body must be a JSON object")
	}
	var f chatFields
	obj.Visit(f.set)
	if err := f.refuseUnsupported(); err != nil {
		return err
	}
	if model, ok := stringOf(f.model); !ok || len(model) == 0 {
		return openai.BadRequest("model", "'model' is a required property and must be a non-empty string")
	}
	if !isNull(f.stream) && f.stream.Type() != fastjson.TypeTrue && f.stream.Type() != fastjson.TypeFalse {
		return openai.BadRequest("stream", "'stream' must be a boolean")
	}
	w.out = append(w.out, '{')
	if err := w.messages(f.messages); err != nil {
		return err
	}
	if err := w.inferenceConfig(&f); err != nil {
		return err
	}
	if err := w.toolConfig(&f); err != nil {
		return err
	}
	if err := w.outputConfig(f.responseFormat); err != nil {
		return err
	}
	if err := w.serviceTier(f.serviceTier); err != nil {
		return err
	}
	w.out = append(w.out, '}')
	return nil
}
