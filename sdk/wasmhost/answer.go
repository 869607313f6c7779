package wasmhost

import (
	"context"
	"fmt"

	"github.com/tetratelabs/wazero/api"
)

// Answer is the reply a request gets instead of an upstream's: set by a
// request-phase plugin (respond, respond_event, then the RESPOND verdict)
// or by a host service (the response cache's lookup). The gateway serves
// it as if an upstream had sent it, so the response_headers, chunk and end
// phases run on it (sdk/ABI.md, "Answering a request").
type Answer struct {
	// Status is the answer's HTTP status; 0: no answer set.
	Status int
	// Body is a whole reply (a JSON document in the format of the
	// client's endpoint).
	Body []byte
	// Events are a stream's events, each the data of one SSE event (an
	// OpenAI chunk), without the terminating [DONE]. An answer with events
	// is a stream.
	Events [][]byte
	// Source names who answered: the plugin's name, or the host service's.
	Source string

	buf []byte // Body's and Events' bytes
}

// IsStream reports whether the answer is a stream (it has events).
func (a *Answer) IsStream() bool { return len(a.Events) > 0 }

// Size is the answer's bytes: its body and events.
func (a *Answer) Size() int {
	n := len(a.Body)
	for _, e := range a.Events {
		n += len(e)
	}
	return n
}

// Set makes body the answer's whole reply with status, from source.
// body is copied; events set before are dropped.
func (a *Answer) Set(status int, body []byte, source string) {
	a.Status, a.Source = status, source
	a.buf = append(a.buf[:0], body...)
	a.Body = a.buf[:len(body):len(body)]
	clear(a.Events)
	a.Events = a.Events[:0]
}

// SetEvents makes events the answer's stream with status, from source.
// The events are copied; a body set before is dropped.
func (a *Answer) SetEvents(status int, events [][]byte, source string) {
	a.Status, a.Source = status, source
	a.buf, a.Body = a.buf[:0], nil
	clear(a.Events)
	a.Events = a.Events[:0]
	for _, e := range events {
		a.AddEvent(e)
	}
}

// AddEvent appends one stream event's data (copied). Earlier events stay
// valid: a grown buffer leaves the old array as it was.
func (a *Answer) AddEvent(data []byte) {
	start := len(a.buf)
	a.buf = append(a.buf, data...)
	end := len(a.buf)
	a.Events = append(a.Events, a.buf[start:end:end])
}

// Reset clears the answer, keeping its buffers.
func (a *Answer) Reset() {
	clear(a.Events)
	*a = Answer{buf: a.buf[:0], Events: a.Events[:0]}
}

// Answered is the request phase's outcome when a plugin answered RESPOND:
// the request gets r.Answer, and nothing goes upstream.
type Answered struct{ Plugin string }

func (e *Answered) Error() string { return fmt.Sprintf("answered by plugin %q", e.Plugin) }

// answered turns a RESPOND verdict into the phase's outcome.
func (pl *Pipeline) answered(p *Plugin, r *Request, ph Phase) error {
	switch {
	case ph != PhaseRequest:
		return fmt.Errorf("%w: %s: verdict %d (%s) is not allowed in phase %s", ErrPluginFailed, p.spec.Name, uint32(Respond), Respond, ph)
	case r.Answer.Status == 0:
		return fmt.Errorf("%w: %s: RESPOND without an answer (call respond or respond_event first)", ErrPluginFailed, p.spec.Name)
	}
	if c := pl.instruments[p.spec.Slot].Answers; c != nil {
		c.Inc()
	}
	return &Answered{Plugin: p.spec.Name}
}

// answerFuncs are the respond and respond_event imports.
func (p *Plugin) answerFuncs() []hostFunc {
	return []hostFunc{
		{"respond", 3, nil, i32, func(ctx context.Context, m api.Module, s []uint64) {
			inst, r := current(ctx)
			status := int32(s[0])
			body := read(m, uint32(s[1]), uint32(s[2]), "answer body")
			switch {
			case inst.phase != PhaseRequest || r.NoAnswer:
				s[0] = code(codeNotAllowed)
			case status < 200 || status > 599 || len(body) > maxAnswer || (len(body) > 0 && r.Answer.IsStream()):
				s[0] = code(codeInvalid)
			case r.Answer.IsStream():
				r.Answer.Status, r.Answer.Source = int(status), inst.p.spec.Name
				s[0] = 0
			default:
				r.Answer.Set(int(status), body, inst.p.spec.Name)
				s[0] = 0
			}
		}},
		{"respond_event", 2, nil, i32, func(ctx context.Context, m api.Module, s []uint64) {
			inst, r := current(ctx)
			data := read(m, uint32(s[0]), uint32(s[1]), "answer event")
			a := &r.Answer
			switch {
			case inst.phase != PhaseRequest || r.NoAnswer:
				s[0] = code(codeNotAllowed)
			case len(data) == 0 || len(data) > maxAnswerEvent || a.Size()+len(data) > maxAnswer ||
				len(a.Body) > 0 || string(data) == "[DONE]" || !oneLine(data):
				s[0] = code(codeInvalid)
			default:
				if a.Status == 0 {
					a.Status = 200
				}
				a.Source = inst.p.spec.Name
				a.AddEvent(data)
				s[0] = 0
			}
		}},
	}
}

// oneLine reports whether data can be one SSE data line: no CR or LF.
func oneLine(data []byte) bool {
	for _, c := range data {
		if c == '\n' || c == '\r' {
			return false
		}
	}
	return true
}
