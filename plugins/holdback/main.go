// Command holdback is a Tollgate plugin that keeps configured markers —
// typically the hosts of image-storage URLs — out of model replies unless
// a tool in the conversation produced the URL. Streamed replies are
// forwarded at once except for a tail that could still become a marker;
// a marker without tool evidence stops the stream with a correction and
// finish_reason "content_filter". See README.md.
//
// Build:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o holdback.wasm ./plugins/holdback
package main

import (
	"bytes"
	"strconv"

	"github.com/tollgate/tollgate/sdk"
)

// main is required of a main package but is not run: a c-shared module's
// _initialize runs the init functions only.
func main() {}

// g is the instance's configuration, set once by on_configure before any
// request.
var g *guard

// The fact the gateway stores in the call log, and its values.
const (
	factGuardAction = "guard_action"
	actionStopped   = "holdback:stopped"
	actionReplaced  = "holdback:replaced"
)

func init() {
	sdk.OnConfigure(func(cfg []byte) error {
		parsed, err := parseConfig(cfg)
		if err != nil {
			return err
		}
		g = parsed
		return nil
	})
	sdk.OnChunk(onChunk)
}

// Reused by every callback of the instance (one runs at a time); nothing
// in them outlives a callback.
var (
	state   reqState
	encoded []byte
	// current is the callback's chunk while onEvent runs, for requestBody:
	// a method value (c.Body) would be a heap allocation per callback.
	current *sdk.Chunk
)

func requestBody() []byte { return current.Body() }

func onChunk(c *sdk.Chunk) sdk.Verdict {
	f := c.Flags()
	if !needsState(f, c.Len()) {
		return g.onEvent(nil, nil, f, nil).verdict
	}
	whole := f.Has(sdk.ChunkWhole)
	var raw []byte
	if !whole { // a whole reply starts from nothing
		raw = c.State()
	}
	if err := decodeState(&state, raw); err != nil {
		panic(err.Error()) // fail the callback: on_error applies
	}
	if f.Has(sdk.ChunkToolCalls) && !state.addToolCalls(c.ToolCalls()) {
		panic("holdback: malformed tool-call deltas from the host")
	}
	var text []byte
	if f.Has(sdk.ChunkText) {
		text = c.Bytes()
	}
	current = c
	d := g.onEvent(&state, text, f, requestBody)
	current = nil
	if d.passed > 0 {
		check(sdk.MetricAdd("evidence_passed", int64(d.passed)))
	}
	if d.bodyErr != nil {
		sdk.Log(sdk.LevelWarn, "holdback: request "+c.RequestID()+": cannot read the request body for tool evidence: "+d.bodyErr.Error())
	}
	switch {
	case d.verdict == sdk.Stop:
		// The unreleased text before the marker and the correction go out
		// as the final delta, with finish_reason content_filter; the host
		// cancels the upstream.
		check(c.EmitBytes(d.emit))
		act(c, actionStopped, "stopped", d.marker)
		return sdk.Stop
	case whole && d.verdict == sdk.Replace:
		check(c.EmitBytes(d.emit))
		act(c, actionReplaced, "replaced", d.marker)
		return sdk.Replace
	case d.verdict == sdk.Replace:
		check(c.EmitBytes(d.emit))
	}
	if !whole {
		encoded = state.encode(encoded[:0])
		if !bytes.Equal(encoded, raw) {
			check(c.SetState(encoded))
		}
	}
	return d.verdict
}

// act records a guard action: the fact the call log keeps, a counter, and
// a log line naming the marker, never the text.
func act(c *sdk.Chunk, action, what string, marker int) {
	check(c.SetFact(factGuardAction, action))
	check(sdk.MetricAdd(what, 1))
	sdk.Log(sdk.LevelInfo, "holdback: request "+c.RequestID()+": "+what+" the reply: markers["+strconv.Itoa(marker)+"] "+
		strconv.Quote(g.markers[marker])+" in a URL that no tool produced")
}

// check logs a host function's error; none is expected.
func check(err error) {
	if err != nil {
		sdk.Log(sdk.LevelError, "holdback: "+err.Error())
	}
}
