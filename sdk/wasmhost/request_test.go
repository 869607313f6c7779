package wasmhost

import (
	"fmt"
	"testing"
)

// Headers added to a request keep their bytes while the buffer behind them
// grows, and a released request's buffer serves the next one.
func TestAddClientHeaderKeepsEarlierHeaders(t *testing.T) {
	for round := range 2 {
		r := AcquireRequest()
		var want []string
		for i := range 200 { // grows headerBytes many times over
			name := fmt.Sprintf("x-h%d", i)
			value := fmt.Appendf(nil, "v%d-%d", round, i)
			r.AddClientHeader(name, value)
			value[0] = '!' // the caller's bytes are copied
			want = append(want, fmt.Sprintf("%s: v%d-%d", name, round, i))
		}
		if len(r.SetClientHeaders) != len(want) {
			t.Fatalf("round %d: %d headers, want %d", round, len(r.SetClientHeaders), len(want))
		}
		for i, h := range r.SetClientHeaders {
			if got := string(h.Name) + ": " + string(h.Value); got != want[i] {
				t.Fatalf("round %d: header %d = %q, want %q", round, i, got, want[i])
			}
			if cap(h.Name) != len(h.Name) || cap(h.Value) != len(h.Value) {
				t.Fatalf("round %d: header %d can be appended to in place", round, i)
			}
		}
		ReleaseRequest(r)
	}
}

func TestAddClientHeaderAllocations(t *testing.T) {
	r := AcquireRequest()
	defer ReleaseRequest(r)
	var b [8]byte
	allocs := testing.AllocsPerRun(100, func() {
		r.SetClientHeaders = r.SetClientHeaders[:0]
		r.headerBytes = r.headerBytes[:0]
		r.AddClientHeader("x-ratelimit-limit-requests", append(b[:0], "1000"...))
		r.AddClientHeader("x-ratelimit-remaining-requests", append(b[:0], "999"...))
	})
	if allocs != 0 {
		t.Fatalf("%.1f allocations per two headers, want 0 once the buffers have grown", allocs)
	}
}
