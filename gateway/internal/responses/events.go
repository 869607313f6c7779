package responses

import (
	"strconv"

	"github.com/tollgate/tollgate/gateway/internal/openai"
)

// Event writing: each Append* method of Output appends whole SSE events
// ("event: TYPE\ndata: {...}\n\n") numbered from o.Seq, and records what
// they say in o.

// startEvent begins event typ: the SSE lines and the JSON up to its
// first member after "type".
func startEvent(dst []byte, typ string) []byte {
	dst = append(dst, "event: "...)
	dst = append(dst, typ...)
	dst = append(dst, "\ndata: {\"type\":\""...)
	dst = append(dst, typ...)
	return append(dst, '"')
}

// endEvent ends an event with its sequence number.
func (o *Output) endEvent(dst []byte) []byte {
	dst = append(dst, `,"sequence_number":`...)
	dst = strconv.AppendInt(dst, o.Seq, 10)
	o.Seq++
	return append(dst, "}\n\n"...)
}

// itemRef appends the members naming item i (and its text part).
func (o *Output) itemRef(dst []byte, i int, part bool) []byte {
	dst = append(dst, `,"item_id":`...)
	dst = openai.AppendJSONString(dst, o.Items[i].ID)
	dst = append(dst, `,"output_index":`...)
	dst = strconv.AppendInt(dst, int64(i), 10)
	if part {
		dst = append(dst, `,"content_index":0`...)
	}
	return dst
}

// AppendCreated appends response.created and response.in_progress.
func (o *Output) AppendCreated(dst []byte) []byte {
	for _, typ := range [...]string{"response.created", "response.in_progress"} {
		dst = startEvent(dst, typ)
		dst = append(dst, `,"response":`...)
		dst = o.AppendResponseObject(dst, Status{Value: "in_progress"}, Usage{})
		dst = o.endEvent(dst)
	}
	return dst
}

// AppendItemAdded appends output_item.added for item i, and for a
// message content_part.added for its text part.
func (o *Output) AppendItemAdded(dst []byte, i int) []byte {
	dst = startEvent(dst, "response.output_item.added")
	dst = append(dst, `,"output_index":`...)
	dst = strconv.AppendInt(dst, int64(i), 10)
	dst = append(dst, `,"item":`...)
	dst = o.Items[i].appendJSON(dst)
	dst = o.endEvent(dst)
	if o.Items[i].Func {
		return dst
	}
	dst = startEvent(dst, "response.content_part.added")
	dst = o.itemRef(dst, i, true)
	dst = append(dst, `,"part":`...)
	dst = appendTextPart(dst, nil)
	return o.endEvent(dst)
}

// AppendTextDelta appends output_text.delta for message item i and adds
// text to the item.
func (o *Output) AppendTextDelta(dst []byte, i int, text []byte) []byte {
	o.Items[i].Text = append(o.Items[i].Text, text...)
	dst = startEvent(dst, "response.output_text.delta")
	dst = o.itemRef(dst, i, true)
	dst = append(dst, `,"delta":`...)
	dst = openai.AppendJSONString(dst, text)
	dst = append(dst, `,"logprobs":[]`...)
	return o.endEvent(dst)
}

// AppendArgsDelta appends function_call_arguments.delta for function call
// item i and adds the fragment to its arguments.
func (o *Output) AppendArgsDelta(dst []byte, i int, frag []byte) []byte {
	o.Items[i].Text = append(o.Items[i].Text, frag...)
	dst = startEvent(dst, "response.function_call_arguments.delta")
	dst = o.itemRef(dst, i, false)
	dst = append(dst, `,"delta":`...)
	dst = openai.AppendJSONString(dst, frag)
	return o.endEvent(dst)
}

// AppendItemDone closes item i: for a message output_text.done,
// content_part.done and output_item.done; for a function call
// function_call_arguments.done and output_item.done.
func (o *Output) AppendItemDone(dst []byte, i int) []byte {
	it := &o.Items[i]
	it.Open = false
	if it.Func {
		dst = startEvent(dst, "response.function_call_arguments.done")
		dst = o.itemRef(dst, i, false)
		dst = append(dst, `,"name":`...)
		dst = openai.AppendJSONString(dst, it.Name)
		dst = append(dst, `,"arguments":`...)
		dst = openai.AppendJSONString(dst, it.Text)
		dst = o.endEvent(dst)
	} else {
		dst = startEvent(dst, "response.output_text.done")
		dst = o.itemRef(dst, i, true)
		dst = append(dst, `,"text":`...)
		dst = openai.AppendJSONString(dst, it.Text)
		dst = append(dst, `,"logprobs":[]`...)
		dst = o.endEvent(dst)
		dst = startEvent(dst, "response.content_part.done")
		dst = o.itemRef(dst, i, true)
		dst = append(dst, `,"part":`...)
		dst = appendTextPart(dst, it.Text)
		dst = o.endEvent(dst)
	}
	dst = startEvent(dst, "response.output_item.done")
	dst = append(dst, `,"output_index":`...)
	dst = strconv.AppendInt(dst, int64(i), 10)
	dst = append(dst, `,"item":`...)
	dst = it.appendJSON(dst)
	return o.endEvent(dst)
}

// AppendEnd closes the open item and appends the terminal event:
// response.completed, or response.incomplete for an incomplete status,
// with the whole output and usage u.
func (o *Output) AppendEnd(dst []byte, s Status, u Usage) []byte {
	if _, i := o.Open(); i >= 0 {
		dst = o.AppendItemDone(dst, i)
	}
	typ := "response.completed"
	if s.Value == "incomplete" {
		typ = "response.incomplete"
	}
	dst = startEvent(dst, typ)
	dst = append(dst, `,"response":`...)
	dst = o.AppendResponseObject(dst, s, u)
	return o.endEvent(dst)
}

// AppendErrorEvent appends the "error" event for e, numbered seq.
func AppendErrorEvent(dst []byte, seq int64, e *openai.Error) []byte {
	dst = startEvent(dst, "error")
	dst = append(dst, `,"code":`...)
	code := e.Code
	if code == "" {
		code = e.Type
	}
	dst = openai.AppendJSONString(dst, code)
	dst = append(dst, `,"message":`...)
	dst = openai.AppendJSONString(dst, e.Message)
	dst = append(dst, `,"param":`...)
	if e.Param == "" {
		dst = append(dst, "null"...)
	} else {
		dst = openai.AppendJSONString(dst, e.Param)
	}
	dst = append(dst, `,"sequence_number":`...)
	dst = strconv.AppendInt(dst, seq, 10)
	return append(dst, "}\n\n"...)
}
