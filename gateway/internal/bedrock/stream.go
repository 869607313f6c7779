package bedrock

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/valyala/fastjson"

	"github.com/tollgate/tollgate/gateway/internal/openai"
)

// ErrInvalidEvent is returned (wrapped) for a ConverseStream event whose
// payload is not a JSON object.
var ErrInvalidEvent = errors.New("bedrock: invalid stream event")

// StreamTranslator turns ConverseStream messages into an OpenAI
// chat.completion.chunk stream, one message at a time (see the package
// documentation for the mapping).
//
// It keeps its buffers across Reset and does not allocate in steady state.
// It is not safe for concurrent use; keep one per stream, or pool them and
// call Reset.
type StreamTranslator struct {
	p fastjson.Parser

	id, model    string
	created      int64
	includeUsage bool

	prefix  []byte // `data: {"id":...,"choices":[`, built when the stream starts
	started bool   // the role chunk was emitted
	stopped bool   // messageStop came (and its finish_reason chunk went out)
	done    bool   // [DONE] or an error event was emitted

	tools []toolBlock // toolUse blocks seen, in order
	calls int         // tool calls started (the next OpenAI tool call index)
	usage Usage       // from the metadata event
}

// toolBlock is one toolUse content block: its Converse block index and its
// OpenAI tool call index.
type toolBlock struct {
	block int
	call  int
	args  bool // a non-empty arguments fragment was emitted
}

// maxToolBlocks bounds the per-stream tool table.
const maxToolBlocks = 1024

// Reset prepares t for a new stream. model and id are the chunks' "model"
// and "id" (an empty id means a new one, NewID); created is their
// "created". With includeUsage every chunk carries "usage":null and a
// final chunk with "choices":[] carries the usage before [DONE].
func (t *StreamTranslator) Reset(model, id string, created int64, includeUsage bool) {
	if id == "" {
		id = NewID()
	}
	t.id, t.model, t.created, t.includeUsage = id, model, created, includeUsage
	t.prefix = t.prefix[:0]
	t.started, t.stopped, t.done = false, false, false
	if cap(t.tools) > maxToolBlocks/8 {
		t.tools = nil
	}
	t.tools, t.calls = t.tools[:0], 0
	t.usage = Usage{}
}

// Done reports whether the translated stream has ended: [DONE] or an
// error event was emitted. Append ignores every later message.
func (t *StreamTranslator) Done() bool { return t.done }

// Stopped reports whether messageStop has come: the stream may end
// without the metadata event and still be complete.
func (t *StreamTranslator) Stopped() bool { return t.stopped }

// Usage returns the usage the upstream reported, in OpenAI terms.
func (t *StreamTranslator) Usage() openai.Usage { return t.usage.OpenAI() }

// Append translates one ConverseStream message and appends the resulting
// OpenAI events to dst: zero or more `data: {...}\n\n` lines, then
// `data: [DONE]\n\n` after the metadata that follows messageStop. An
// exception or error message becomes `data: {"error":{...}}\n\n` and ends
// the stream. A payload that is not a JSON object returns dst unchanged
// and an error wrapping ErrInvalidEvent. Unknown events produce nothing.
func (t *StreamTranslator) Append(dst []byte, m *Message) ([]byte, error) {
	if t.done {
		return dst, nil
	}
	switch string(m.MessageType) {
	case "exception":
		return t.appendError(dst, TranslateError(0, m.ExceptionType, m.Payload)), nil
	case "error":
		return t.appendError(dst, errorFor(0, exceptionName(m.ErrorCode), m.ErrorMessage)), nil
	case "event", "":
	default:
		return dst, nil
	}
	root, err := t.p.ParseBytes(m.Payload)
	if err != nil || root.Type() != fastjson.TypeObject {
		return dst, fmt.Errorf("%w: %s payload is not a JSON object", ErrInvalidEvent, m.EventType)
	}
	switch string(m.EventType) {
	case "messageStart":
		dst = t.start(dst)
	case "contentBlockStart":
		dst = t.start(dst)
		if tu := root.Get("start", "toolUse"); tu != nil {
			dst = t.appendToolStart(dst, blockIndex(root), tu)
		}
	case "contentBlockDelta":
		dst = t.contentDelta(dst, root)
	case "contentBlockStop":
		// A tool call whose input streamed no fragment (a tool without
		// parameters) still gets valid JSON arguments.
		if tb := t.tool(blockIndex(root)); tb != nil && !tb.args {
			tb.args = true
			dst = t.appendArgs(dst, tb.call, []byte("{}"))
		}
	case "messageStop":
		if !t.stopped {
			dst = t.start(dst)
			stop, _ := stringOf(root.Get("stopReason"))
			dst = t.appendFinish(dst, FinishReason(stop))
		}
	case "metadata":
		if u := usageOf(root.Get("usage")); u.Present {
			t.usage = u
		}
		if t.stopped {
			dst = t.End(dst)
		}
	}
	return dst, nil
}

