package proxy

import (
	"errors"
	"testing"
	"time"
)

// A connection is registered once; each request on it publishes its own
// cancel, and only the request running when the client closes is told.
func TestWatchPerConnection(t *testing.T) {
	cc, peer := tcpPair(t)
	defer cc.forget()

	first := make(chan error, 1)
	w := watchClient(cc, func(err error) { first <- err })
	if w == nil {
		t.Fatal("a TCP connection could not be watched")
	}
	token := cc.watch.token
	// Pipelined bytes are not a disconnect.
	if _, err := peer.Write([]byte("GET / HTTP/1.1\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-first:
		t.Fatalf("data from the client read as a disconnect: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	w.stop()

	second := make(chan error, 1)
	if watchClient(cc, func(err error) { second <- err }) == nil || cc.watch.token != token {
		t.Fatalf("the second request re-registered the connection (token %d, was %d)", cc.watch.token, token)
	}
	peer.Close()
	select {
	case err := <-second:
		if !errors.Is(err, ErrClientGone) {
			t.Fatalf("cause %v, want ErrClientGone", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the client's close was not noticed")
	}
	select {
	case err := <-first:
		t.Fatalf("the finished first request was canceled too: %v", err)
	default:
	}
	d := watcher()
	cc.forget()
	d.mu.Lock()
	_, still := d.conns[token]
	d.mu.Unlock()
	if still {
		t.Fatal("a closed connection stayed in the watcher's set")
	}
}

// A client that hangs up while no request of its connection is watching
// (its request still being read or admitted) is noticed by the next
// watch: the edge-triggered event came once, while the watch held noGone.
func TestWatchHangUpBeforeWatch(t *testing.T) {
	cc, peer := tcpPair(t)
	defer cc.forget()
	w := watchClient(cc, func(error) {})
	if w == nil {
		t.Fatal("a TCP connection could not be watched")
	}
	w.stop() // between requests: nothing watches
	peer.Close()
	deadline := time.Now().Add(2 * time.Second)
	for !cc.watch.hup.Load() {
		if time.Now().After(deadline) {
			t.Fatal("the hang-up was never seen")
		}
		time.Sleep(time.Millisecond)
	}
	got := make(chan error, 1)
	watchClient(cc, func(err error) { got <- err })
	select {
	case err := <-got:
		if !errors.Is(err, ErrClientGone) {
			t.Fatalf("cause %v, want ErrClientGone", err)
		}
	case <-time.After(time.Second):
		t.Fatal("a hang-up before the watch started was not noticed")
	}
}
