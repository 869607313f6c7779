package gemini

import (
	"strconv"
	"sync"

	"github.com/valyala/fastjson"

	"github.com/tollgate/tollgate/gateway/internal/openai"
)

// requestWriter holds what one AppendRequest call needs; it is pooled.
type requestWriter struct {
	p    fastjson.Parser // the request body
	args fastjson.Parser // tool call arguments and tool results, parsed while p's values are in use

	out    []byte // the Gemini body being written
	part   []byte // the part being written
	parts  []byte // the open turn's parts, comma-separated
	role   string // the open turn's role: "user", "model" or ""
	turns  int    // turns written to out
	signed bool   // the open turn has a functionCall part with a thoughtSignature

	roles []string // the role of each message

	// calls maps the tool call ids of assistant messages to their function
	// names and their order: Gemini matches a functionResponse to its call
	// by name, in the order of the calls.
	calls    map[string]toolCall
	numCalls int // tool calls seen so far (the next toolCall.seq)

	// The functionResponse parts of the tool messages in a row, held back
	// until the run ends so that they go in the order of their calls.
	responses     []byte
	responseSpans []responseSpan
}

// toolCall is an assistant tool call a tool message may answer.
type toolCall struct {
	name string
	seq  int // its place among all the conversation's tool calls
}

// responseSpan is one held-back functionResponse part: responses[start:end].
type responseSpan struct{ seq, start, end int }

var requestWriters = sync.Pool{New: func() any { return new(requestWriter) }}

// maxKeptBuffer is the largest scratch buffer a pooled writer keeps.
const maxKeptBuffer = 64 << 10

func (w *requestWriter) release() {
	w.out = nil // the caller's
	for _, b := range []*[]byte{&w.part, &w.parts, &w.responses} {
		if cap(*b) > maxKeptBuffer {
			*b = nil
		}
		*b = (*b)[:0]
	}
	w.role, w.turns, w.signed, w.numCalls = "", 0, false, 0
	w.responseSpans = w.responseSpans[:0]
	if cap(w.roles) > 1024 {
		w.roles = nil
	}
	w.roles = w.roles[:0]
	clear(w.calls)
	requestWriters.Put(w)
}

// chatFields are the top-level members AppendRequest reads. When a key
// repeats the last occurrence wins, as with openai.RequestParser.
type chatFields struct {
	messages, maxTokens, maxCompletionTokens, stop     *fastjson.Value
	temperature, topP, topK, n, seed                   *fastjson.Value
	presencePenalty, frequencyPenalty, responseFormat  *fastjson.Value
	tools, toolChoice                                  *fastjson.Value
	logprobs, topLogprobs, logitBias, functions        *fastjson.Value
	functionCall, audio, modalities, webSearch, stream *fastjson.Value
}

func (f *chatFields) set(key []byte, v *fastjson.Value) {
	switch string(key) {
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
	case "n":
		f.n = v
	case "seed":
		f.seed = v
	case "presence_penalty":
		f.presencePenalty = v
	case "frequency_penalty":
		f.frequencyPenalty = v
	case "response_format":
		f.responseFormat = v
	case "tools":
		f.tools = v
	case "tool_choice":
		f.toolChoice = v
	case "logprobs":
		f.logprobs = v
	case "top_logprobs":
		f.topLogprobs = v
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
	case "stream":
		f.stream = v
	}
}

const badJSONHint = "(HINT: This likely means you aren't using your HTTP library correctly. " +
	"The API expects a JSON payload, but what was sent was not valid JSON.)"

