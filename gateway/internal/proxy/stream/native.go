package stream

import (
	"github.com/tollgate/tollgate/gateway/internal/anthropic"
	"github.com/tollgate/tollgate/gateway/internal/cancels"
	"github.com/tollgate/tollgate/gateway/internal/sse"
	"github.com/tollgate/tollgate/sdk/wasmhost"
)

// A native Messages API stream (POST /v1/messages to an Anthropic
// upstream) goes to the client as the upstream's own bytes. Each event is
// read once by an anthropic.ChunkView into the OpenAI chunk a translation
// would give, which the chunk phase and the accounting read, so guards see
// the same text, tool-call deltas, finish and usage whichever endpoint the
// client used. Events with no such chunk (ping, a content block's start or
// stop, thinking) are not shown to plugins; they keep their place behind
// events a plugin holds.
//
// When a plugin changes the stream, the gateway keeps the Messages API's
// event grammar (message_start, then content blocks each opened and
// closed in index order, message_delta, message_stop):
//
//   - Replace on a text delta rewrites that delta's text.
//   - Replace on another event puts the released text in a text block
//     before it. Anthropic closes a text block before the event that ends
//     it (a tool call, the message_delta), where a guard such as holdback
//     releases the tail it held, so the content_block_stop of a text block
//     is deferred to the next event and the text joins that block. With no
//     text block to join, it goes in a new text block at the next index
//     before message_delta (a new block cannot go before a tool_use block:
//     that would renumber the blocks after it). For the same reason
//     message_delta waits for message_stop, which Anthropic sends right
//     after it, so that text released at the very end still precedes it.
//     (One case keeps the text after message_delta: a plugin that held
//     message_delta itself and then replaces at message_stop.)
//   - Stop drops the held deltas (held block starts and stops still go
//     out), writes the stop text into the open or deferred text block, or
//     a new one, closes any open block and ends the message: message_delta
//     with stop_reason "refusal" for finish_reason content_filter (else the
//     Anthropic reason for the plugin's finish_reason) and the output
//     tokens reported so far, then message_stop. A message_start is written
//     first if none went out.
//   - A plugin failure under fail_closed, a cancel, or a broken upstream
//     ends the stream with an Anthropic error event.

// nativeState is what a native stream has sent the client (events held by
// a plugin count as sent: they go out later or are dropped by a Stop that
// keeps their structure).
type nativeState struct {
	view anthropic.ChunkView

	started bool // message_start placed
	open    int  // the open content block's index; -1 when none
	text    bool // the open block is a text block
	next    int  // the next unused content block index

	// stop is a text block's deferred content_block_stop, of block
	// stopIndex, and the pings and comments that came after it.
	stop      []byte
	stopIndex int
	// end is the deferred message_delta, and the pings and comments that
	// came after it.
	end []byte
	// pending is released text that had no text block to go in.
	pending []byte
	// spans are the ends of the events in Stream.held, and whether a
	// Stop keeps them (everything but deltas and the message's end).
	spans []heldSpan
}

type heldSpan struct {
	end  int
	keep bool
}

func (n *nativeState) reset() {
	n.view.Reset()
	n.started, n.open, n.text, n.next = false, -1, false, 0
	n.stop, n.stopIndex, n.end, n.pending, n.spans = n.stop[:0], 0, n.end[:0], n.pending[:0], n.spans[:0]
}

// placed records that ev went to the client (or into held).
func (n *nativeState) placed(ev *anthropic.Event) {
	switch ev.Type {
	case anthropic.EventMessageStart:
		n.started = true
	case anthropic.EventContentBlockStart:
		n.open, n.text = ev.Index, ev.Block == anthropic.BlockText
		n.next = max(n.next, ev.Index+1)
	case anthropic.EventContentBlockStop:
		if ev.Index == n.open {
			n.open, n.text = -1, false
		}
	}
}

// free reports events that may go out at any point of the sequence (they
// still keep their place among the others).
func free(ev *anthropic.Event) bool {
	return ev.Type == anthropic.EventPing || ev.Type == anthropic.EventUnknown
}

