package anthropic

import (
	"strconv"

	"github.com/tollgate/tollgate/gateway/internal/openai"
)

// ChunkView reads a native Messages API stream, event by event, as the
// OpenAI chunk a StreamTranslator would emit for each event: the client of
// POST /v1/messages receives the upstream's own bytes, while guards and
// accounting read the same parsed chunks (text, tool-call deltas, finish
// reason, usage) as for a translated or OpenAI stream.
//
// Per event, Parse fills an openai.Chunk:
//
//	message_start                 Choices 1, Role "assistant", HasText (empty text)
//	content_block_start text      Choices 1 and Text when the block starts with text; else Choices 0
//	content_block_start tool_use  Choices 1, ToolCalls [{Index k, ID, Name}]
//	text_delta                    Choices 1, Text (Choices 0 when empty)
//	input_json_delta              Choices 1, ToolCalls [{Index k, Arguments fragment}] (Choices 0 when empty)
//	content_block_stop            of a tool_use block that streamed no arguments: ToolCalls [{Index k, Arguments "{}"}]; else Choices 0
//	message_delta                 Usage (merged, cumulative); with stop_reason also Choices 1 and FinishReason
//	message_stop                  Done
//	error                         Error, ErrorMessage
//	ping, thinking, other         Choices 0: nothing a guard reads
//
// Usage is reported only by message_delta, the end of the message, so a
// stream cut short is accounted like an OpenAI stream without its usage
// chunk (by estimate) rather than by message_start's partial counts.
//
// It does not allocate in steady state. It is not safe for concurrent
// use; keep one per stream and Reset it.
type ChunkView struct {
	p     EventParser
	ev    Event
	tools []toolBlock
	calls int
	usage Usage
}

// Finish reasons as byte slices, for Chunk.FinishReason without allocating.
var (
	finishStop          = []byte("stop")
	finishLength        = []byte("length")
	finishToolCalls     = []byte("tool_calls")
	finishContentFilter = []byte("content_filter")
	assistantRole       = []byte("assistant")
	emptyArguments      = []byte("{}")
)

func finishBytes(stopReason []byte) []byte {
	switch FinishReason(stopReason) {
	case "length":
		return finishLength
	case "tool_calls":
		return finishToolCalls
	case "content_filter":
		return finishContentFilter
	}
	return finishStop
}

// Reset prepares v for a new stream.
func (v *ChunkView) Reset() {
	if cap(v.tools) > maxToolBlocks/8 {
		v.tools = nil
	}
	v.tools, v.calls, v.usage = v.tools[:0], 0, Usage{}
}

// Usage is the usage reported so far (message_start's input merged with
// message_delta's cumulative counts); Present is false before either.
func (v *ChunkView) Usage() openai.Usage {
	return v.usage.OpenAI()
}

// Parse parses one event — data is its data JSON, name its SSE event name
// (may be nil) — fills c (reset first, keeping its ToolCalls array) as in
// the table above, and returns the parsed event. The event and c's slices
// borrow from v and are valid until the next Parse. Data that is not a
// JSON object returns an error wrapping ErrInvalidEvent.
func (v *ChunkView) Parse(data, name []byte, c *openai.Chunk) (*Event, error) {
	*c = openai.Chunk{ToolCalls: c.ToolCalls[:0]}
	ev := &v.ev
	if err := v.p.Parse(data, name, ev); err != nil {
		return ev, err
	}
	switch ev.Type {
	case EventMessageStart:
		if ev.Usage.Present {
			v.usage = ev.Usage
		}
		c.Choices, c.Role, c.HasText = 1, assistantRole, true
	case EventContentBlockStart:
		switch ev.Block {
		case BlockText:
			if len(ev.Text) > 0 {
				c.Choices, c.Text, c.HasText = 1, ev.Text, true
			}
		case BlockToolUse:
			call := v.calls
			v.calls++
			if len(v.tools) < maxToolBlocks {
				v.tools = append(v.tools, toolBlock{block: ev.Index, call: call})
			}
			c.Choices = 1
			c.ToolCalls = append(c.ToolCalls, openai.ToolCallDelta{Index: call, ID: ev.ToolID, Name: ev.ToolName})
		}
	case EventContentBlockDelta:
		switch ev.Delta {
		case DeltaText:
			if len(ev.Text) > 0 {
				c.Choices, c.Text, c.HasText = 1, ev.Text, true
			}
		case DeltaInputJSON:
			if tb := v.tool(ev.Index); tb != nil && len(ev.PartialJSON) > 0 {
				tb.args = true
				c.Choices = 1
				c.ToolCalls = append(c.ToolCalls, openai.ToolCallDelta{Index: tb.call, Arguments: ev.PartialJSON})
			}
		}
	case EventContentBlockStop:
		if tb := v.tool(ev.Index); tb != nil && !tb.args {
			tb.args = true
			c.Choices = 1
			c.ToolCalls = append(c.ToolCalls, openai.ToolCallDelta{Index: tb.call, Arguments: emptyArguments})
		}
	case EventMessageDelta:
		v.usage.merge(ev.Usage)
		if ev.Usage.Present {
			c.Usage = v.Usage()
		}
		if ev.StopReason != nil {
			c.Choices, c.FinishReason = 1, finishBytes(ev.StopReason)
		}
	case EventMessageStop:
		c.Done = true
	case EventError:
		c.Error, c.ErrorMessage = true, ev.ErrorMessage
		if c.ErrorMessage == nil {
			c.ErrorMessage = ev.ErrorType
		}
	}
	return ev, nil
}

