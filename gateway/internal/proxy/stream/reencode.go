package stream

import (
	"bytes"
	"encoding/json"
	"errors"
	"sync"

	"github.com/valyala/fastjson"

	"github.com/tollgate/tollgate/gateway/internal/openai"
	"github.com/tollgate/tollgate/sdk/wasmhost"
)

// Re-encoding: the only bytes the gateway writes itself in a reply are the
// events and bodies a plugin changed. Everything else is the upstream's.

var reencoders = sync.Pool{New: func() any { return new(reencoder) }}

type reencoder struct {
	p fastjson.Parser
}

var errNoChoice = errors.New("reply has no choices[0] to rewrite")

// AppendWithText appends data (a chunk, chat.completion or text_completion
// JSON object) with the text of choices[0] set to text — delta.content,
// message.content or text, whichever the object uses — and, when finish is
// non-nil, its finish_reason set to finish. With synth (an event the
// gateway writes itself, from a template chunk) the role and tool calls
// are dropped, usage is null and a nil finish means finish_reason null.
//
// It uses encoding/json (numbers kept exact): fastjson's encoder writes Go
// escapes such as \x01 for control characters, which is not JSON. Only
// events a plugin changed take this path.
func AppendWithText(dst, data, text, finish []byte, synth bool) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil {
		return dst, err
	}
	choices, _ := obj["choices"].([]any)
	if len(choices) == 0 {
		return dst, errNoChoice
	}
	c0, ok := choices[0].(map[string]any)
	if !ok {
		return dst, errNoChoice
	}
	s := string(text)
	if d, ok := c0["delta"].(map[string]any); ok {
		d["content"] = s
		if synth {
			delete(d, "role")
			delete(d, "tool_calls")
		}
	} else if m, ok := c0["message"].(map[string]any); ok {
		m["content"] = s
	} else {
		c0["text"] = s
	}
	switch {
	case finish != nil:
		c0["finish_reason"] = string(finish)
	case synth:
		c0["finish_reason"] = nil
	}
	if synth {
		if _, ok := obj["usage"]; ok {
			obj["usage"] = nil
		}
	}
	buf := bytes.NewBuffer(dst)
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(obj); err != nil {
		return dst, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// appendEvent appends "data: <json>\n\n".
func appendEvent(dst, json []byte) []byte {
	dst = append(dst, "data: "...)
	dst = append(dst, json...)
	return append(dst, "\n\n"...)
}

// ReplyText returns choices[0]'s text of a non-streamed reply (message
// content or text) and the usage it reports.
func ReplyText(body []byte) (text []byte, usage openai.Usage, err error) {
	re := reencoders.Get().(*reencoder)
	defer reencoders.Put(re)
	v, err := re.p.ParseBytes(body)
	if err != nil {
		return nil, openai.Usage{}, err
	}
	usage = openai.ParseUsage(v.Get("usage"))
	choices := v.GetArray("choices")
	if len(choices) == 0 {
		return nil, usage, nil
	}
	if b := choices[0].GetStringBytes("message", "content"); b != nil {
		return append([]byte(nil), b...), usage, nil
	}
	return append([]byte(nil), choices[0].GetStringBytes("text")...), usage, nil
}

// AppendReplyToolCalls appends the tool calls of choices[0].message of a
// non-streamed reply to dst, one record each as chunk_tool_calls renders a
// delta (wasmhost.AppendToolCallDelta) with the call's whole arguments; dst
// unchanged when it has none. Replies without "tool_calls" are not parsed.
func AppendReplyToolCalls(dst, body []byte) []byte {
	if !bytes.Contains(body, []byte(`"tool_calls"`)) {
		return dst
	}
	re := reencoders.Get().(*reencoder)
	defer reencoders.Put(re)
	v, err := re.p.ParseBytes(body)
	if err != nil {
		return dst
	}
	choices := v.GetArray("choices")
	if len(choices) == 0 {
		return dst
	}
	for i, tc := range choices[0].GetArray("message", "tool_calls") {
		index := i
		if tc.Exists("index") {
			index = tc.GetInt("index")
		}
		dst = wasmhost.AppendToolCallDelta(dst, index, tc.GetStringBytes("function", "name"), tc.GetStringBytes("function", "arguments"))
	}
	return dst
}