// processNative decides what one event of a native stream becomes.
func (st *Stream) processNative(raw []byte) {
	if ev, flags, run := st.readNative(raw, st.pipe != nil); run {
		st.runNative(raw, ev, flags)
	}
}

// readNative reads one event for the accounting and places the events no
// plugin reads; for the others it reports run and the chunk flags (with
// guarded: chunk plugins run). The event's chunk is in st.chunk.
func (st *Stream) readNative(raw []byte, guarded bool) (ev *anthropic.Event, flags uint32, run bool) {
	var ok bool
	st.data, ok = sse.AppendData(st.data[:0], raw)
	if !ok {
		st.queueFree(raw) // comments, retry hints
		return nil, 0, false
	}
	n := &st.nat
	ev, err := n.view.Parse(st.data, anthropic.EventName(raw), &st.chunk)
	if err != nil {
		st.queueFree(raw) // not ours to judge: forwarded as sent
		return nil, 0, false
	}
	c := &st.chunk
	if c.Usage.Present {
		st.usage = c.Usage
	}
	if ev.Type == anthropic.EventMessageStart && ev.Usage.Present && !st.inputKnown && st.x != nil {
		if n := ev.Usage.PromptTokens(); n > 0 {
			st.inputKnown = true
			st.x.InputKnown(n)
		}
	}
	if len(c.Text) > 0 {
		st.up.Text += int64(len(c.Text))
		st.up.Events++
	}
	if !guarded {
		st.out = append(st.out, raw...)
		st.countText(int64(len(c.Text)))
		return ev, 0, false
	}
	switch {
	case c.Error:
		// The upstream's error ends the stream, after what it sent.
		st.flushHeld()
		st.flushDeferred()
		st.out = append(st.out, raw...)
		return ev, 0, false
	case ev.Type == anthropic.EventContentBlockStop && n.text && ev.Index == n.open && c.Choices == 0:
		n.stop, n.stopIndex = append(n.stop[:0], raw...), ev.Index
		n.open, n.text = -1, false
		return ev, 0, false
	case c.Choices == 0 && !c.Done && !c.Usage.Present:
		if free(ev) {
			st.queueFree(raw)
		} else {
			st.queue(raw, ev)
		}
		return ev, 0, false
	case c.Done:
		return ev, wasmhost.ChunkDone, true
	}
	return ev, chunkFlags(c), true
}

// runNative runs the chunk phase for one event and applies its verdict.
func (st *Stream) runNative(raw []byte, ev *anthropic.Event, flags uint32) {
	wr := st.wr
	if calls := st.chunk.ToolCalls; len(calls) > 0 {
		st.calls = st.calls[:0]
		for _, tc := range calls {
			st.calls = wasmhost.AppendToolCallDelta(st.calls, tc.Index, tc.Name, tc.Arguments)
		}
		wr.ToolCalls = st.calls
	}
	res, err := st.pipe.Chunk(wr, st.chunk.Text, flags)
	wr.ToolCalls = nil
	if err != nil {
		st.log.Error("plugin failed mid-stream; stream ended (fail_closed)", "err", err)
		st.held, st.heldText = st.held[:0], 0
		st.endWithError(PluginFailed(err, "; the reply was ended."))
		st.cancel(cancels.ErrPluginStopped)
		return
	}
	st.applyNative(raw, ev, st.chunk.Text, res)
}

