package responses

import (
	"fmt"

	"github.com/valyala/fastjson"

	"github.com/tollgate/tollgate/gateway/internal/openai"
)

// RequestParser reads the facts the gateway needs from a Responses API
// request body (POST /v1/responses) into an openai.Request, so that
// routing, guards, rate limits and budgets treat it like a chat request.
// It reuses its memory and does not allocate once warmed up; it is not
// safe for concurrent use. The zero value is ready to use.
type RequestParser struct {
	p fastjson.Parser
}

// requestMembers are the members Parse reads: the route, allowlist,
// budget and guards decide on them.
var requestMembers = [][]byte{
	[]byte("model"), []byte("stream"), []byte("max_output_tokens"), []byte("input"), []byte("instructions"),
}

// Parse validates body and fills r (reset first):
//
//   - Model: "model", a non-empty string (required).
//   - Stream: "stream" is true. IncludeUsage is set with it: a Responses
//     stream always reports usage (response.completed), so the gateway
//     asks for nothing more.
//   - MaxTokens, HasMaxTokens: "max_output_tokens", a non-negative
//     integer when present.
//   - Messages: 1 for "instructions", 1 for a string "input", else the
//     number of items of the "input" array.
//   - PromptChars: the text of "instructions", of a string input, of
//     message items (a string content, input_text and output_text parts),
//     of function_call arguments and of function_call_output outputs.
//   - EstimatedPromptTokens: PromptChars/4 + 4 per message, at least 1.
//   - Bound: what bounds the prompt's tokens (openai.BoundFacts).
//
// Other members are not inspected here. Errors are *openai.Error with
// Status 400 and a Param naming the member. A body naming one of these
// members twice, or in another case, is refused (see openai.CheckMembers).
func (p *RequestParser) Parse(body []byte, r *openai.Request) error {
	*r = openai.Request{}
	root, err := p.p.ParseBytes(body)
	if err == nil {
		err = openai.ValidateJSON(body)
	}
	if err != nil {
		return openai.BadRequest("", "We could not parse the JSON body of your request: %s.", err.Error())
	}
	if root.Type() != fastjson.TypeObject {
		return openai.BadRequest("", "The request body must be a JSON object.")
	}
	obj, _ := root.Object()
	if err := openai.CheckMembers(obj, requestMembers); err != nil {
		return err
	}
	model, ok := stringOf(root.Get("model"))
	if !ok || len(model) == 0 {
		return openai.BadRequest("model", "Missing required parameter: 'model' (a non-empty string).")
	}
	r.Model = model
	switch v := root.Get("stream"); {
	case isNull(v), v.Type() == fastjson.TypeFalse:
	case v.Type() == fastjson.TypeTrue:
		r.Stream, r.IncludeUsage = true, true
	default:
		return openai.BadRequest("stream", "Invalid type for 'stream': expected a boolean.")
	}
	if v := root.Get("max_output_tokens"); !isNull(v) {
		n, err := v.Int64()
		if v.Type() != fastjson.TypeNumber || err != nil || n < 0 {
			return openai.BadRequest("max_output_tokens", "Invalid 'max_output_tokens': expected a non-negative integer.")
		}
		r.MaxTokens, r.HasMaxTokens = n, true
	}
	switch v := root.Get("instructions"); {
	case isNull(v):
	case v.Type() == fastjson.TypeString:
		s, _ := v.StringBytes()
		r.PromptChars += len(s)
		r.Messages++
	default:
		return openai.BadRequest("instructions", "Invalid type for 'instructions': expected a string.")
	}
	if err := addInput(r, root.Get("input")); err != nil {
		return err
	}
	r.EstimatedPromptTokens = max(r.PromptChars/4+4*r.Messages, 1)
	r.Bound.ReadResponses(len(body), root)
	return nil
}

// addInput counts "input": a string, or an array of item objects.
func addInput(r *openai.Request, v *fastjson.Value) error {
	switch {
	case isNull(v):
		return nil // previous_response_id or prompt may stand for it
	case v.Type() == fastjson.TypeString:
		s, _ := v.StringBytes()
		r.PromptChars += len(s)
		r.Messages++
		return nil
	case v.Type() != fastjson.TypeArray:
		return openai.BadRequest("input", "Invalid type for 'input': expected a string or an array of input items.")
	}
	items, _ := v.Array()
	for i, it := range items {
		if it.Type() != fastjson.TypeObject {
			return openai.BadRequest(fmt.Sprintf("input[%d]", i), "Invalid type for 'input[%d]': expected an object.", i)
		}
		r.PromptChars += itemChars(it)
	}
	r.Messages += len(items)
	return nil
}

// itemChars is the text of one input item.
func itemChars(it *fastjson.Value) int {
	n := len(str(it.Get("arguments")))
	if o := it.Get("output"); o != nil {
		n += contentChars(o)
	}
	return n + contentChars(it.Get("content"))
}

// contentChars is the text of a string content or of its text parts.
func contentChars(v *fastjson.Value) int {
	if v == nil {
		return 0
	}
	if s, ok := stringOf(v); ok {
		return len(s)
	}
	n := 0
	for _, part := range v.GetArray() {
		n += len(str(part.Get("text")))
	}
	return n
}
