package anthropic

import (
	"strconv"

	"github.com/tollgate/tollgate/gateway/internal/openai"
)

// StreamTranslator turns a Messages API event stream into an OpenAI
// chat.completion.chunk stream, one event at a time (see the package
// documentation for the mapping).
//
// It keeps its buffers across Reset and does not allocate in steady state:
// translating a text delta parses the event with a reused parser and
// appends the chunk to the caller's dst. It is not safe for concurrent
// use; keep one per stream, or pool them and call Reset.
type StreamTranslator struct {
	p  EventParser
	ev Event

	id, model    string
	created      int64
	includeUsage bool

	prefix  []byte // `{"id":...,"choices":[`, built when the stream starts
	started bool   // the role chunk was emitted
	finish  bool   // a finish_reason chunk was emitted
	done    bool   // [DONE] or an error event was emitted

	tools []toolBlock // tool_use blocks seen, in order
	calls int         // tool calls started (the next OpenAI tool call index)
	usage Usage       // merged from message_start and message_delta
}

// toolBlock is one tool_use content block: its Anthropic block index and
// its OpenAI tool call index.
type toolBlock struct {
	block int
	call  int
	args  bool // a non-empty arguments fragment was emitted
}

// maxToolBlocks bounds the per-stream tool table; later tool_use blocks
// still stream, but their argument deltas are matched by block index only
// among the first maxToolBlocks.
const maxToolBlocks = 1024

// Reset prepares t for a new stream. model and id are the chunks' "model"
// and "id" (an empty string means: the upstream's, from message_start);
// created is their "created" (Unix seconds). With includeUsage, every
// chunk carries "usage":null and a final chunk with "choices":[] carries
// the usage before [DONE], as OpenAI does for
// stream_options.include_usage.
func (t *StreamTranslator) Reset(model, id string, created int64, includeUsage bool) {
	t.id, t.model, t.created, t.includeUsage = id, model, created, includeUsage
	t.prefix = t.prefix[:0]
	t.started, t.finish, t.done = false, false, false
	if cap(t.tools) > maxToolBlocks/8 {
		t.tools = nil // a huge stream's table is not kept for the next
	}
	t.tools, t.calls = t.tools[:0], 0
	t.usage = Usage{}
}

// Done reports whether the translated stream has ended: [DONE] or an
// error event was emitted. Append ignores every later event.
func (t *StreamTranslator) Done() bool { return t.done }

// Usage returns the usage the upstream reported so far, in OpenAI terms;
// Present is false until message_start or message_delta carried usage.
func (t *StreamTranslator) Usage() openai.Usage {
	return t.usage.OpenAI()
}

// Append translates one Anthropic event — data is its data JSON, name its
// SSE event name (may be nil; the data's "type" wins) — and appends the
// resulting OpenAI events to dst: zero or more `data: {...}\n\n` lines,
// each a single line of valid JSON, or `data: [DONE]\n\n` at message_stop.
// An error event becomes `data: {"error":{...}}\n\n` and ends the stream.
//
// Data that is not a JSON object returns dst unchanged and an error
// wrapping ErrInvalidEvent; the stream may go on. Events of unknown types,
// pings, thinking and other non-text blocks produce nothing.
func (t *StreamTranslator) Append(dst, data, name []byte) ([]byte, error) {
	if t.done {
		return dst, nil
	}
	ev := &t.ev
	if err := t.p.Parse(data, name, ev); err != nil {
		return dst, err
	}
	switch ev.Type {
	case EventMessageStart:
		if ev.Usage.Present {
			t.usage = ev.Usage
		}
		if !t.started {
			if t.id == "" {
				t.id = string(ev.MessageID)
			}
			if t.model == "" {
				t.model = string(ev.Model)
			}
			dst = t.start(dst)
		}
	case EventContentBlockStart:
		dst = t.start(dst)
		switch ev.Block {
		case BlockText:
			if len(ev.Text) > 0 {
				dst = t.appendText(dst, ev.Text)
			}
		case BlockToolUse:
			dst = t.appendToolStart(dst, ev)
		}
	case EventContentBlockDelta:
		dst = t.start(dst)
		switch ev.Delta {
		case DeltaText:
			if len(ev.Text) > 0 {
				dst = t.appendText(dst, ev.Text)
			}
		case DeltaInputJSON:
			if tb := t.tool(ev.Index); tb != nil && len(ev.PartialJSON) > 0 {
				tb.args = true
				dst = t.appendArgs(dst, tb.call, ev.PartialJSON)
			}
		}
	case EventContentBlockStop:
		// A tool call whose input streamed no fragment (a tool without
		// parameters) still gets valid JSON arguments.
		if tb := t.tool(ev.Index); tb != nil && !tb.args {
			tb.args = true
			dst = t.appendArgs(dst, tb.call, []byte("{}"))
		}
	case EventMessageDelta:
		t.usage.merge(ev.Usage)
		if ev.StopReason != nil && !t.finish {
			dst = t.start(dst)
			dst = t.appendFinish(dst, FinishReason(ev.StopReason))
		}
	case EventMessageStop:
		dst = t.start(dst)
		if !t.finish {
			dst = t.appendFinish(dst, "stop")
		}
		if t.includeUsage && t.usage.Present {
			dst = t.open(dst)
			dst = append(dst, `],"usage":`...)
			dst = appendUsage(dst, t.usage)
			dst = append(dst, "}\n\n"...)
		}
		dst = append(dst, "data: [DONE]\n\n"...)
		t.done = true
	case EventError:
		e := errorFor(0, ev.ErrorType, ev.ErrorMessage)
		dst = append(dst, "data: "...)
		dst = e.AppendJSON(dst)
		dst = append(dst, "\n\n"...)
		t.done = true
	}
	return dst, nil
}

