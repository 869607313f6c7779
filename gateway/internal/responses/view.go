package responses

import (
	"bytes"

	"github.com/valyala/fastjson"

	"github.com/tollgate/tollgate/gateway/internal/openai"
)

// EventType is a Responses stream event's type, as far as the gateway
// tells them apart.
type EventType uint8

// The event types.
const (
	EventUnknown    EventType = iota
	EventCreated              // response.created
	EventInProgress           // response.in_progress
	EventItemAdded            // response.output_item.added
	EventItemDone             // response.output_item.done
	EventPartAdded            // response.content_part.added
	EventPartDone             // response.content_part.done
	EventTextDelta            // response.output_text.delta
	EventTextDone             // response.output_text.done
	EventArgsDelta            // response.function_call_arguments.delta
	EventArgsDone             // response.function_call_arguments.done
	EventCompleted            // response.completed
	EventIncomplete           // response.incomplete
	EventFailed               // response.failed
	EventError                // error
)

var eventTypes = map[string]EventType{
	"response.created":                       EventCreated,
	"response.in_progress":                   EventInProgress,
	"response.output_item.added":             EventItemAdded,
	"response.output_item.done":              EventItemDone,
	"response.content_part.added":            EventPartAdded,
	"response.content_part.done":             EventPartDone,
	"response.output_text.delta":             EventTextDelta,
	"response.output_text.done":              EventTextDone,
	"response.function_call_arguments.delta": EventArgsDelta,
	"response.function_call_arguments.done":  EventArgsDone,
	"response.completed":                     EventCompleted,
	"response.incomplete":                    EventIncomplete,
	"response.failed":                        EventFailed,
	"error":                                  EventError,
}

// Event is what the gateway reads of one event. Byte slices borrow from
// the View and are valid until its next Parse.
type Event struct {
	Type EventType
	// Output and Content are output_index and content_index (-1: absent).
	Output, Content int
	// Func: the item of an output_item event is a function call; Message:
	// a message.
	Func, Message bool
	ItemID        []byte
	Seq           int64
	// ID and Model are the response's (created, and the terminal events).
	ID, Model []byte
	Created   int64
}

// Terminal reports an event that ends the stream.
func (e *Event) Terminal() bool {
	return e.Type == EventCompleted || e.Type == EventIncomplete || e.Type == EventFailed || e.Type == EventError
}

// View reads a Responses event stream event by event as the OpenAI chat
// chunks a translation would give (doc.go, "Reading a stream"), for
// guards and accounting while the client gets the upstream's bytes. It
// is not safe for concurrent use; reuse it with Reset.
type View struct {
	p     fastjson.Parser
	calls []int // output_index of each function call item, by tool-call index
	ev    Event
	usage openai.Usage
}

// Reset readies v for a new stream.
func (v *View) Reset() {
	v.calls, v.usage = v.calls[:0], openai.Usage{}
}

// Usage is the usage the terminal event reported.
func (v *View) Usage() openai.Usage { return v.usage }

// Parse reads one event's data into c (reset first) and returns the
// event. An error means data is not a JSON object.
func (v *View) Parse(data []byte, c *openai.Chunk) (*Event, error) {
	tc := c.ToolCalls[:0]
	*c = openai.Chunk{ToolCalls: tc}
	ev := &v.ev
	*ev = Event{Output: -1, Content: -1}
	root, err := v.p.ParseBytes(data)
	if err != nil {
		return ev, err
	}
	if root.Type() != fastjson.TypeObject {
		return ev, errNotEvent
	}
	typ := root.GetStringBytes("type")
	ev.Type = eventTypes[string(typ)]
	ev.Seq = root.GetInt64("sequence_number")
	if o := root.Get("output_index"); o != nil {
		ev.Output = o.GetInt()
	}
	if o := root.Get("content_index"); o != nil {
		ev.Content = o.GetInt()
	}
	ev.ItemID = root.GetStringBytes("item_id")
	switch ev.Type {
	case EventCreated:
		v.response(root.Get("response"))
		c.Choices, c.Role = 1, roleAssistant
	case EventTextDelta:
		c.Choices, c.Text, c.HasText = 1, str(root.Get("delta")), true
	case EventItemAdded, EventItemDone:
		item := root.Get("item")
		t := item.GetStringBytes("type")
		ev.Func, ev.Message = string(t) == "function_call", string(t) == "message"
		ev.ItemID = item.GetStringBytes("id")
		if ev.Type == EventItemAdded && ev.Func {
			v.calls = append(v.calls, ev.Output)
			c.Choices = 1
			c.ToolCalls = append(c.ToolCalls, openai.ToolCallDelta{Index: len(v.calls) - 1,
				ID: item.GetStringBytes("call_id"), Name: item.GetStringBytes("name"), Arguments: item.GetStringBytes("arguments")})
		}
	case EventArgsDelta:
		if k := v.callIndex(ev.Output); k >= 0 {
			c.Choices = 1
			c.ToolCalls = append(c.ToolCalls, openai.ToolCallDelta{Index: k, Arguments: str(root.Get("delta"))})
		}
	case EventCompleted, EventIncomplete:
		r := root.Get("response")
		v.response(r)
		c.Done, c.Choices = true, 1
		c.FinishReason = []byte(FinishReason(r.GetStringBytes("status"), r.GetStringBytes("incomplete_details", "reason"), len(v.calls) > 0))
		if u := openai.ParseUsage(r.Get("usage")); u.Present {
			u.TotalTokens = u.PromptTokens + u.CompletionTokens
			v.usage = u
			c.Usage = v.usage
		}
	case EventFailed:
		r := root.Get("response")
		v.response(r)
		c.Done, c.Error = true, true
		c.ErrorMessage = r.GetStringBytes("error", "message")
		if u := openai.ParseUsage(r.Get("usage")); u.Present {
			u.TotalTokens = u.PromptTokens + u.CompletionTokens
			v.usage = u
			c.Usage = v.usage
		}
	case EventError:
		c.Done, c.Error = true, true
		c.ErrorMessage = root.GetStringBytes("message")
	}
	return ev, nil
}

var roleAssistant = []byte("assistant")

var errNotEvent = replyError("responses: the event is not a JSON object")

func (v *View) response(r *fastjson.Value) {
	v.ev.ID, v.ev.Model, v.ev.Created = r.GetStringBytes("id"), r.GetStringBytes("model"), r.GetInt64("created_at")
}

// callIndex is the tool-call index of the function call item at output
// index o; -1 when none.
func (v *View) callIndex(o int) int {
	for k, oi := range v.calls {
		if oi == o {
			return k
		}
	}
	return -1
}

// EventName returns the "event:" field of a raw SSE event, or nil.
func EventName(raw []byte) []byte {
	if !bytes.HasPrefix(raw, []byte("event:")) {
		return nil
	}
	line := raw[len("event:"):]
	if i := bytes.IndexByte(line, '\n'); i >= 0 {
		line = line[:i]
	}
	return bytes.TrimSpace(line)
}
