package anthropic

import (
	"strconv"
	"sync"

	"github.com/valyala/fastjson"

	"github.com/tollgate/tollgate/gateway/internal/openai"
)

// DefaultMaxTokens is the max_tokens AppendRequest sends when the client
// set neither max_tokens nor max_completion_tokens and the caller passed
// defaultMaxTokens <= 0. Anthropic requires the field.
const DefaultMaxTokens = 4096

// requestWriter holds what one AppendRequest call needs; it is pooled.
type requestWriter struct {
	p    fastjson.Parser // the request body
	args fastjson.Parser // tool call arguments, parsed while p's values are in use

	out     []byte // the Anthropic body being written
	blk     []byte // the block being written
	results []byte // the open turn's tool_result blocks, comma-separated
	blocks  []byte // the open turn's other blocks, comma-separated
	role    string // the open turn's role: "user", "assistant" or ""
	turns   int    // turns written to out
}

var requestWriters = sync.Pool{New: func() any { return new(requestWriter) }}

// maxKeptBuffer is the largest scratch buffer a pooled requestWriter keeps.
const maxKeptBuffer = 64 << 10

func (w *requestWriter) release() {
	w.out = nil // the caller's
	for _, b := range []*[]byte{&w.blk, &w.results, &w.blocks} {
		if cap(*b) > maxKeptBuffer {
			*b = nil
		}
		*b = (*b)[:0]
	}
	w.role, w.turns = "", 0
	requestWriters.Put(w)
}

