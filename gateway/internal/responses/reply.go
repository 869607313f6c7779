package responses

import (
	"strconv"
	"sync"

	"github.com/valyala/fastjson"

	"github.com/tollgate/tollgate/gateway/internal/openai"
)

var outputs = sync.Pool{New: func() any { return new(Output) }}

// AppendResponse appends the Response object for a chat.completion body
// (a translated upstream's whole reply) to dst: the message's text as a
// message item, its tool calls as function_call items, finish_reason as
// the status, usage as the Response's. id names the response ("" takes
// "resp_" and the completion's id).
func AppendResponse(dst, chat []byte, id string) ([]byte, error) {
	p := parsers.Get()
	defer parsers.Put(p)
	v, err := p.ParseBytes(chat)
	if err != nil || v.Type() != fastjson.TypeObject || len(v.GetArray("choices")) == 0 {
		return dst, errNotCompletion
	}
	o := outputs.Get().(*Output)
	defer outputs.Put(o)
	rid := []byte(id)
	if id == "" {
		rid = append([]byte("resp_"), trimPrefix(v.GetStringBytes("id"))...)
	}
	o.Reset(rid, v.GetStringBytes("model"), v.GetInt64("created"))
	c := v.Get("choices", "0")
	msg := c.Get("message")
	if text := str(msg.Get("content")); len(text) > 0 {
		it := o.Add(false)
		it.Text, it.Open = append(it.Text, text...), false
	}
	for _, tc := range msg.GetArray("tool_calls") {
		it := o.Add(true)
		it.CallID = append(it.CallID, tc.GetStringBytes("id")...)
		it.Name = append(it.Name, tc.GetStringBytes("function", "name")...)
		it.Text = append(it.Text, tc.GetStringBytes("function", "arguments")...)
		it.Open = false
	}
	return o.AppendResponseObject(dst, StatusOf(c.GetStringBytes("finish_reason")), chatUsage(v.Get("usage"))), nil
}

type replyError string

func (e replyError) Error() string { return string(e) }

const errNotCompletion = replyError("responses: the reply is not a chat.completion object")
const errNotResponse = replyError("responses: the reply is not a Response object")

// chatUsage reads a chat usage object.
func chatUsage(u *fastjson.Value) Usage { return UsageOf(openai.ParseUsage(u)) }

// ResponseUsage reads a Responses usage object (nil or not an object:
// Present false).
func ResponseUsage(u *fastjson.Value) Usage {
	if u == nil || u.Type() != fastjson.TypeObject {
		return Usage{}
	}
	return Usage{Present: true,
		Input: u.GetInt64("input_tokens"), Output: u.GetInt64("output_tokens"), Total: u.GetInt64("total_tokens"),
		CachedInput: u.GetInt64("input_tokens_details", "cached_tokens"),
		Reasoning:   u.GetInt64("output_tokens_details", "reasoning_tokens"),
	}
}

// FinishReason is the chat finish_reason for a Response's status,
// incomplete reason and whether its output holds a function call.
func FinishReason(status, reason []byte, calls bool) string {
	switch {
	case string(status) == "incomplete" && string(reason) == "max_output_tokens":
		return "length"
	case string(status) == "incomplete" && string(reason) == "content_filter":
		return "content_filter"
	case calls:
		return "tool_calls"
	}
	return "stop"
}

