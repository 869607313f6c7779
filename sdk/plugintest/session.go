package plugintest

import (
	"strings"

	"github.com/tollgate/tollgate/sdk"
	"github.com/tollgate/tollgate/sdk/wasmhost"
)

// Event is one upstream event of a streamed reply, as the gateway hands it
// to the chunk phase.
type Event struct {
	Text string
	// Flags are the event's chunk flags. Zero means sdk.ChunkText for an
	// event with text and no flag at all for one without (an empty delta).
	// ChunkText is set or cleared to match Text.
	Flags sdk.ChunkFlags
	// ToolCalls are the event's tool-call deltas, which the plugin reads
	// with chunk_tool_calls. sdk.ChunkToolCalls is set when there are any
	// (and left as Flags has it when there are none).
	ToolCalls []ToolCallDelta
}

// ToolCallDelta is one element of an event's delta.tool_calls: Name and
// Arguments are the JSON-decoded function.name and this event's fragment
// of function.arguments.
type ToolCallDelta struct {
	Index           int
	Name, Arguments string
}

// Sent is one event as the client received it.
type Sent struct {
	// Text is the event's text delta.
	Text string
	// Flags are the flags of the upstream event it came from; 0 for an
	// event the gateway wrote itself (the text a REPLACE inserts before
	// [DONE], or a STOP's final delta).
	Flags sdk.ChunkFlags
	// Replaced reports that a plugin's REPLACE rewrote its text.
	Replaced bool
	// FinishReason is set on a STOP's final delta.
	FinishReason string
}

// Step is what one event of a Session did.
type Step struct {
	Verdict wasmhost.Verdict
	// Out are the events sent to the client because of this one, in order
	// (held events released by it first).
	Out []Sent
	// Err is a plugin failure: the gateway would end the stream with an
	// error event.
	Err error
}

// Session runs the chunk phase of one streamed reply event by event,
// applying the verdicts as the gateway's stream does (HOLD queues events;
// CONTINUE, RELEASE and REPLACE send the held ones first; STOP drops them
// and sends the correction as a final delta, then the end; REPLACE on
// [DONE] inserts its text as a final delta before it), so that a test can
// check after every event what the client has received. Unlike the
// gateway, it assumes every event has a choice to carry replaced text.
//
// A Session is not safe for concurrent use. Close it, or let the test's
// cleanup do so.
type Session struct {
	p       *Plugin
	r       *wasmhost.Request
	held    []Sent
	sent    []Sent
	stopped bool
	over    bool
}

// Session starts a streamed reply to req.
func (p *Plugin) Session(req Request) *Session {
	req.Stream = true
	s := &Session{p: p, r: p.newRequest(req)}
	p.t.Cleanup(s.Close)
	return s
}

// Request runs the request phase of the session's request, before its
// first event, as the gateway does: what a plugin keeps there (its state,
// the phases it skips) holds for the events.
func (s *Session) Request() RequestResult { return s.p.request(s.r) }

// Send runs the chunk phase for one upstream event. After a STOP or a
// failure, or after Done, it does nothing and returns a zero Step.
func (s *Session) Send(ev Event) Step {
	if s.over {
		return Step{}
	}
	flags := ev.Flags
	if ev.Text != "" {
		flags |= sdk.ChunkText
	} else {
		flags &^= sdk.ChunkText
	}
	if len(ev.ToolCalls) == 0 {
		return s.run([]byte(ev.Text), flags)
	}
	var calls []byte
	for _, tc := range ev.ToolCalls {
		calls = wasmhost.AppendToolCallDelta(calls, tc.Index, []byte(tc.Name), []byte(tc.Arguments))
	}
	s.r.ToolCalls = calls
	defer func() { s.r.ToolCalls = nil }()
	return s.run([]byte(ev.Text), flags|sdk.ChunkToolCalls)
}

// Done sends the stream's terminating event ([DONE]).
func (s *Session) Done() Step {
	if s.over {
		return Step{}
	}
	return s.run(nil, sdk.ChunkDone)
}

func (s *Session) run(text []byte, flags sdk.ChunkFlags) Step {
	res, err := s.p.pipe.Chunk(s.r, text, uint32(flags))
	if err != nil {
		s.over = true
		return Step{Err: err}
	}
	start := len(s.sent)
	done := flags&sdk.ChunkDone != 0
	ev := Sent{Text: string(text), Flags: flags}
	switch res.Verdict {
	case wasmhost.Hold:
		if !done {
			s.held = append(s.held, ev)
			break
		}
		s.flush()
	case wasmhost.Replace:
		s.flush()
		if done {
			if len(res.Text) > 0 {
				s.sent = append(s.sent, Sent{Text: string(res.Text), Replaced: true})
			}
			break
		}
		ev.Text, ev.Replaced = string(res.Text), true
		s.sent = append(s.sent, ev)
	case wasmhost.Stop:
		s.held = s.held[:0]
		fr := string(res.FinishReason)
		if fr == "" {
			fr = "content_filter"
		}
		s.sent = append(s.sent, Sent{Text: string(res.Text), FinishReason: fr})
		s.stopped, s.over = true, true
		return Step{Verdict: res.Verdict, Out: s.sent[start:]}
	default:
		s.flush()
		if !done {
			s.sent = append(s.sent, ev)
		}
	}
	if done {
		s.sent = append(s.sent, Sent{Flags: sdk.ChunkDone})
		s.over = true
	}
	return Step{Verdict: res.Verdict, Out: s.sent[start:]}
}

func (s *Session) flush() {
	s.sent = append(s.sent, s.held...)
	s.held = s.held[:0]
}

// Text is the text the client has received so far.
func (s *Session) Text() string {
	var b strings.Builder
	for _, e := range s.sent {
		b.WriteString(e.Text)
	}
	return b.String()
}

// HeldEvents is the number of events the host holds for the plugin.
func (s *Session) HeldEvents() int { return len(s.held) }

// Sent returns the events the client has received so far.
func (s *Session) Sent() []Sent { return append([]Sent(nil), s.sent...) }

// Stopped reports whether a plugin stopped the stream.
func (s *Session) Stopped() bool { return s.stopped }

// Fact returns a fact a plugin set for the request.
func (s *Session) Fact(key string) (string, bool) {
	v, ok := s.r.Fact(key)
	return string(v), ok
}

// End runs the end phase with flags (wasmhost.EndCompleted, ...), the text
// bytes sent being those the client received.
func (s *Session) End(flags uint32) {
	s.r.TextBytesSent = int64(len(s.Text()))
	s.p.pipe.End(s.r, flags)
}

// Close releases the session's request; it may be called more than once.
func (s *Session) Close() {
	if s.r != nil {
		wasmhost.ReleaseRequest(s.r)
		s.r = nil
		s.over = true
	}
}