// chatFields are the top-level members AppendRequest reads. When a key
// repeats the last occurrence wins, as with openai.RequestParser.
type chatFields struct {
	model, messages, maxTokens, maxCompletionTokens       *fastjson.Value
	stop, temperature, topP, topK, stream, user           *fastjson.Value
	tools, toolChoice, parallelToolCalls                  *fastjson.Value
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
	case "user":
		f.user = v
	case "tools":
		f.tools = v
	case "tool_choice":
		f.toolChoice = v
	case "parallel_tool_calls":
		f.parallelToolCalls = v
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

// AppendRequest appends to dst the Anthropic Messages API request
// equivalent to openaiBody, an OpenAI chat.completions request, and
// returns the extended slice. The mapping, the members it ignores and
// those it refuses are in the package documentation.
//
// max_tokens is required by Anthropic: when the client set neither
// max_tokens nor max_completion_tokens, defaultMaxTokens is sent (<= 0
// means DefaultMaxTokens).
//
// Errors are *openai.Error with Status 400, type invalid_request_error, a
// Param naming the offending member ("messages[2].tool_calls[0].function.arguments")
// and a message saying what is wrong; dst is then returned unchanged. The
// result is valid JSON; strings are re-escaped (invalid UTF-8 becomes
// U+FFFD). Safe for concurrent use.
func AppendRequest(dst, openaiBody []byte, defaultMaxTokens int) ([]byte, error) {
	w := requestWriters.Get().(*requestWriter)
	defer w.release()
	w.out = dst
	if err := w.request(openaiBody, defaultMaxTokens); err != nil {
		return dst, err
	}
	return w.out, nil
}

func (w *requestWriter) request(body []byte, defaultMaxTokens int) error {
	root, err := w.p.ParseBytes(body)
	if err != nil {
		return openai.BadRequest("", "We could not parse the JSON body of your request: %s. %s", err.Error(), badJSONHint)
	}
	// Parse first, then validate: the parser bounds nesting depth, the
	// validator rejects what the lenient parser accepts ("nan", raw
	// control characters), so numbers can be copied as written.
	if err := openai.ValidateJSON(body); err != nil {
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

	model, ok := stringOf(f.model)
	if !ok || len(model) == 0 {
		return openai.BadRequest("model", "'model' is a required property and must be a non-empty string")
	}
	w.out = append(w.out, `{"model":`...)
	w.out = openai.AppendJSONString(w.out, model)
	if err := w.maxTokens(&f, defaultMaxTokens); err != nil {
		return err
	}
	if err := w.messages(f.messages); err != nil {
		return err
	}
	if err := w.sampling(&f); err != nil {
		return err
	}
	if err := w.toolFields(&f); err != nil {
		return err
	}
	if u, ok := stringOf(f.user); ok && len(u) > 0 {
		w.out = append(w.out, `,"metadata":{"user_id":`...)
		w.out = openai.AppendJSONString(w.out, u)
		w.out = append(w.out, '}')
	} else if !isNull(f.user) && !ok {
		return openai.BadRequest("user", "'user' must be a string")
	}
	w.out = append(w.out, '}')
	return nil
}

// refuseUnsupported rejects members whose meaning an Anthropic upstream
// cannot honour, rather than dropping them silently.
func (f *chatFields) refuseUnsupported() error {
	if !isNull(f.n) {
		if n, err := f.n.Int(); err != nil || n != 1 {
			return openai.BadRequest("n", "'n' must be 1: Anthropic models return one choice per request")
		}
	}
	if !isNull(f.logprobs) {
		switch f.logprobs.Type() {
		case fastjson.TypeTrue:
			return openai.BadRequest("logprobs", "'logprobs' is not supported: Anthropic models do not return log probabilities")
		case fastjson.TypeFalse:
		default:
			return openai.BadRequest("logprobs", "'logprobs' must be a boolean")
		}
	}
	if !isNull(f.topLogprobs) {
		if n, err := f.topLogprobs.Int(); err != nil || n != 0 {
			return openai.BadRequest("top_logprobs", "'top_logprobs' is not supported: Anthropic models do not return log probabilities")
		}
	}
	if !isNull(f.responseFormat) {
		typ, _ := stringOf(f.responseFormat.Get("type"))
		if f.responseFormat.Type() != fastjson.TypeObject || string(typ) != "text" {
			return openai.BadRequest("response_format",
				"'response_format' of type %q is not supported for Anthropic models; only {\"type\":\"text\"} is (describe the JSON you want in the prompt instead)", typ)
		}
	}
	if !isNull(f.logitBias) {
		if o, err := f.logitBias.Object(); err != nil || o.Len() > 0 {
			return openai.BadRequest("logit_bias", "'logit_bias' is not supported for Anthropic models")
		}
	}
	if !isNull(f.functions) {
		return openai.BadRequest("functions", "'functions' is deprecated and not supported for Anthropic models; use 'tools'")
	}
	if !isNull(f.functionCall) {
		return openai.BadRequest("function_call", "'function_call' is deprecated and not supported for Anthropic models; use 'tool_choice'")
	}
	if !isNull(f.audio) {
		return openai.BadRequest("audio", "audio output is not supported for Anthropic models")
	}
	if !isNull(f.modalities) {
		a, err := f.modalities.Array()
		if err != nil {
			return openai.BadRequest("modalities", "'modalities' must be an array of strings")
		}
		for i, m := range a {
			if s, _ := stringOf(m); string(s) != "text" {
				return openai.BadRequest("modalities", "'modalities[%d]': only \"text\" output is supported for Anthropic models", i)
			}
		}
	}
	if !isNull(f.webSearch) {
		return openai.BadRequest("web_search_options", "'web_search_options' is not supported for Anthropic models")
	}
	return nil
}

// maxTokens writes max_tokens: max_completion_tokens if set, else
// max_tokens, else the default.
func (w *requestWriter) maxTokens(f *chatFields, def int) error {
	n := int64(def)
	if def <= 0 {
		n = DefaultMaxTokens
	}
	for _, m := range []struct {
		name string
		v    *fastjson.Value
	}{{"max_tokens", f.maxTokens}, {"max_completion_tokens", f.maxCompletionTokens}} {
		if isNull(m.v) {
			continue
		}
		v, err := m.v.Int64()
		if err != nil || v < 1 {
			return openai.BadRequest(m.name, "'%s' must be a positive integer", m.name)
		}
		n = v
	}
	w.out = append(w.out, `,"max_tokens":`...)
	w.out = strconv.AppendInt(w.out, n, 10)
	return nil
}

// sampling writes stop_sequences, temperature, top_p, top_k and stream.
func (w *requestWriter) sampling(f *chatFields) error {
	if err := w.stop(f.stop); err != nil {
		return err
	}
	if !isNull(f.temperature) {
		t, err := f.temperature.Float64()
		if err != nil || t < 0 {
			return openai.BadRequest("temperature", "'temperature' must be a number between 0 and 2")
		}
		w.out = append(w.out, `,"temperature":`...)
		if t > 1 {
			// Anthropic's range is [0, 1]; its own OpenAI compatibility
			// layer caps larger values at 1, and so does the gateway.
			w.out = append(w.out, '1')
		} else {
			w.out = f.temperature.MarshalTo(w.out)
		}
	}
	if !isNull(f.topP) {
		if p, err := f.topP.Float64(); err != nil || p < 0 || p > 1 {
			return openai.BadRequest("top_p", "'top_p' must be a number between 0 and 1")
		}
		w.out = append(w.out, `,"top_p":`...)
		w.out = f.topP.MarshalTo(w.out)
	}
	if !isNull(f.topK) {
		k, err := f.topK.Int64()
		if err != nil || k < 1 {
			return openai.BadRequest("top_k", "'top_k' must be a positive integer")
		}
		w.out = append(w.out, `,"top_k":`...)
		w.out = strconv.AppendInt(w.out, k, 10)
	}
	if !isNull(f.stream) {
		switch f.stream.Type() {
		case fastjson.TypeTrue:
			w.out = append(w.out, `,"stream":true`...)
		case fastjson.TypeFalse:
		default:
			return openai.BadRequest("stream", "'stream' must be a boolean")
		}
	}
	return nil
}

// stop writes stop (a string or an array of strings) as stop_sequences.
func (w *requestWriter) stop(v *fastjson.Value) error {
	if isNull(v) {
		return nil
	}
	if s, ok := stringOf(v); ok {
		if len(s) > 0 {
			w.out = append(w.out, `,"stop_sequences":[`...)
			w.out = openai.AppendJSONString(w.out, s)
			w.out = append(w.out, ']')
		}
		return nil
	}
	a, err := v.Array()
	if err != nil {
		return openai.BadRequest("stop", "'stop' must be a string, an array of strings, or null")
	}
	n := 0
	for i, e := range a {
		s, ok := stringOf(e)
		if !ok {
			return openai.BadRequest("stop", "'stop[%d]' must be a string", i)
		}
		if len(s) == 0 {
			continue
		}
		if n == 0 {
			w.out = append(w.out, `,"stop_sequences":[`...)
		} else {
			w.out = append(w.out, ',')
		}
		w.out = openai.AppendJSONString(w.out, s)
		n++
	}
	if n > 0 {
		w.out = append(w.out, ']')
	}
	return nil
}