// AppendChatView appends the chat.completion a Response object (an
// upstream's whole reply, passed to the client as it is) reads as, for
// the chunk phase and the accounting: the text of its message items'
// output_text parts concatenated, its function calls as tool calls, its
// status as finish_reason, its usage as chat usage.
func AppendChatView(dst, resp []byte) ([]byte, error) {
	p := parsers.Get()
	defer parsers.Put(p)
	v, err := p.ParseBytes(resp)
	if err != nil || v.Type() != fastjson.TypeObject || v.Get("output") == nil {
		return dst, errNotResponse
	}
	dst = append(dst, `{"id":`...)
	dst = openai.AppendJSONString(dst, v.GetStringBytes("id"))
	dst = append(dst, `,"object":"chat.completion","created":`...)
	dst = strconv.AppendInt(dst, v.GetInt64("created_at"), 10)
	dst = append(dst, `,"model":`...)
	dst = openai.AppendJSONString(dst, v.GetStringBytes("model"))
	dst = append(dst, `,"choices":[{"index":0,"message":{"role":"assistant","content":"`...)
	calls := 0
	for _, it := range v.GetArray("output") {
		if string(it.GetStringBytes("type")) != "message" {
			continue
		}
		for _, part := range it.GetArray("content") {
			if string(part.GetStringBytes("type")) == "output_text" {
				dst = openai.AppendJSONEscaped(dst, part.GetStringBytes("text"))
			}
		}
	}
	dst = append(dst, '"')
	for _, it := range v.GetArray("output") {
		if string(it.GetStringBytes("type")) != "function_call" {
			continue
		}
		if calls == 0 {
			dst = append(dst, `,"tool_calls":[`...)
		} else {
			dst = append(dst, ',')
		}
		calls++
		dst = append(dst, `{"id":`...)
		dst = openai.AppendJSONString(dst, it.GetStringBytes("call_id"))
		dst = append(dst, `,"type":"function","function":{"name":`...)
		dst = openai.AppendJSONString(dst, it.GetStringBytes("name"))
		dst = append(dst, `,"arguments":`...)
		dst = openai.AppendJSONString(dst, it.GetStringBytes("arguments"))
		dst = append(dst, `}}`...)
	}
	if calls > 0 {
		dst = append(dst, ']')
	}
	dst = append(dst, `},"finish_reason":"`...)
	dst = append(dst, FinishReason(v.GetStringBytes("status"), v.GetStringBytes("incomplete_details", "reason"), calls > 0)...)
	dst = append(dst, `"}]`...)
	if u := openai.ParseUsage(v.Get("usage")); u.Present {
		u.TotalTokens = u.PromptTokens + u.CompletionTokens
		dst = append(dst, `,"usage":`...)
		dst = openai.AppendUsage(dst, u)
	}
	return append(dst, '}'), nil
}

// AppendWithText appends the Response object resp with its output text
// replaced by text (what a plugin made of the reply): the first message
// item's content becomes one output_text part holding text, other message
// items are dropped (function calls stay); a non-empty finish (a chat
// finish_reason) sets the status as StatusOf maps it: content_filter and
// length make the response incomplete. Only replies a plugin changed take
// this path.
func AppendWithText(dst, resp, text []byte, finish string) ([]byte, error) {
	var p fastjson.Parser
	v, err := p.ParseBytes(resp)
	if err != nil || v.Type() != fastjson.TypeObject || v.Get("output") == nil {
		return dst, errNotResponse
	}
	var a fastjson.Arena
	out := a.NewArray()
	n, placed := 0, false
	for _, it := range v.GetArray("output") {
		if string(it.GetStringBytes("type")) == "message" {
			if placed {
				continue
			}
			placed = true
			it.Set("content", textContent(&a, text))
		}
		out.SetArrayItem(n, it)
		n++
	}
	if !placed && len(text) > 0 {
		msg := a.NewObject()
		msg.Set("type", a.NewString("message"))
		msg.Set("id", a.NewString("msg_guard"))
		msg.Set("status", a.NewString("completed"))
		msg.Set("role", a.NewString("assistant"))
		msg.Set("content", textContent(&a, text))
		out.SetArrayItem(n, msg)
	}
	v.Set("output", out)
	if finish != "" {
		s := StatusOf([]byte(finish))
		v.Set("status", a.NewString(s.Value))
		if s.Reason == "" {
			v.Set("incomplete_details", a.NewNull())
		} else {
			d := a.NewObject()
			d.Set("reason", a.NewString(s.Reason))
			v.Set("incomplete_details", d)
		}
	}
	return appendValue(dst, v), nil
}

// textContent is a content array of one output_text part.
func textContent(a *fastjson.Arena, text []byte) *fastjson.Value {
	content := a.NewArray()
	part := a.NewObject()
	part.Set("type", a.NewString("output_text"))
	part.Set("text", a.NewStringBytes(text))
	part.Set("annotations", a.NewArray())
	content.SetArrayItem(0, part)
	return content
}
