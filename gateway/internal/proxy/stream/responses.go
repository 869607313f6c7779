package stream

import (
	"bytes"

	"github.com/tollgate/tollgate/gateway/internal/cancels"
	"github.com/tollgate/tollgate/gateway/internal/responses"
	"github.com/tollgate/tollgate/gateway/internal/sse"
	"github.com/tollgate/tollgate/sdk/wasmhost"
)

// A Responses API stream (POST /v1/responses) goes to the client as the
// Responses events an upstream with the API sent, or as the events
// responses.StreamReader made of a translated upstream's chat stream.
// Each event is read once by a responses.View into the chat chunk a
// translation would give, which the chunk phase and the accounting read:
// response.created is the role chunk, output_text.delta a text delta, a
// function call's output_item.added and function_call_arguments.delta
// tool-call deltas, response.completed / response.incomplete the end (its
// finish reason and usage, chunk flags FINISH|USAGE|DONE together). The
// other events are not shown to plugins; they keep their place behind
// events a plugin holds.
//
// When a plugin changes the stream, the gateway keeps the Responses
// event grammar (items added, their text streamed, done, in order; the
// terminal event last, holding the whole output) and numbers every event
// it passes or writes in order (sequence_number, rewritten where the
// gateway inserted or dropped events):
//
//   - Replace on a text delta rewrites that delta's text.
//   - Replace on another event puts the released text in a message item
//     before it. A message item's closing events (output_text.done,
//     content_part.done, output_item.done) are deferred to the next event,
//     where a guard such as holdback releases the tail it held, so the
//     text joins that item; with no message item to join, it goes in a new
//     message item at the end of the output, before the terminal event.
//   - The closing events of an item whose text a plugin changed (deferred,
//     or held behind held deltas), and the terminal event when any text
//     changed, are rewritten with the text the client was sent.
//   - Stop drops the held deltas (held structural events still go out),
//     writes the stop text into the open or deferred message item, or a
//     new one, closes the open item and ends the response with
//     response.incomplete (incomplete_details.reason content_filter, or
//     max_output_tokens for the plugin's finish_reason "length";
//     response.completed for "stop") holding the output as sent, and the
//     usage when the upstream had reported it. A response.created is
//     written first if none went out.
//   - A plugin failure under fail_closed, a cancel, or a broken upstream
//     ends the stream with an "error" event.

// respState is what a Responses stream has sent the client.
type respState struct {
	view responses.View
	// out mirrors the output the client was sent (with chunk plugins),
	// for the events the gateway writes itself.
	out   responses.Output
	kinds []itemKind // by output index
	// regen: the item's closing events were written by the gateway (its
	// text changed); the upstream's are dropped.
	regen   []bool
	up      [][]byte // the upstream's text of each message item, by output index
	started bool     // response.created placed
	next    int64    // the next sequence number the client gets

	// deferred holds the closing events of message item defItem and the
	// free events after them (defSpans: their ends, and which close).
	deferred []byte
	defSpans []deferSpan
	defItem  int
	// pending is released text with no message item to go in.
	pending []byte

	held  []byte
	spans []respSpan
	htext []byte // the text of held deltas

	// id is the response id of a translated stream ("resp_" + request id).
	id []byte
	tr *responses.StreamReader // a translated upstream's (kept across uses)
}

type itemKind uint8

const (
	kindOther itemKind = iota
	kindMessage
	kindFunc
)

type deferSpan struct {
	end   int
	close bool
}

// respSpan is one held event: where it ends in held, whether a Stop keeps
// it, for a text delta its item and where its text ends in htext, and
// for a closing event of a message item that item (closes; else -1).
type respSpan struct {
	end, textEnd int
	keep         bool
	item, closes int
}

func (r *respState) reset() {
	r.view.Reset()
	r.out.Reset(nil, nil, 0)
	r.kinds, r.regen, r.started, r.next = r.kinds[:0], r.regen[:0], false, 0
	for i := range r.up {
		r.up[i] = r.up[i][:0]
	}
	r.up = r.up[:0]
	r.deferred, r.defSpans, r.pending = r.deferred[:0], r.defSpans[:0], r.pending[:0]
	r.held, r.spans, r.htext = r.held[:0], r.spans[:0], r.htext[:0]
}