// applyNative applies a plugin's verdict on event ev (text is its text).
func (st *Stream) applyNative(raw []byte, ev *anthropic.Event, text []byte, res wasmhost.ChunkResult) {
	n := &st.nat
	switch res.Verdict {
	case wasmhost.Hold:
		if ev.Type != anthropic.EventMessageStop { // nothing follows it: holding it would lose the end
			st.hold(raw, ev, int64(len(text)))
			return
		}
	case wasmhost.Replace:
		st.flushHeld()
		switch {
		case ev.Type == anthropic.EventContentBlockDelta && ev.Delta == anthropic.DeltaText:
			st.flushDeferredStop()
			st.out = anthropic.AppendTextDeltaEvent(st.out, ev.Index, res.Text)
			st.countText(int64(len(res.Text)))
			return
		case ev.Type == anthropic.EventContentBlockStart && ev.Block == anthropic.BlockText:
			// A block that starts with text: the start without it, then
			// the plugin's text.
			st.flushDeferredStop()
			st.out = anthropic.AppendTextBlockStartEvent(st.out, ev.Index)
			n.placed(ev)
			if len(res.Text) > 0 {
				st.out = anthropic.AppendTextDeltaEvent(st.out, ev.Index, res.Text)
				st.countText(int64(len(res.Text)))
			}
			return
		}
		st.release(res.Text, ev)
		st.placeOut(raw, ev)
		return
	case wasmhost.Stop:
		st.stopNative(res.Text, res.FinishReason, ev)
		return
	}
	st.flushHeld()
	st.placeOut(raw, ev)
	st.countText(int64(len(text)))
}

// release puts text a plugin released before the event ev: into the
// deferred or open text block, else into a new block at the end of the
// content (now, when ev ends the message; else when it comes).
func (st *Stream) release(text []byte, ev *anthropic.Event) {
	if len(text) == 0 {
		return
	}
	n := &st.nat
	switch {
	case len(n.stop) > 0:
		st.out = anthropic.AppendTextDeltaEvent(st.out, n.stopIndex, text)
	case n.open >= 0 && n.text:
		st.out = anthropic.AppendTextDeltaEvent(st.out, n.open, text)
	default:
		n.pending = append(n.pending, text...)
		return // counted when written
	}
	st.countText(int64(len(text)))
}

// placeOut writes ev after the deferred content_block_stop (unless ev may
// overtake it); message_delta is deferred to message_stop, which goes
// after the pending text and message_delta.
func (st *Stream) placeOut(raw []byte, ev *anthropic.Event) {
	n := &st.nat
	switch {
	case free(ev):
		st.queueFree(raw)
		return
	case ev.Type == anthropic.EventMessageDelta:
		st.flushDeferredStop()
		n.end = append(n.end[:0], raw...)
		return
	case ev.Type == anthropic.EventMessageStop:
		st.flushDeferred()
	default:
		st.flushDeferredStop()
	}
	st.out = append(st.out, raw...)
	n.placed(ev)
}

// flushDeferred writes what waits for the end of the message: the
// deferred content_block_stop, the pending text in a new block, the
// deferred message_delta.
func (st *Stream) flushDeferred() {
	n := &st.nat
	st.flushDeferredStop()
	if len(n.pending) > 0 && n.open < 0 {
		st.out = st.appendTextBlock(st.out, n.pending)
		n.pending = n.pending[:0]
	}
	st.out = append(st.out, n.end...)
	n.end = n.end[:0]
}

// appendTextBlock appends a whole new text block holding text at the next
// index, and counts the text.
func (st *Stream) appendTextBlock(dst, text []byte) []byte {
	n := &st.nat
	dst = anthropic.AppendTextBlockStartEvent(dst, n.next)
	dst = anthropic.AppendTextDeltaEvent(dst, n.next, text)
	dst = anthropic.AppendBlockStopEvent(dst, n.next)
	n.next++
	st.countText(int64(len(text)))
	return dst
}

func (st *Stream) flushDeferredStop() {
	n := &st.nat
	if len(n.stop) == 0 {
		return
	}
	if len(st.held) > 0 {
		st.appendHeld(n.stop, true)
	} else {
		st.out = append(st.out, n.stop...)
	}
	n.stop = n.stop[:0]
}

