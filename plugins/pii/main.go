// Command pii is a Tollgate plugin that finds personal data and secrets —
// e-mail addresses, phone numbers, payment cards, IBANs, national ids, IP
// addresses, credentials — in a request's messages and rejects the
// request, redacts them with placeholders, or masks them and puts the
// originals back into the reply, streamed or not. See README.md.
//
// Build:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o pii.wasm ./plugins/pii
package main

import (
	"bytes"

	"github.com/tollgate/tollgate/plugins/pii/detect"
	"github.com/tollgate/tollgate/sdk"
)

// main is required of a main package but is not run: a c-shared module's
// _initialize runs the init functions only.
func main() {}

// pol is the instance's configuration, set once by on_configure before
// any request.
var pol *policy

// The fact the gateway stores in the call log, and its values.
const (
	factGuardAction = "guard_action"
	actionRejected  = "pii:rejected"
	actionRedacted  = "pii:redacted"
	actionMasked    = "pii:masked"
)

func init() {
	sdk.OnConfigure(func(cfg []byte) error {
		parsed, err := parseConfig(cfg)
		if err != nil {
			return err
		}
		pol = parsed
		// Without reply handling the plugin takes no part in the reply:
		// the host forwards it without calling the plugin.
		if pol.reply == replyOff {
			sdk.OnChunk(nil)
		} else {
			sdk.OnChunk(onChunk)
		}
		return nil
	})
	sdk.OnRequest(onRequest)
	sdk.OnChunk(onChunk)
}

// Reused by every callback of the instance (one runs at a time); nothing
// in them outlives a callback.
var (
	parts   []sdk.MessagePart
	reqMap  mapping
	st      replyState
	work    replyWork
	encoded []byte
)

func onRequest(r *sdk.Request) sdk.Verdict {
	parts = r.Messages(parts[:0])
	reqMap.reset(reqMap.entries[:0])
	res, err := pol.scanRequest(parts, r, &reqMap)
	if err != nil {
		panic("pii: rewriting the request: " + err.Error()) // fail the callback: on_error applies
	}
	for _, k := range res.found.Kinds() {
		check(sdk.MetricAdd("found_"+k.String(), int64(res.counts[k])))
	}
	if pol.reply != replyOff && !pol.needsReply(&res) {
		check(r.SkipPhases(sdk.PhaseChunk)) // nothing to restore: the reply goes as it is
	}
	if res.found == 0 {
		return sdk.Continue
	}
	if pol.mode == modeReject || res.unredactable {
		what := "rejected"
		if res.unredactable {
			what = "rejected (a part with findings cannot be rewritten)"
		}
		act(r, actionRejected, "rejected", what, res.found)
		return r.Reject(pol.status, "invalid_request_error", "pii_detected", pol.rejectMessage(res.found))
	}
	if pol.mode == modeMask {
		act(r, actionMasked, "masked", "masked", res.found)
	} else {
		act(r, actionRedacted, "redacted", "redacted", res.found)
	}
	if pol.needsReply(&res) {
		// The reply needs the placeholders: to restore them, or to number
		// its own findings after them.
		encoded = encodeState(encoded[:0], res.entries, nil)
		check(r.SetState(encoded))
	}
	return sdk.Continue
}

func onChunk(c *sdk.Chunk) sdk.Verdict {
	f := c.Flags()
	raw := c.State()
	entries, held, err := decodeState(st.entries, raw)
	if err != nil {
		panic(err.Error()) // fail the callback: on_error applies
	}
	st.entries, st.held = entries, append(st.held[:0], held...)
	d := pol.onEvent(&work, &st, c.Bytes(), f)
	if d.restored > 0 {
		check(sdk.MetricAdd("restored", int64(d.restored)))
	}
	if d.redacted > 0 {
		check(sdk.MetricAdd("reply_redacted", int64(d.redacted)))
	}
	if d.verdict == sdk.Replace {
		check(c.EmitBytes(d.emit))
	}
	if !f.Has(sdk.ChunkWhole) {
		encoded = encodeState(encoded[:0], st.entries, st.held)
		if !bytes.Equal(encoded, raw) {
			check(c.SetState(encoded))
		}
	}
	return d.verdict
}

// act records what the plugin did to a request: the fact the call log
// keeps, a counter, and a log line naming the kinds found, never the data.
func act(r *sdk.Request, action, metric, what string, kinds detect.Set) {
	check(r.SetFact(factGuardAction, action))
	check(sdk.MetricAdd(metric, 1))
	names := ""
	for i, k := range kinds.Kinds() {
		if i > 0 {
			names += ", "
		}
		names += k.String()
	}
	sdk.Log(sdk.LevelInfo, "pii: request "+r.RequestID()+" "+what+": found "+names)
}

// check logs a host function's error; none is expected.
func check(err error) {
	if err != nil {
		sdk.Log(sdk.LevelError, "pii: "+err.Error())
	}
}