// upText returns the upstream text slot of output item i.
func (r *respState) upText(i int) *[]byte {
	for len(r.up) <= i {
		r.up = append(r.up, nil)
	}
	return &r.up[i]
}

// openMessage reports whether output item i is the open message item.
func (r *respState) openMessage(i int) bool {
	return i >= 0 && i < r.out.Len() && i < len(r.kinds) && r.kinds[i] == kindMessage && r.out.At(i).Open
}

// changed reports whether the text of any message item differs from the
// upstream's, or the gateway added items.
func (r *respState) changed(upstreamItems int) bool {
	if r.out.Len() > upstreamItems {
		return true
	}
	for i := range r.out.Len() {
		if r.kinds[i] == kindMessage && !bytes.Equal(r.out.At(i).Text, *r.upText(i)) {
			return true
		}
	}
	return false
}

// closerOf is the message item a closing event (output_text.done,
// content_part.done, output_item.done) closes; -1 for other events.
func (r *respState) closerOf(ev *responses.Event) int {
	i := ev.Output
	if i < 0 || i >= len(r.kinds) || r.kinds[i] != kindMessage {
		return -1
	}
	switch ev.Type {
	case responses.EventTextDone, responses.EventPartDone, responses.EventItemDone:
		return i
	}
	return -1
}

// respPlaceCloser places a closing event of message item i: as the
// upstream sent it while the client got the upstream's text, else the
// gateway's own closing events with the text sent, once.
func (st *Stream) respPlaceCloser(raw []byte, i int) {
	rs := &st.rs
	if bytes.Equal(rs.out.At(i).Text, *rs.upText(i)) {
		st.respPlace(raw)
		return
	}
	for len(rs.regen) <= i {
		rs.regen = append(rs.regen, false)
	}
	if rs.regen[i] {
		return
	}
	rs.regen[i] = true
	o := &rs.out
	o.Seq = rs.next
	st.out = o.AppendItemDone(st.out, i)
	rs.next = o.Seq
}

// processResponses decides what one event of a Responses stream becomes.
func (st *Stream) processResponses(raw []byte) {
	if ev, flags, run := st.readResponses(raw, st.pipe != nil); run {
		st.runResponses(raw, ev, flags)
	}
}