// AppendRequest appends to dst the Gemini generateContent request body
// equivalent to openaiBody, an OpenAI chat.completions request, and
// returns the extended slice. The model is not part of the body (it is in
// the URL path) and "stream" only chooses the method
// (streamGenerateContent); the caller handles both. The mapping, the
// members it ignores and those it refuses are in the package
// documentation.
//
// Errors are *openai.Error with Status 400, type invalid_request_error, a
// Param naming the offending member ("messages[3].tool_call_id") and a
// message saying what is wrong; dst is then returned unchanged. The result
// is valid JSON; strings are re-escaped (invalid UTF-8 becomes U+FFFD).
// Safe for concurrent use.
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
		// The parser bounds nesting depth; the validator rejects what the
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
	if !isNull(f.stream) && f.stream.Type() != fastjson.TypeTrue && f.stream.Type() != fastjson.TypeFalse {
		return openai.BadRequest("stream", "'stream' must be a boolean")
	}
	w.out = append(w.out, '{')
	if err := w.messages(f.messages); err != nil {
		return err
	}
	if err := w.toolFields(&f); err != nil {
		return err
	}
	if err := w.generationConfig(&f); err != nil {
		return err
	}
	w.out = append(w.out, '}')
	return nil
}

// refuseUnsupported rejects members whose meaning a Gemini upstream cannot
// honour, rather than dropping them silently.
func (f *chatFields) refuseUnsupported() error {
	if !isNull(f.n) {
		if n, err := f.n.Int(); err != nil || n != 1 {
			return openai.BadRequest("n", "'n' must be 1: the gateway asks Gemini models for one candidate per request")
		}
	}
	if !isNull(f.logprobs) {
		switch f.logprobs.Type() {
		case fastjson.TypeTrue:
			return openai.BadRequest("logprobs", "'logprobs' is not supported for Gemini models")
		case fastjson.TypeFalse:
		default:
			return openai.BadRequest("logprobs", "'logprobs' must be a boolean")
		}
	}
	if !isNull(f.topLogprobs) {
		if n, err := f.topLogprobs.Int(); err != nil || n != 0 {
			return openai.BadRequest("top_logprobs", "'top_logprobs' is not supported for Gemini models")
		}
	}
	if !isNull(f.logitBias) {
		if o, err := f.logitBias.Object(); err != nil || o.Len() > 0 {
			return openai.BadRequest("logit_bias", "'logit_bias' is not supported for Gemini models")
		}
	}
	if !isNull(f.functions) {
		return openai.BadRequest("functions", "'functions' is deprecated and not supported for Gemini models; use 'tools'")
	}
	if !isNull(f.functionCall) {
		return openai.BadRequest("function_call", "'function_call' is deprecated and not supported for Gemini models; use 'tool_choice'")
	}
	if !isNull(f.audio) {
		return openai.BadRequest("audio", "audio output is not supported for Gemini models through this gateway")
	}
	if !isNull(f.modalities) {
		a, err := f.modalities.Array()
		if err != nil {
			return openai.BadRequest("modalities", "'modalities' must be an array of strings")
		}
		for i, m := range a {
			if s, _ := stringOf(m); string(s) != "text" {
				return openai.BadRequest("modalities", "'modalities[%d]': only \"text\" output is supported for Gemini models", i)
			}
		}
	}
	if !isNull(f.webSearch) {
		return openai.BadRequest("web_search_options", "'web_search_options' is not supported for Gemini models")
	}
	return nil
}

