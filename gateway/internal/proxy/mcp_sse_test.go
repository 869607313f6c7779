package proxy

import (
	"fmt"
	"testing"
)

// A refusal goes into a session's stream only for the stream's tenant,
// while the stream is registered and its queue has room.
func TestMCPSSEStreamsDeliver(t *testing.T) {
	var s sseStreams
	k := sseKey{"docs", "/sse?sessionid=a"}
	r := &sseRelay{tenant: "acme", refusals: make(chan []byte, maxSSERefusals)}
	if s.deliver(k, "acme", []byte("ev")) {
		t.Fatal("delivered to no stream")
	}
	s.add(k, r)
	for _, tc := range []struct {
		key    sseKey
		tenant string
		want   bool
	}{
		{k, "acme", true},
		{k, "globex", false},
		{sseKey{"docs", "/sse?sessionid=b"}, "acme", false},
		{sseKey{"other", k.target}, "acme", false},
	} {
		if got := s.deliver(tc.key, tc.tenant, []byte("ev")); got != tc.want {
			t.Errorf("deliver(%v, %s) = %v", tc.key, tc.tenant, got)
		}
	}
	for i := 1; i < maxSSERefusals; i++ {
		if !s.deliver(k, "acme", []byte(fmt.Sprint(i))) {
			t.Fatalf("refusal %d not queued", i)
		}
	}
	if s.deliver(k, "acme", []byte("full")) {
		t.Error("queued past the bound")
	}
	if ev := <-r.refusals; string(ev) != "ev" {
		t.Errorf("first queued %q", ev)
	}
	// A later stream of the session replaces r; r's removal leaves it.
	r2 := &sseRelay{tenant: "acme", refusals: make(chan []byte, 1)}
	s.add(k, r2)
	s.remove(k, r)
	if !s.deliver(k, "acme", []byte("ev")) || len(r2.refusals) != 1 {
		t.Error("the later stream was removed with the earlier one")
	}
	s.remove(k, r2)
	if s.deliver(k, "acme", []byte("ev")) {
		t.Error("delivered to a removed stream")
	}
}
