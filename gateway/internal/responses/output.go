package responses

import (
	"strconv"

	"github.com/tollgate/tollgate/gateway/internal/openai"
)

// Output is a Response's output as written so far: its items in order,
// and the response's identity. The stream translator builds it as it
// writes events; a guard that changes a passed-through stream keeps one
// of what the client was sent, to write the events that end the stream.
// It reuses its memory across Reset.
type Output struct {
	ID, Model []byte
	Created   int64
	Items     []Item
	n         int // items in use
	Seq       int64
}

// Item is one output item: a message with one output_text part, or a
// function call.
type Item struct {
	Func   bool
	Open   bool // added, not done
	ID     []byte
	CallID []byte // function calls
	Name   []byte
	Text   []byte // the message's text, or the call's arguments so far
	Index  int    // chat tool-call index (function calls)
}

// Reset empties o for a response with this id, model and creation time.
func (o *Output) Reset(id, model []byte, created int64) {
	o.ID, o.Model, o.Created = append(o.ID[:0], id...), append(o.Model[:0], model...), created
	o.n, o.Seq = 0, 0
}

// Len is the number of items.
func (o *Output) Len() int { return o.n }

// At is item i (i < Len).
func (o *Output) At(i int) *Item { return &o.Items[i] }

// Add appends a new open item and returns it; its byte slices are empty,
// its ID set to a name derived from the response id.
func (o *Output) Add(fn bool) *Item {
	if o.n == len(o.Items) {
		o.Items = append(o.Items, Item{})
	}
	it := &o.Items[o.n]
	it.Func, it.Open, it.Index = fn, true, 0
	it.CallID, it.Name, it.Text = it.CallID[:0], it.Name[:0], it.Text[:0]
	if fn {
		it.ID = append(it.ID[:0], "fc_"...)
	} else {
		it.ID = append(it.ID[:0], "msg_"...)
	}
	it.ID = append(it.ID, trimPrefix(o.ID)...)
	it.ID = append(it.ID, '_')
	it.ID = strconv.AppendInt(it.ID, int64(o.n), 10)
	o.n++
	return it
}

// Open returns the open item (the last one when it is open), or nil.
func (o *Output) Open() (*Item, int) {
	if o.n == 0 || !o.Items[o.n-1].Open {
		return nil, -1
	}
	return &o.Items[o.n-1], o.n - 1
}

// trimPrefix drops a resp_/chatcmpl-/msg_ style prefix from an id.
func trimPrefix(id []byte) []byte {
	for i, c := range id {
		if c == '_' || c == '-' {
			if i+1 < len(id) {
				return id[i+1:]
			}
			break
		}
	}
	return id
}

// Usage is a Responses usage object's counts.
type Usage struct {
	Present                bool
	Input, Output, Total   int64
	CachedInput, Reasoning int64
}

// UsageOf is c, the gateway's usage, in a Responses usage object's terms.
func UsageOf(c openai.Usage) Usage {
	if !c.Present {
		return Usage{}
	}
	return Usage{Present: true, Input: c.PromptTokens, Output: c.CompletionTokens, Total: c.TotalTokens,
		CachedInput: c.CachedTokens, Reasoning: c.ReasoningTokens}
}

// appendUsage appends the Responses usage object for u.
func appendUsage(dst []byte, u Usage) []byte {
	if !u.Present {
		return append(dst, "null"...)
	}
	dst = append(dst, `{"input_tokens":`...)
	dst = strconv.AppendInt(dst, u.Input, 10)
	dst = append(dst, `,"input_tokens_details":{"cached_tokens":`...)
	dst = strconv.AppendInt(dst, u.CachedInput, 10)
	dst = append(dst, `},"output_tokens":`...)
	dst = strconv.AppendInt(dst, u.Output, 10)
	dst = append(dst, `,"output_tokens_details":{"reasoning_tokens":`...)
	dst = strconv.AppendInt(dst, u.Reasoning, 10)
	dst = append(dst, `},"total_tokens":`...)
	total := u.Total
	if total == 0 {
		total = u.Input + u.Output
	}
	dst = strconv.AppendInt(dst, total, 10)
	return append(dst, '}')
}

// Status is how a response ended.
type Status struct {
	// Value is "in_progress", "completed", "incomplete" or "failed".
	Value string
	// Reason is incomplete_details.reason: "max_output_tokens" or
	// "content_filter" ("" for none).
	Reason string
}

// StatusOf is the Responses status for a chat finish_reason.
func StatusOf(finish []byte) Status {
	switch string(finish) {
	case "length":
		return Status{Value: "incomplete", Reason: "max_output_tokens"}
	case "content_filter":
		return Status{Value: "incomplete", Reason: "content_filter"}
	}
	return Status{Value: "completed"}
}

// AppendResponseObject appends the Response object for o with status s
// and usage u; items are written as they stand (open ones "in_progress").
func (o *Output) AppendResponseObject(dst []byte, s Status, u Usage) []byte {
	dst = append(dst, `{"id":`...)
	dst = openai.AppendJSONString(dst, o.ID)
	dst = append(dst, `,"object":"response","created_at":`...)
	dst = strconv.AppendInt(dst, o.Created, 10)
	dst = append(dst, `,"status":"`...)
	dst = append(dst, s.Value...)
	dst = append(dst, `","error":null,"incomplete_details":`...)
	if s.Reason != "" {
		dst = append(dst, `{"reason":"`...)
		dst = append(dst, s.Reason...)
		dst = append(dst, `"}`...)
	} else {
		dst = append(dst, "null"...)
	}
	dst = append(dst, `,"model":`...)
	dst = openai.AppendJSONString(dst, o.Model)
	dst = append(dst, `,"output":[`...)
	for i := range o.n {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = o.Items[i].appendJSON(dst)
	}
	dst = append(dst, `],"parallel_tool_calls":true,"tool_choice":"auto","tools":[],"usage":`...)
	dst = appendUsage(dst, u)
	return append(dst, '}')
}

// appendJSON appends the item object.
func (it *Item) appendJSON(dst []byte) []byte {
	status := "completed"
	if it.Open {
		status = "in_progress"
	}
	if it.Func {
		dst = append(dst, `{"type":"function_call","id":`...)
		dst = openai.AppendJSONString(dst, it.ID)
		dst = append(dst, `,"call_id":`...)
		dst = openai.AppendJSONString(dst, it.CallID)
		dst = append(dst, `,"name":`...)
		dst = openai.AppendJSONString(dst, it.Name)
		dst = append(dst, `,"arguments":`...)
		dst = openai.AppendJSONString(dst, it.Text)
		dst = append(dst, `,"status":"`...)
		dst = append(dst, status...)
		return append(dst, `"}`...)
	}
	dst = append(dst, `{"type":"message","id":`...)
	dst = openai.AppendJSONString(dst, it.ID)
	dst = append(dst, `,"status":"`...)
	dst = append(dst, status...)
	dst = append(dst, `","role":"assistant","content":[`...)
	dst = appendTextPart(dst, it.Text)
	return append(dst, `]}`...)
}

func appendTextPart(dst, text []byte) []byte {
	dst = append(dst, `{"type":"output_text","text":`...)
	dst = openai.AppendJSONString(dst, text)
	return append(dst, `,"annotations":[]}`...)
}