// generationConfig writes generationConfig, or nothing when no member
// sets one of its fields.
func (w *requestWriter) generationConfig(f *chatFields) error {
	start := len(w.out)
	w.out = append(w.out, `,"generationConfig":{`...)
	open := len(w.out)
	sep := func() {
		if len(w.out) > open {
			w.out = append(w.out, ',')
		}
	}
	if !isNull(f.n) {
		sep()
		w.out = append(w.out, `"candidateCount":1`...)
	}
	if n, err := maxTokens(f); err != nil {
		return err
	} else if n > 0 {
		sep()
		w.out = append(w.out, `"maxOutputTokens":`...)
		w.out = strconv.AppendInt(w.out, n, 10)
	}
	for _, num := range []struct {
		name, field string
		v           *fastjson.Value
		lo, hi      float64
	}{
		{"temperature", "temperature", f.temperature, 0, 2},
		{"top_p", "topP", f.topP, 0, 1},
		{"presence_penalty", "presencePenalty", f.presencePenalty, -2, 2},
		{"frequency_penalty", "frequencyPenalty", f.frequencyPenalty, -2, 2},
	} {
		if isNull(num.v) {
			continue
		}
		if x, err := num.v.Float64(); err != nil || x < num.lo || x > num.hi {
			return openai.BadRequest(num.name, "'%s' must be a number between %g and %g", num.name, num.lo, num.hi)
		}
		sep()
		w.out = append(w.out, '"')
		w.out = append(w.out, num.field...)
		w.out = append(w.out, `":`...)
		w.out = num.v.MarshalTo(w.out)
	}
	if !isNull(f.topK) {
		k, err := f.topK.Int64()
		if err != nil || k < 1 {
			return openai.BadRequest("top_k", "'top_k' must be a positive integer")
		}
		sep()
		w.out = append(w.out, `"topK":`...)
		w.out = strconv.AppendInt(w.out, k, 10)
	}
	if !isNull(f.seed) {
		s, err := f.seed.Int64()
		if err != nil || s < -1<<31 || s > 1<<31-1 {
			return openai.BadRequest("seed", "'seed' must be a 32-bit integer for Gemini models")
		}
		sep()
		w.out = append(w.out, `"seed":`...)
		w.out = strconv.AppendInt(w.out, s, 10)
	}
	if err := w.stop(f.stop, sep); err != nil {
		return err
	}
	if err := w.responseFormat(f.responseFormat, sep); err != nil {
		return err
	}
	if len(w.out) == open {
		w.out = w.out[:start]
		return nil
	}
	w.out = append(w.out, '}')
	return nil
}

// maxTokens returns max_completion_tokens if set, else max_tokens, else 0.
func maxTokens(f *chatFields) (int64, error) {
	var n int64
	for _, m := range []struct {
		name string
		v    *fastjson.Value
	}{{"max_tokens", f.maxTokens}, {"max_completion_tokens", f.maxCompletionTokens}} {
		if isNull(m.v) {
			continue
		}
		v, err := m.v.Int64()
		if err != nil || v < 1 || v > 1<<31-1 {
			return 0, openai.BadRequest(m.name, "'%s' must be a positive integer", m.name)
		}
		n = v
	}
	return n, nil
}

// stop writes stop (a string or an array of strings) as stopSequences;
// empty strings are dropped.
func (w *requestWriter) stop(v *fastjson.Value, sep func()) error {
	if isNull(v) {
		return nil
	}
	var list []*fastjson.Value
	if v.Type() == fastjson.TypeString {
		list = []*fastjson.Value{v}
	} else {
		a, err := v.Array()
		if err != nil {
			return openai.BadRequest("stop", "'stop' must be a string, an array of strings, or null")
		}
		list = a
	}
	n := 0
	for i, e := range list {
		s, ok := stringOf(e)
		if !ok {
			return openai.BadRequest("stop", "'stop[%d]' must be a string", i)
		}
		if len(s) == 0 {
			continue
		}
		if n == 0 {
			sep()
			w.out = append(w.out, `"stopSequences":[`...)
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

// responseFormat writes responseMimeType (and responseSchema) for
// response_format json_object and json_schema; text writes nothing.
func (w *requestWriter) responseFormat(v *fastjson.Value, sep func()) error {
	if isNull(v) {
		return nil
	}
	if v.Type() != fastjson.TypeObject {
		return openai.BadRequest("response_format", "'response_format' must be an object")
	}
	typ, _ := stringOf(v.Get("type"))
	switch string(typ) {
	case "text":
		return nil
	case "json_object":
		sep()
		w.out = append(w.out, `"responseMimeType":"application/json"`...)
		return nil
	case "json_schema":
		js := v.Get("json_schema")
		if js == nil || js.Type() != fastjson.TypeObject {
			return openai.BadRequest("response_format.json_schema", "'response_format.json_schema' is a required property and must be an object")
		}
		sep()
		w.out = append(w.out, `"responseMimeType":"application/json"`...)
		schema := js.Get("schema")
		if isNull(schema) {
			return nil
		}
		w.out = append(w.out, `,"responseSchema":`...)
		var err error
		w.out, err = appendSchema(w.out, schema, "response_format.json_schema.schema")
		return err
	}
	return openai.BadRequest("response_format.type", "'response_format.type' must be \"text\", \"json_object\" or \"json_schema\"; got %q", typ)
}
