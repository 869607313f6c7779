package main

import "github.com/tollgate/tollgate/sdk"

// decision is what the guard does with one event.
type decision struct {
	verdict sdk.Verdict
	// emit is the text for Replace (the text released now) or Stop (the
	// unreleased text before the marker and the correction). It aliases
	// buffers reused by the next event.
	emit    []byte
	marker  int   // Stop: the index of the marker found
	passed  int   // URLs passed on tool evidence
	bodyErr error // the body could not be read for evidence
}

// boundaryFlags mark the events before which held text must reach the
// client: tool calls, the finish, the end of the stream.
const boundaryFlags = sdk.ChunkToolCalls | sdk.ChunkFinish | sdk.ChunkDone

// needsState reports whether an event with flags f and a text of n bytes
// is scanned. The others — the role, usage, empty deltas — carry no text
// or tool call whose order could matter: they go at once (held in buffer
// mode), even past held text, and leave the state as it is.
func needsState(f sdk.ChunkFlags, n int) bool {
	return f.Has(sdk.ChunkWhole) || (f.Has(sdk.ChunkText) && n > 0) || f&boundaryFlags != 0
}

// stopBuf backs a Stop's text.
var stopBuf []byte

// onEvent decides one event of a streamed reply whose state is st, or a
// whole reply (sdk.ChunkWhole). text is the event's text; body returns the
// request body, read only when a marker needs evidence. st is updated for
// the next event.
func (g *guard) onEvent(st *reqState, text []byte, f sdk.ChunkFlags, body func() []byte) decision {
	if !needsState(f, len(text)) {
		if g.mode == modeBuffer {
			return decision{verdict: sdk.Hold}
		}
		return decision{verdict: sdk.Continue}
	}
	whole := f.Has(sdk.ChunkWhole)
	x := scan{g: g, st: st, keep: g.mode == modeHoldback && !whole, body: body}
	x.begin(text)
	ok := x.text(text)
	if ok && (whole || f&boundaryFlags != 0) {
		ok = x.boundary()
	}
	d := decision{passed: x.passed, bodyErr: x.bodyErr, marker: x.marker}
	switch {
	case !ok && whole:
		d.verdict, d.emit = sdk.Replace, []byte(g.correction)
	case !ok:
		stopBuf = append(append(stopBuf[:0], x.pre...), g.correction...)
		d.verdict, d.emit = sdk.Stop, stopBuf
	case whole:
		d.verdict = sdk.Continue
	case g.mode == modeBuffer:
		d.verdict = sdk.Hold
		if f.Has(sdk.ChunkDone) {
			d.verdict = sdk.Continue // the host releases every held event, then the end
		}
	case x.base == 0 && x.h == 0:
		// Nothing held before or after: the upstream's own event goes out.
		d.verdict = sdk.Continue
	default:
		d.verdict, d.emit = sdk.Replace, x.release()
	}
	return d
}