// tool returns the tool_use block with Anthropic index block, or nil.
func (t *StreamTranslator) tool(block int) *toolBlock {
	for i := len(t.tools) - 1; i >= 0; i-- {
		if t.tools[i].block == block {
			return &t.tools[i]
		}
	}
	return nil
}

// start emits the role chunk once, before anything else.
func (t *StreamTranslator) start(dst []byte) []byte {
	if t.started {
		return dst
	}
	t.started = true
	t.prefix = append(t.prefix[:0], `{"id":`...)
	t.prefix = openai.AppendJSONString(t.prefix, t.id)
	t.prefix = append(t.prefix, `,"object":"chat.completion.chunk","created":`...)
	t.prefix = strconv.AppendInt(t.prefix, t.created, 10)
	t.prefix = append(t.prefix, `,"model":`...)
	t.prefix = openai.AppendJSONString(t.prefix, t.model)
	t.prefix = append(t.prefix, `,"choices":[`...)
	dst = t.open(dst)
	dst = append(dst, `{"index":0,"delta":{"role":"assistant","content":""}`...)
	return t.close(dst, "")
}

// open starts an event: "data: " and the chunk up to its choices.
func (t *StreamTranslator) open(dst []byte) []byte {
	dst = append(dst, "data: "...)
	return append(dst, t.prefix...)
}

// close ends choices[0] (whose delta object is written) and the event;
// finish "" means null.
func (t *StreamTranslator) close(dst []byte, finish string) []byte {
	dst = append(dst, `,"logprobs":null,"finish_reason":`...)
	if finish == "" {
		dst = append(dst, "null"...)
	} else {
		dst = openai.AppendJSONString(dst, finish)
	}
	dst = append(dst, "}]"...)
	if t.includeUsage {
		dst = append(dst, `,"usage":null`...)
	}
	return append(dst, "}\n\n"...)
}

func (t *StreamTranslator) appendText(dst, text []byte) []byte {
	dst = t.open(dst)
	dst = append(dst, `{"index":0,"delta":{"content":`...)
	dst = openai.AppendJSONString(dst, text)
	dst = append(dst, '}')
	return t.close(dst, "")
}

func (t *StreamTranslator) appendToolStart(dst []byte, ev *Event) []byte {
	call := t.calls
	t.calls++
	if len(t.tools) < maxToolBlocks {
		t.tools = append(t.tools, toolBlock{block: ev.Index, call: call})
	}
	dst = t.open(dst)
	dst = append(dst, `{"index":0,"delta":{"tool_calls":[{"index":`...)
	dst = strconv.AppendInt(dst, int64(call), 10)
	dst = append(dst, `,"id":`...)
	dst = openai.AppendJSONString(dst, ev.ToolID)
	dst = append(dst, `,"type":"function","function":{"name":`...)
	dst = openai.AppendJSONString(dst, ev.ToolName)
	dst = append(dst, `,"arguments":""}}]}`...)
	return t.close(dst, "")
}

func (t *StreamTranslator) appendArgs(dst []byte, call int, fragment []byte) []byte {
	dst = t.open(dst)
	dst = append(dst, `{"index":0,"delta":{"tool_calls":[{"index":`...)
	dst = strconv.AppendInt(dst, int64(call), 10)
	dst = append(dst, `,"function":{"arguments":`...)
	dst = openai.AppendJSONString(dst, fragment)
	dst = append(dst, `}}]}`...)
	return t.close(dst, "")
}

func (t *StreamTranslator) appendFinish(dst []byte, finish string) []byte {
	t.finish = true
	dst = t.open(dst)
	dst = append(dst, `{"index":0,"delta":{}`...)
	return t.close(dst, finish)
}

// FinishReason maps an Anthropic stop_reason to an OpenAI finish_reason:
// end_turn, stop_sequence and pause_turn → "stop"; max_tokens and
// model_context_window_exceeded → "length"; tool_use → "tool_calls";
// refusal → "content_filter"; anything else → "stop".
func FinishReason(stopReason []byte) string {
	switch string(stopReason) {
	case "max_tokens", "model_context_window_exceeded":
		return "length"
	case "tool_use":
		return "tool_calls"
	case "refusal":
		return "content_filter"
	}
	return "stop"
}
