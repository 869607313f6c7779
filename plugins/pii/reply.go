package main

import (
	"bytes"

	"github.com/tollgate/tollgate/plugins/pii/detect"
	"github.com/tollgate/tollgate/sdk"
)

// replyState is what the plugin keeps of a request between reply events,
// in the host's per-request state: the request's placeholders and the
// reply text held back.
type replyState struct {
	entries []entry
	held    []byte
}

// decision is what the plugin does with one reply event.
type decision struct {
	verdict sdk.Verdict
	// emit is the event's new text for Replace; it aliases a buffer the
	// next event reuses.
	emit []byte
	// restored and redacted count placeholders put back and findings
	// replaced in this event.
	restored, redacted int
}

// boundaryFlags mark the events before which held text must reach the
// client: tool calls, the finish, the end of the stream.
const boundaryFlags = sdk.ChunkToolCalls | sdk.ChunkFinish | sdk.ChunkDone

// Bounds of the text a redacting reply holds back (see redactReply).
const (
	holdTail = 64      // the longest finding that spans words (an IBAN in groups: 42 bytes)
	maxHold  = 4 << 10 // a run without white space is cut past this
	maxPEM   = 16 << 10
)

// replyWork holds the buffers reused by every event (an instance runs one
// callback at a time).
type replyWork struct {
	r     restorer
	m     mapping
	text  []byte // held text and the event's, joined
	out   []byte
	spans []detect.Span
}

// onEvent decides one reply event: a streamed event whose state is st, or
// a whole reply (sdk.ChunkWhole). text is the event's text. st is updated
// for the next event.
func (p *policy) onEvent(w *replyWork, st *replyState, text []byte, f sdk.ChunkFlags) decision {
	whole := f.Has(sdk.ChunkWhole)
	if !whole && len(text) == 0 && f&boundaryFlags == 0 {
		return decision{verdict: sdk.Continue}
	}
	final := whole || f&boundaryFlags != 0
	all := text
	if len(st.held) > 0 {
		w.text = append(append(w.text[:0], st.held...), text...)
		all = w.text
	}
	var d decision
	held := 0
	switch p.reply {
	case replyRestore:
		w.r.reset(p.placeholder, st.entries)
		w.out, held = w.r.restore(w.out[:0], all, final)
		d.restored = countRestored(&w.r, all[:len(all)-held])
	case replyRedact:
		w.m.reset(st.entries)
		w.out, held, d.redacted = p.redactReply(w, all, final)
		st.entries = w.m.entries
	default:
		return decision{verdict: sdk.Continue}
	}
	unchanged := len(st.held) == 0 && held == 0 && bytes.Equal(w.out, text)
	st.held = append(st.held[:0], all[len(all)-held:]...)
	if unchanged {
		return decision{verdict: sdk.Continue}
	}
	d.verdict, d.emit = sdk.Replace, w.out
	return d
}

// countRestored counts the placeholders in text, for the metrics.
func countRestored(r *restorer, text []byte) int {
	n := 0
	for _, ph := range r.ph {
		n += bytes.Count(text, ph)
	}
	return n
}

// redactReply replaces the findings in text with placeholders. Unless
// final, it holds back a tail that could still complete a finding: at
// least the last holdTail bytes, cut back to white space so that no word
// is split, and any finding that reaches into them; an unfinished PEM
// block from its BEGIN line (up to maxPEM bytes); but never more than
// maxHold bytes of text without white space. It returns the text to
// release, how many bytes it held and how many findings it replaced.
func (p *policy) redactReply(w *replyWork, text []byte, final bool) ([]byte, int, int) {
	r := len(text)
	if !final {
		r = max(len(text)-holdTail, 0)
		for r > 0 && !isSpace(text[r-1]) {
			r--
		}
		if r == 0 && len(text) > maxHold {
			r = len(text) - holdTail
		}
		if b := detect.OpenPEM(text); b >= 0 && b < r && len(text)-b <= maxPEM {
			r = b
		}
	}
	w.spans = p.scanner.Append(w.spans[:0], text)
	n := 0
	for _, sp := range w.spans {
		if sp.End > r {
			if sp.Start < r {
				r = sp.Start
			}
			break
		}
		n++
	}
	out := w.m.redact(w.out[:0], p.placeholder, text[:r], w.spans[:n])
	return out, len(text) - r, n
}

func isSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\t' || c == '\r' }