func (v *ChunkView) tool(block int) *toolBlock {
	for i := len(v.tools) - 1; i >= 0; i-- {
		if v.tools[i].block == block {
			return &v.tools[i]
		}
	}
	return nil
}

// StopReason maps an OpenAI finish_reason back to a Messages API
// stop_reason (FinishReason's inverse): "length" → max_tokens,
// "tool_calls" → tool_use, "content_filter" → refusal, anything else →
// end_turn.
func StopReason(finish []byte) string {
	switch string(finish) {
	case "length":
		return "max_tokens"
	case "tool_calls":
		return "tool_use"
	case "content_filter":
		return "refusal"
	}
	return "end_turn"
}

// Stream events the gateway writes itself on POST /v1/messages, when a
// guard changes or ends a native stream. Each appends one SSE event,
// "event: <type>\ndata: <json>\n\n".

// AppendMessageStartEvent appends a message_start for a message the
// upstream had not started: no content, input tokens as given.
func AppendMessageStartEvent(dst []byte, id, model []byte, inputTokens int64) []byte {
	dst = append(dst, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":"...)
	dst = openai.AppendJSONString(dst, id)
	dst = append(dst, `,"type":"message","role":"assistant","model":`...)
	dst = openai.AppendJSONString(dst, model)
	dst = append(dst, `,"content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":`...)
	dst = strconv.AppendInt(dst, inputTokens, 10)
	return append(dst, `,"output_tokens":0}}}`+"\n\n"...)
}

// AppendTextBlockStartEvent appends a content_block_start of an empty text
// block at index.
func AppendTextBlockStartEvent(dst []byte, index int) []byte {
	dst = append(dst, "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":"...)
	dst = strconv.AppendInt(dst, int64(index), 10)
	return append(dst, `,"content_block":{"type":"text","text":""}}`+"\n\n"...)
}

// AppendTextDeltaEvent appends a content_block_delta carrying text as a
// text_delta of the block at index.
func AppendTextDeltaEvent(dst []byte, index int, text []byte) []byte {
	dst = append(dst, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":"...)
	dst = strconv.AppendInt(dst, int64(index), 10)
	dst = append(dst, `,"delta":{"type":"text_delta","text":`...)
	dst = openai.AppendJSONString(dst, text)
	return append(dst, "}}\n\n"...)
}

// AppendBlockStopEvent appends a content_block_stop of the block at index.
func AppendBlockStopEvent(dst []byte, index int) []byte {
	dst = append(dst, "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":"...)
	dst = strconv.AppendInt(dst, int64(index), 10)
	return append(dst, "}\n\n"...)
}

// AppendMessageEndEvents appends the end of a message: a message_delta
// with stopReason and the cumulative output tokens, then message_stop.
func AppendMessageEndEvents(dst []byte, stopReason string, outputTokens int64) []byte {
	dst = append(dst, "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":"...)
	dst = openai.AppendJSONString(dst, stopReason)
	dst = append(dst, `,"stop_sequence":null},"usage":{"output_tokens":`...)
	dst = strconv.AppendInt(dst, outputTokens, 10)
	return append(dst, "}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"...)
}
