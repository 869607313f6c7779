package wasmhost

import (
	"context"
	"unicode/utf8"

	"github.com/tetratelabs/wazero/api"

	"github.com/tollgate/tollgate/sdk/internal/convo"
)

// rewriteState is a request's part in request rewriting (sdk/ABI.md,
// "Request rewriting"): where each record of request_messages lies in
// Body, and the buffers rewritten bodies are built in.
type rewriteState struct {
	// spans are the TextSpans of the records in Request.messages,
	// rendered with them.
	spans []convo.TextSpan
	// bufs are two buffers a rewrite alternates between: the new body is
	// built in the one Body does not use.
	bufs [2][]byte
	// count is how many rewrites the request had.
	count int
}

// maxKeptRewriteBuffer is the largest rewrite buffer a pooled Request
// keeps for the next request.
const maxKeptRewriteBuffer = 1 << 20

// reset empties the state for a pooled Request, keeping buffers of
// moderate size.
func (s rewriteState) reset() rewriteState {
	for i, b := range s.bufs {
		if cap(b) > maxKeptRewriteBuffer {
			s.bufs[i] = nil
		} else {
			s.bufs[i] = b[:0]
		}
	}
	return rewriteState{spans: s.spans[:0], bufs: s.bufs}
}

// BodyRewritten reports whether a plugin rewrote the request's body
// (set_message_text): Body is then the rewritten body, which the host
// sends upstream in place of the client's.
func (r *Request) BodyRewritten() bool { return r.rewrite.count > 0 }

// SetMessageText replaces the TEXT of record (its number, from 0, in
// request_messages order) with text, as the set_message_text import does,
// and returns the import's status: 0, CodeAbsent (no such record) or
// CodeInvalid (the record's text is not one JSON string in the body, text
// is not valid UTF-8, the new body would be larger than MaxBodyBytes, or
// Refacts refused it). On success Body is the new body, the conversation
// is rendered again from it when next read, and Refacts re-derives the
// prompt facts.
func (r *Request) SetMessageText(record int, text string) int32 {
	r.conversation()
	if record < 0 || record >= len(r.rewrite.spans) {
		return codeAbsent
	}
	sp := r.rewrite.spans[record]
	if !sp.Rewritable() || !utf8.ValidString(text) {
		return codeInvalid
	}
	// The new body is built in the buffer Body does not use; the other
	// one (perhaps the previous rewrite's) stays as it was until then.
	buf := &r.rewrite.bufs[0]
	if r.rewrite.count > 0 && len(r.Body) > 0 && len(*buf) > 0 && &r.Body[0] == &(*buf)[0] {
		buf = &r.rewrite.bufs[1]
	}
	next := convo.Splice((*buf)[:0], r.Body, sp, text)
	if r.MaxBodyBytes > 0 && len(next) > r.MaxBodyBytes {
		*buf = next[:0]
		return codeInvalid
	}
	*buf = next
	old := r.Body
	r.Body = next
	r.messagesDone = false
	if r.Refacts != nil {
		if err := r.Refacts(r); err != nil {
			r.Body = old
			_ = r.Refacts(r) // the facts of the body that stays, as before
			return codeInvalid
		}
	}
	r.rewrite.count++
	return 0
}

// rewriteFuncs are the imports of request rewriting.
func (p *Plugin) rewriteFuncs() []hostFunc {
	return []hostFunc{
		{"set_message_text", 3, nil, i32, func(ctx context.Context, m api.Module, s []uint64) {
			inst, r := current(ctx)
			text := read(m, uint32(s[1]), uint32(s[2]), "message text")
			if inst.phase != PhaseRequest || r.configuring {
				s[0] = code(codeNotAllowed)
				return
			}
			// Splicing and re-reading the body is the host's work, not
			// the guest's: its deadline clock stops meanwhile.
			paused, pausedAt := inst.pauseClock()
			st := r.SetMessageText(int(int32(s[0])), string(text))
			inst.resumeClock(paused, pausedAt)
			s[0] = code(st)
		}},
	}
}
