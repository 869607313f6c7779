package stream

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tollgate/tollgate/gateway/internal/cancels"
	"github.com/tollgate/tollgate/gateway/internal/openai"
	"github.com/tollgate/tollgate/gateway/internal/sse"
	"github.com/tollgate/tollgate/sdk/wasmhost"
)

// panicRecorder panics at the event it is told to.
type panicRecorder struct{ at, n int }

func (r *panicRecorder) RecordEvent([]byte, bool) {
	if r.n++; r.n == r.at {
		panic("recorder bug")
	}
}

// closedExchange records how the stream ended.
type closedExchange struct {
	closed int
	flags  uint32
}

func (x *closedExchange) StreamClosed(flags uint32, _ openai.Usage) { x.closed++; x.flags = flags }
func (x *closedExchange) InputKnown(int64)                          {}

// A panic while a stream is sent ends that stream alone: WriteTo returns
// ErrPanicked and sends nothing more, the panic is logged with its
// stack and counted, the upstream is cancelled, and Close ends the
// request as a client gone mid-stream.
func TestWriteToPanic(t *testing.T) {
	events := ""
	for _, w := range []string{"one", " two", " three"} {
		events += `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"` + w + `"},"finish_reason":null}]}` + "\n\n"
	}
	events += "data: [DONE]\n\n"
	var logs bytes.Buffer
	var panics atomic.Int64
	var cause error
	x := &closedExchange{}
	st := &Stream{
		x: x, up: &Counters{TTFT: -1}, id: []byte("req_panic"), model: []byte("m"),
		log:    slog.New(slog.NewTextHandler(&logs, nil)),
		rec:    &panicRecorder{at: 2},
		cancel: func(err error) { cause = err },
		panics: &panics,
	}
	st.rd = sse.NewReader(strings.NewReader(events), 0)
	var out bytes.Buffer
	n, err := st.WriteTo(&out)
	if !errors.Is(err, ErrPanicked) {
		t.Fatalf("WriteTo: %v, want ErrPanicked", err)
	}
	// The events read together with the one that panicked are not sent.
	if n != int64(out.Len()) || strings.Contains(out.String(), "two") {
		t.Errorf("sent %d bytes: %q; want nothing from the panicking read on", n, out.String())
	}
	if panics.Load() != 1 || !errors.Is(cause, cancels.ErrClientGone) {
		t.Errorf("panics %d, upstream cancelled with %v", panics.Load(), cause)
	}
	if l := logs.String(); !strings.Contains(l, "recorder bug") || !strings.Contains(l, "req_panic") || !strings.Contains(l, "panic_test.go") {
		t.Errorf("log has no panic, request id or stack: %s", l)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if x.closed != 1 || x.flags&wasmhost.EndClientGone == 0 {
		t.Errorf("StreamClosed %d times, flags %#x; want once, as a client gone", x.closed, x.flags)
	}
	if st.x != nil || st.rd != nil {
		t.Error("a broken stream kept its parts")
	}
}