// hold keeps ev (a plugin's verdict) behind the events already held.
func (st *Stream) hold(raw []byte, ev *anthropic.Event, text int64) {
	if !free(ev) && len(st.nat.stop) > 0 {
		st.appendHeld(st.nat.stop, true)
		st.nat.stop = st.nat.stop[:0]
	}
	st.heldText += text
	st.nat.placed(ev)
	if ev.Type == anthropic.EventContentBlockStart && ev.Block == anthropic.BlockText && len(ev.Text) > 0 {
		// A block that starts with text is held as its start, which a
		// Stop keeps, and its text, which a Stop drops.
		st.scratch = anthropic.AppendTextBlockStartEvent(st.scratch[:0], ev.Index)
		st.appendHeld(st.scratch, true)
		st.scratch = anthropic.AppendTextDeltaEvent(st.scratch[:0], ev.Index, ev.Text)
		st.appendHeld(st.scratch, false)
		return
	}
	keep := ev.Type != anthropic.EventContentBlockDelta && ev.Type != anthropic.EventMessageDelta && ev.Type != anthropic.EventMessageStop
	st.appendHeld(raw, keep)
}

func (st *Stream) appendHeld(raw []byte, keep bool) {
	if len(st.held) == 0 {
		st.nat.spans = st.nat.spans[:0]
	}
	st.held = append(st.held, raw...)
	st.nat.spans = append(st.nat.spans, heldSpan{end: len(st.held), keep: keep})
}

// queue places an event no plugin reads: behind held events when there
// are some, else out.
func (st *Stream) queue(raw []byte, ev *anthropic.Event) {
	if len(st.held) == 0 {
		st.placeOut(raw, ev)
		return
	}
	st.hold(raw, ev, 0)
}

// queueFree places a ping, a comment or an event the gateway cannot read
// where it came: after a deferred content_block_stop or message_delta
// (text released later goes before both), after held events, or out.
func (st *Stream) queueFree(raw []byte) {
	switch {
	case len(st.nat.stop) > 0:
		st.nat.stop = append(st.nat.stop, raw...)
	case len(st.nat.end) > 0:
		st.nat.end = append(st.nat.end, raw...)
	case len(st.held) > 0:
		st.appendHeld(raw, false)
	default:
		st.out = append(st.out, raw...)
	}
}

// stopNative ends the stream where a plugin stopped it (see the top of
// this file).
func (st *Stream) stopNative(text, finish []byte, ev *anthropic.Event) {
	n := &st.nat
	if sum := len(st.held); len(n.spans) > 0 && n.spans[len(n.spans)-1].end == sum {
		start := 0
		for _, sp := range n.spans {
			if sp.keep {
				st.out = append(st.out, st.held[start:sp.end]...)
			}
			start = sp.end
		}
	}
	st.held, st.heldText, n.spans = st.held[:0], 0, n.spans[:0]
	if len(finish) == 0 {
		finish = []byte("content_filter")
	}
	if !n.started {
		id, model := ev.MessageID, ev.Model
		if ev.Type != anthropic.EventMessageStart {
			id, model = st.id, st.model
		}
		st.out = anthropic.AppendMessageStartEvent(st.out, id, model, 0)
		n.started = true
	}
	if len(n.pending) > 0 {
		text = append(n.pending, text...)
		n.pending = n.pending[:0]
	}
	switch {
	case len(n.stop) > 0:
		if len(text) > 0 {
			st.out = anthropic.AppendTextDeltaEvent(st.out, n.stopIndex, text)
			st.countText(int64(len(text)))
		}
		st.out = append(st.out, n.stop...)
		n.stop = n.stop[:0]
	case n.open >= 0 && n.text:
		if len(text) > 0 {
			st.out = anthropic.AppendTextDeltaEvent(st.out, n.open, text)
			st.countText(int64(len(text)))
		}
		st.out = anthropic.AppendBlockStopEvent(st.out, n.open)
	case n.open >= 0:
		st.out = anthropic.AppendBlockStopEvent(st.out, n.open)
		if len(text) > 0 {
			st.out = st.appendTextBlock(st.out, text)
		}
	case len(text) > 0:
		st.out = st.appendTextBlock(st.out, text)
	}
	n.open, n.text, n.end = -1, false, n.end[:0] // the plugin's end replaces the upstream's
	st.out = anthropic.AppendMessageEndEvents(st.out, anthropic.StopReason(finish), n.view.Usage().CompletionTokens)
	st.stopped, st.finished = true, true
	st.endFlags |= wasmhost.EndStopped
	st.cancel(cancels.ErrPluginStopped)
}