// readResponses reads one event for the accounting and places the events
// no plugin reads; for the others it reports run and the chunk flags
// (with guarded: chunk plugins run). The event's chunk is in st.chunk.
func (st *Stream) readResponses(raw []byte, guarded bool) (ev *responses.Event, flags uint32, run bool) {
	rs := &st.rs
	var ok bool
	st.data, ok = sse.AppendData(st.data[:0], raw)
	if !ok {
		st.respFree(raw, guarded)
		return nil, 0, false
	}
	ev, err := rs.view.Parse(st.data, &st.chunk)
	if err != nil {
		st.respFree(raw, guarded)
		return nil, 0, false
	}
	c := &st.chunk
	if c.Usage.Present {
		st.usage = c.Usage
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
	if ev.Type == responses.EventTextDelta && ev.Output >= 0 {
		p := rs.upText(ev.Output)
		*p = append(*p, c.Text...)
	}
	switch {
	case c.Error:
		// The upstream's error ends the stream, after what it sent.
		st.respFlushHeld()
		st.respFlushDeferred()
		st.respPlace(raw)
		return ev, 0, false
	case ev.Type == responses.EventTextDone && len(rs.held) == 0 && len(rs.defSpans) == 0 && ev.Content == 0 && rs.openMessage(ev.Output):
		rs.defItem = ev.Output
		st.respDefer(raw, true)
		return ev, 0, false
	case len(rs.defSpans) > 0 && ev.Output == rs.defItem && (ev.Type == responses.EventPartDone || ev.Type == responses.EventItemDone):
		st.respDefer(raw, true)
		if ev.Type == responses.EventItemDone {
			rs.out.At(ev.Output).Open = false
		}
		return ev, 0, false
	case c.Choices == 0 && !c.Done:
		st.respTrack(ev)
		item := rs.closerOf(ev)
		if len(rs.held) > 0 {
			st.respHoldSpan(raw, respSpan{keep: true, item: -1, closes: item}, nil)
			return ev, 0, false
		}
		st.respFlushDeferred()
		if item >= 0 {
			st.respPlaceCloser(raw, item)
		} else {
			st.respPlace(raw)
		}
		return ev, 0, false
	}
	flags = chunkFlags(c)
	if c.Done {
		flags |= wasmhost.ChunkDone
	}
	return ev, flags, true
}

// runResponses runs the chunk phase for one event and applies its verdict.
func (st *Stream) runResponses(raw []byte, ev *responses.Event, flags uint32) {
	c := &st.chunk
	wr := st.wr
	if len(c.ToolCalls) > 0 {
		st.calls = st.calls[:0]
		for _, tc := range c.ToolCalls {
			st.calls = wasmhost.AppendToolCallDelta(st.calls, tc.Index, tc.Name, tc.Arguments)
		}
		wr.ToolCalls = st.calls
	}
	res, err := st.pipe.Chunk(wr, c.Text, flags)
	wr.ToolCalls = nil
	if err != nil {
		st.log.Error("plugin failed mid-stream; stream ended (fail_closed)", "err", err)
		rs := &st.rs
		rs.held, rs.spans, rs.htext = rs.held[:0], rs.spans[:0], rs.htext[:0]
		st.endWithError(PluginFailed(err, "; the reply was ended."))
		st.cancel(cancels.ErrPluginStopped)
		return
	}
	st.applyResponses(raw, ev, res)
}

// applyResponses applies a plugin's verdict on event ev.
func (st *Stream) applyResponses(raw []byte, ev *responses.Event, res wasmhost.ChunkResult) {
	rs := &st.rs
	text := st.chunk.Text
	switch res.Verdict {
	case wasmhost.Hold:
		if !ev.Terminal() { // nothing follows it: holding it would lose the end
			st.respTrack(ev)
			if ev.Type == responses.EventTextDelta {
				st.respHoldSpan(raw, respSpan{item: ev.Output, closes: -1}, text)
			} else {
				st.respHoldSpan(raw, respSpan{keep: ev.Type != responses.EventArgsDelta, item: -1, closes: -1}, nil)
			}
			return
		}
	case wasmhost.Replace:
		st.respFlushHeld()
		if ev.Type == responses.EventTextDelta && rs.openMessage(ev.Output) {
			st.respFlushDeferred()
			o := &rs.out
			o.Seq = rs.next
			st.out = o.AppendTextDelta(st.out, ev.Output, res.Text)
			rs.next = o.Seq
			st.countText(int64(len(res.Text)))
			return
		}
		st.respRelease(res.Text)
		st.respTrack(ev)
		st.respPlaceEvent(raw, ev, nil)
		return
	case wasmhost.Stop:
		st.stopResponses(res.Text, res.FinishReason, ev)
		return
	}
	st.respFlushHeld()
	st.respTrack(ev)
	st.respPlaceEvent(raw, ev, text)
	st.countText(int64(len(text)))
}

// respTrack records in rs.out what event ev says of the output (text
// deltas are recorded when placed).
func (st *Stream) respTrack(ev *responses.Event) {
	rs := &st.rs
	o := &rs.out
	switch ev.Type {
	case responses.EventCreated:
		o.Reset(ev.ID, ev.Model, ev.Created)
		rs.started = true
	case responses.EventItemAdded:
		if ev.Output < 0 || ev.Output > 1<<16 {
			return
		}
		for o.Len() <= ev.Output {
			o.Add(false)
			rs.kinds = append(rs.kinds, kindOther)
		}
		it := o.At(ev.Output)
		it.Func, it.Open = ev.Func, true
		it.ID = append(it.ID[:0], ev.ItemID...)
		it.Text = it.Text[:0]
		switch {
		case ev.Func:
			rs.kinds[ev.Output] = kindFunc
			if calls := st.chunk.ToolCalls; len(calls) > 0 {
				it.CallID = append(it.CallID[:0], calls[0].ID...)
				it.Name = append(it.Name[:0], calls[0].Name...)
				it.Text = append(it.Text, calls[0].Arguments...)
			}
		case ev.Message:
			rs.kinds[ev.Output] = kindMessage
		}
	case responses.EventArgsDelta:
		if ev.Output >= 0 && ev.Output < o.Len() {
			for _, tc := range st.chunk.ToolCalls {
				o.At(ev.Output).Text = append(o.At(ev.Output).Text, tc.Arguments...)
			}
		}
	case responses.EventItemDone:
		if ev.Output >= 0 && ev.Output < o.Len() {
			o.At(ev.Output).Open = false
		}
	}
}

// respPlace writes an upstream event out, numbered next.
func (st *Stream) respPlace(raw []byte) {
	var numbered bool
	st.out, numbered = responses.AppendWithSeq(st.out, raw, st.rs.next)
	if numbered {
		st.rs.next++
	}
}

// respPlaceEvent places event ev (the current one, text its delta text):
// the terminal event after the pending text's item, rewritten when the
// text the client got differs from the upstream's.
func (st *Stream) respPlaceEvent(raw []byte, ev *responses.Event, text []byte) {
	rs := &st.rs
	st.respFlushDeferred()
	if !ev.Terminal() {
		st.respPlace(raw)
		if ev.Type == responses.EventTextDelta && ev.Output >= 0 && ev.Output < rs.out.Len() {
			rs.out.At(ev.Output).Text = append(rs.out.At(ev.Output).Text, text...)
		}
		return
	}
	upstreamItems := rs.out.Len()
	if len(rs.pending) > 0 {
		st.respNewItem(rs.pending)
		rs.pending = rs.pending[:0]
	}
	if ev.Type == responses.EventFailed || !rs.changed(upstreamItems) {
		st.respPlace(raw)
		return
	}
	st.out = rs.out.AppendTerminal(st.out, st.data, rs.next)
	rs.next++
}

// respNewItem writes a whole new message item holding text.
func (st *Stream) respNewItem(text []byte) {
	rs := &st.rs
	o := &rs.out
	o.Seq = rs.next
	o.Add(false)
	rs.kinds = append(rs.kinds, kindMessage)
	i := o.Len() - 1
	st.out = o.AppendItemAdded(st.out, i)
	st.out = o.AppendTextDelta(st.out, i, text)
	st.out = o.AppendItemDone(st.out, i)
	rs.next = o.Seq
	st.countText(int64(len(text)))
}

// respRelease puts text a plugin released before the current event: into
// the deferred or open message item, else pending for a new one.
func (st *Stream) respRelease(text []byte) {
	if len(text) == 0 {
		return
	}
	rs := &st.rs
	o := &rs.out
	i := -1
	switch {
	case len(rs.defSpans) > 0:
		i = rs.defItem
	case o.Len() > 0 && rs.openMessage(o.Len()-1):
		i = o.Len() - 1
	default:
		rs.pending = append(rs.pending, text...)
		return // counted when written
	}
	o.Seq = rs.next
	st.out = o.AppendTextDelta(st.out, i, text)
	rs.next = o.Seq
	st.countText(int64(len(text)))
}

// respDefer adds an event to the deferred ones.
func (st *Stream) respDefer(raw []byte, close bool) {
	rs := &st.rs
	rs.deferred = append(rs.deferred, raw...)
	rs.defSpans = append(rs.defSpans, deferSpan{end: len(rs.deferred), close: close})
}

// respFlushDeferred writes the deferred events: the item's closing events
// as the upstream sent them, or rewritten with the text the client got.
func (st *Stream) respFlushDeferred() {
	rs := &st.rs
	if len(rs.defSpans) == 0 {
		return
	}
	i := rs.defItem
	start := 0
	for _, sp := range rs.defSpans {
		if sp.close {
			st.respPlaceCloser(rs.deferred[start:sp.end], i)
		} else {
			st.respPlace(rs.deferred[start:sp.end])
		}
		start = sp.end
	}
	rs.out.At(i).Open = false
	rs.deferred, rs.defSpans = rs.deferred[:0], rs.defSpans[:0]
}

// respFree places a comment, a retry hint or an event the gateway cannot
// read where it came: after deferred events, after held ones, or out.
func (st *Stream) respFree(raw []byte, guarded bool) {
	rs := &st.rs
	switch {
	case !guarded:
		st.out = append(st.out, raw...)
	case len(rs.defSpans) > 0:
		st.respDefer(raw, false)
	case len(rs.held) > 0:
		st.respHoldSpan(raw, respSpan{keep: true, item: -1, closes: -1}, nil)
	default:
		st.respPlace(raw)
	}
}

// respHoldSpan keeps an event (its span's end set here) behind those
// already held; deferred events go first.
func (st *Stream) respHoldSpan(raw []byte, sp respSpan, text []byte) {
	rs := &st.rs
	if len(rs.defSpans) > 0 {
		start := 0
		for _, d := range rs.defSpans {
			closes := -1
			if d.close {
				closes = rs.defItem
			}
			rs.held = append(rs.held, rs.deferred[start:d.end]...)
			rs.spans = append(rs.spans, respSpan{end: len(rs.held), textEnd: len(rs.htext), keep: true, item: -1, closes: closes})
			start = d.end
		}
		rs.deferred, rs.defSpans = rs.deferred[:0], rs.defSpans[:0]
	}
	rs.held = append(rs.held, raw...)
	rs.htext = append(rs.htext, text...)
	sp.end, sp.textEnd = len(rs.held), len(rs.htext)
	rs.spans = append(rs.spans, sp)
}

// respPlaceHeld places held span sp (its bytes ev): a delta's text joins
// its item; a closing event is placed as respPlaceCloser does.
func (st *Stream) respPlaceHeld(ev, text []byte, sp respSpan) {
	rs := &st.rs
	if sp.closes >= 0 {
		st.respPlaceCloser(ev, sp.closes)
		return
	}
	st.respPlace(ev)
	if len(text) > 0 {
		if sp.item >= 0 && sp.item < rs.out.Len() {
			rs.out.At(sp.item).Text = append(rs.out.At(sp.item).Text, text...)
		}
		st.countText(int64(len(text)))
	}
}

// respFlushHeld writes the held events in order.
func (st *Stream) respFlushHeld() {
	rs := &st.rs
	start, tstart := 0, 0
	for _, sp := range rs.spans {
		st.respPlaceHeld(rs.held[start:sp.end], rs.htext[tstart:sp.textEnd], sp)
		start, tstart = sp.end, sp.textEnd
	}
	rs.held, rs.spans, rs.htext = rs.held[:0], rs.spans[:0], rs.htext[:0]
}

// stopResponses ends the stream where a plugin stopped it at event ev
// (see the top of this file).
func (st *Stream) stopResponses(text, finish []byte, ev *responses.Event) {
	rs := &st.rs
	start := 0
	for _, sp := range rs.spans {
		if sp.keep {
			st.respPlaceHeld(rs.held[start:sp.end], nil, sp)
		}
		start = sp.end
	}
	rs.held, rs.spans, rs.htext = rs.held[:0], rs.spans[:0], rs.htext[:0]
	o := &rs.out
	if !rs.started {
		id, model := ev.ID, ev.Model
		if ev.Type != responses.EventCreated {
			id, model = append(append(rs.id[:0], "resp_"...), st.id...), st.model
		}
		o.Reset(id, model, 0)
		o.Seq = rs.next
		st.out = o.AppendCreated(st.out)
		rs.next, rs.started = o.Seq, true
	}
	if len(rs.pending) > 0 {
		text = append(rs.pending, text...)
		rs.pending = rs.pending[:0]
	}
	open, i := o.Open()
	switch {
	case len(rs.defSpans) > 0:
		if len(text) > 0 {
			o.Seq = rs.next
			st.out = o.AppendTextDelta(st.out, rs.defItem, text)
			rs.next = o.Seq
			st.countText(int64(len(text)))
		}
		st.respFlushDeferred()
	case open != nil && i < len(rs.kinds) && rs.kinds[i] == kindMessage:
		o.Seq = rs.next
		if len(text) > 0 {
			st.out = o.AppendTextDelta(st.out, i, text)
			st.countText(int64(len(text)))
		}
		st.out = o.AppendItemDone(st.out, i)
		rs.next = o.Seq
	default:
		if open != nil {
			o.Seq = rs.next
			st.out = o.AppendItemDone(st.out, i)
			rs.next = o.Seq
		}
		if len(text) > 0 {
			st.respNewItem(text)
		}
	}
	if len(finish) == 0 {
		finish = contentFilter
	}
	s := responses.StatusOf(finish)
	u := responses.UsageOf(st.usage) // the upstream's, when its end came before the stop
	o.Seq = rs.next
	st.out = o.AppendEnd(st.out, s, u)
	rs.next = o.Seq
	st.stopped, st.finished = true, true
	st.endFlags |= wasmhost.EndStopped
	st.cancel(cancels.ErrPluginStopped)
}

var contentFilter = []byte("content_filter")