func (t *StreamTranslator) contentDelta(dst []byte, root *fastjson.Value) []byte {
	delta := root.Get("delta")
	if delta == nil {
		return dst
	}
	dst = t.start(dst)
	if text, ok := stringOf(delta.Get("text")); ok {
		if len(text) > 0 {
			dst = t.appendText(dst, text)
		}
		return dst
	}
	if in, ok := stringOf(delta.Get("toolUse", "input")); ok && len(in) > 0 {
		if tb := t.tool(blockIndex(root)); tb != nil {
			tb.args = true
			dst = t.appendArgs(dst, tb.call, in)
		}
	}
	return dst // reasoningContent, citations and unknown deltas: nothing
}

// End finishes a stream that messageStop has stopped: the usage chunk
// (with includeUsage and usage reported) and [DONE]. The metadata event
// calls it; a reader calls it when the upstream ends after messageStop
// without metadata. It does nothing before messageStop or after the end.
func (t *StreamTranslator) End(dst []byte) []byte {
	if t.done || !t.stopped {
		return dst
	}
	if t.includeUsage && t.usage.Present {
		dst = append(dst, t.prefix...)
		dst = append(dst, `],"usage":`...)
		dst = appendUsage(dst, t.usage)
		dst = append(dst, "}\n\n"...)
	}
	t.done = true
	return append(dst, "data: [DONE]\n\n"...)
}

func (t *StreamTranslator) appendError(dst []byte, e *openai.Error) []byte {
	dst = append(dst, "data: "...)
	dst = e.AppendJSON(dst)
	t.done = true
	return append(dst, "\n\n"...)
}

func blockIndex(root *fastjson.Value) int {
	return root.GetInt("contentBlockIndex")
}

// tool returns the toolUse block with Converse index block, or nil.
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
	t.prefix = append(t.prefix[:0], `data: {"id":`...)
	t.prefix = openai.AppendJSONString(t.prefix, t.id)
	t.prefix = append(t.prefix, `,"object":"chat.completion.chunk","created":`...)
	t.prefix = strconv.AppendInt(t.prefix, t.created, 10)
	t.prefix = append(t.prefix, `,"model":`...)
	t.prefix = openai.AppendJSONString(t.prefix, t.model)
	t.prefix = append(t.prefix, `,"choices":[`...)
	dst = append(dst, t.prefix...)
	dst = append(dst, `{"index":0,"delta":{"role":"assistant","content":""}`...)
	return t.close(dst, "")
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
	dst = append(dst, t.prefix...)
	dst = append(dst, `{"index":0,"delta":{"content":`...)
	dst = openai.AppendJSONString(dst, text)
	dst = append(dst, '}')
	return t.close(dst, "")
}

func (t *StreamTranslator) appendToolStart(dst []byte, block int, tu *fastjson.Value) []byte {
	call := t.calls
	t.calls++
	if len(t.tools) < maxToolBlocks {
		t.tools = append(t.tools, toolBlock{block: block, call: call})
	}
	id, _ := stringOf(tu.Get("toolUseId"))
	name, _ := stringOf(tu.Get("name"))
	dst = append(dst, t.prefix...)
	dst = append(dst, `{"index":0,"delta":{"tool_calls":[{"index":`...)
	dst = strconv.AppendInt(dst, int64(call), 10)
	dst = append(dst, `,"id":`...)
	dst = openai.AppendJSONString(dst, id)
	dst = append(dst, `,"type":"function","function":{"name":`...)
	dst = openai.AppendJSONString(dst, name)
	dst = append(dst, `,"arguments":""}}]}`...)
	return t.close(dst, "")
}

func (t *StreamTranslator) appendArgs(dst []byte, call int, fragment []byte) []byte {
	dst = append(dst, t.prefix...)
	dst = append(dst, `{"index":0,"delta":{"tool_calls":[{"index":`...)
	dst = strconv.AppendInt(dst, int64(call), 10)
	dst = append(dst, `,"function":{"arguments":`...)
	dst = openai.AppendJSONString(dst, fragment)
	dst = append(dst, `}}]}`...)
	return t.close(dst, "")
}

func (t *StreamTranslator) appendFinish(dst []byte, finish string) []byte {
	t.stopped = true
	dst = append(dst, t.prefix...)
	dst = append(dst, `{"index":0,"delta":{}`...)
	return t.close(dst, finish)
}
