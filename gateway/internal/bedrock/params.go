package bedrock

import (
	"strconv"

	"github.com/valyala/fastjson"

	"github.com/tollgate/tollgate/gateway/internal/openai"
)

// refuseUnsupported rejects members whose meaning the Converse API cannot
// express, rather than dropping them silently.
func (f *chatFields) refuseUnsupported() error {
	if !isNull(f.n) {
		if n, err := f.n.Int(); err != nil || n != 1 {
			return openai.BadRequest("n", "'n' must be 1: Bedrock's Converse API returns one choice per request")
		}
	}
	if !isNull(f.logprobs) {
		switch f.logprobs.Type() {
		case fastjson.TypeTrue:
			return openai.BadRequest("logprobs", "'logprobs' is not supported: Bedrock's Converse API does not return log probabilities")
		case fastjson.TypeFalse:
		default:
			return openai.BadRequest("logprobs", "'logprobs' must be a boolean")
		}
	}
	if !isNull(f.topLogprobs) {
		if n, err := f.topLogprobs.Int(); err != nil || n != 0 {
			return openai.BadRequest("top_logprobs", "'top_logprobs' is not supported: Bedrock's Converse API does not return log probabilities")
		}
	}
	if !isNull(f.logitBias) {
		if o, err := f.logitBias.Object(); err != nil || o.Len() > 0 {
			return openai.BadRequest("logit_bias", "'logit_bias' is not supported for Bedrock models")
		}
	}
	if !isNull(f.topK) {
		return openai.BadRequest("top_k", "'top_k' is not supported for Bedrock models: the Converse API has no common top_k")
	}
	return f.refuseOther()
}

func (f *chatFields) refuseOther() error {
	if !isNull(f.functions) {
		return openai.BadRequest("functions", "'functions' is deprecated and not supported for Bedrock models; use 'tools'")
	}
	if !isNull(f.functionCall) {
		return openai.BadRequest("function_call", "'function_call' is deprecated and not supported for Bedrock models; use 'tool_choice'")
	}
	if !isNull(f.audio) {
		return openai.BadRequest("audio", "audio output is not supported for Bedrock models")
	}
	if !isNull(f.modalities) {
		a, err := f.modalities.Array()
		if err != nil {
			return openai.BadRequest("modalities", "'modalities' must be an array of strings")
		}
		for i, m := range a {
			if s, _ := stringOf(m); string(s) != "text" {
				return openai.BadRequest("modalities", "'modalities[%d]': only \"text\" output is supported for Bedrock models", i)
			}
		}
	}
	if !isNull(f.webSearch) {
		return openai.BadRequest("web_search_options", "'web_search_options' is not supported for Bedrock models")
	}
	return nil
}

// inferenceConfig writes "inferenceConfig" with maxTokens, temperature,
// topP and stopSequences, or nothing when the client set none of them.
func (w *requestWriter) inferenceConfig(f *chatFields) error {
	mark := len(w.out)
	w.out = append(w.out, `,"inferenceConfig":{`...)
	start := len(w.out)
	sep := func() {
		if len(w.out) > start {
			w.out = append(w.out, ',')
		}
	}
	var maxTokens *fastjson.Value
	for _, m := range []struct {
		name string
		v    *fastjson.Value
	}{{"max_tokens", f.maxTokens}, {"max_completion_tokens", f.maxCompletionTokens}} {
		if isNull(m.v) {
			continue
		}
		if v, err := m.v.Int64(); err != nil || v < 1 || v > 1<<31-1 {
			return openai.BadRequest(m.name, "'%s' must be a positive integer", m.name)
		}
		maxTokens = m.v // max_completion_tokens wins
	}
	if maxTokens != nil {
		n, _ := maxTokens.Int64()
		w.out = append(w.out, `"maxTokens":`...)
		w.out = strconv.AppendInt(w.out, n, 10)
	}
	if !isNull(f.temperature) {
		t, err := f.temperature.Float64()
		if err != nil || t < 0 || t > 2 {
			return openai.BadRequest("temperature", "'temperature' must be a number between 0 and 2")
		}
		sep()
		w.out = append(w.out, `"temperature":`...)
		if t > 1 {
			// Bedrock's models take [0, 1]; larger values are capped, as
			// the Anthropic translation does.
			w.out = append(w.out, '1')
		} else {
			w.out = f.temperature.MarshalTo(w.out)
		}
	}
	if !isNull(f.topP) {
		if p, err := f.topP.Float64(); err != nil || p < 0 || p > 1 {
			return openai.BadRequest("top_p", "'top_p' must be a number between 0 and 1")
		}
		sep()
		w.out = append(w.out, `"topP":`...)
		w.out = f.topP.MarshalTo(w.out)
	}
	if err := w.stop(f.stop, sep); err != nil {
		return err
	}
	if len(w.out) == start {
		w.out = w.out[:mark]
		return nil
	}
	w.out = append(w.out, '}')
	return nil
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

// outputConfig writes response_format {"type":"json_schema"} as
// outputConfig.textFormat (Converse's structured output; the schema goes
// as JSON text). {"type":"text"} writes nothing; json_object has no
// Converse equivalent.
func (w *requestWriter) outputConfig(v *fastjson.Value) error {
	if isNull(v) {
		return nil
	}
	typ, _ := stringOf(v.Get("type"))
	switch {
	case v.Type() == fastjson.TypeObject && string(typ) == "text":
		return nil
	case v.Type() != fastjson.TypeObject || string(typ) != "json_schema":
		return openai.BadRequest("response_format",
			"'response_format' of type %q is not supported for Bedrock models; \"text\" and \"json_schema\" are (give json_schema a schema)", typ)
	}
	js := v.Get("json_schema")
	if js == nil || js.Type() != fastjson.TypeObject {
		return openai.BadRequest("response_format.json_schema", "'response_format.json_schema' is a required property and must be an object")
	}
	schema := js.Get("schema")
	if schema == nil || schema.Type() != fastjson.TypeObject {
		return openai.BadRequest("response_format.json_schema.schema", "'response_format.json_schema.schema' must be a JSON Schema object for Bedrock models")
	}
	name, ok := stringOf(js.Get("name"))
	if !ok || len(name) == 0 {
		return openai.BadRequest("response_format.json_schema.name", "'response_format.json_schema.name' is a required property and must be a non-empty string")
	}
	w.blk = appendValue(w.blk[:0], schema)
	w.out = append(w.out, `,"outputConfig":{"textFormat":{"type":"json_schema","structure":{"jsonSchema":{"schema":`...)
	w.out = openai.AppendJSONString(w.out, w.blk)
	w.out = append(w.out, `,"name":`...)
	w.out = openai.AppendJSONString(w.out, name)
	if d, ok := stringOf(js.Get("description")); ok && len(d) > 0 {
		w.out = append(w.out, `,"description":`...)
		w.out = openai.AppendJSONString(w.out, d)
	}
	w.out = append(w.out, "}}}}"...)
	return nil
}

// serviceTier writes service_tier default, flex or priority as
// serviceTier; "auto" (the account's default) writes nothing.
func (w *requestWriter) serviceTier(v *fastjson.Value) error {
	if isNull(v) {
		return nil
	}
	tier, _ := stringOf(v)
	switch string(tier) {
	case "auto":
		return nil
	case "default", "flex", "priority":
		w.out = append(w.out, `,"serviceTier":{"type":"`...)
		w.out = append(w.out, tier...)
		w.out = append(w.out, `"}`...)
		return nil
	}
	return openai.BadRequest("service_tier", "'service_tier' must be \"auto\", \"default\", \"flex\" or \"priority\" for Bedrock models")
}
