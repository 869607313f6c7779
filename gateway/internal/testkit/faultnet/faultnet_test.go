package faultnet

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// echoServer echoes lines back and counts the connections it has open.
type echoServer struct {
	ln   net.Listener
	open atomic.Int64
	wg   sync.WaitGroup
}

func startEcho(t *testing.T) *echoServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &echoServer{ln: ln}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.open.Add(1)
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer s.open.Add(-1)
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); s.wg.Wait() })
	return s
}

func (s *echoServer) addr() string { return s.ln.Addr().String() }

// roundTrip sends a line and reads it back within limit.
func roundTrip(c net.Conn, r *bufio.Reader, line string, limit time.Duration) error {
	c.SetDeadline(time.Now().Add(limit))
	defer c.SetDeadline(time.Time{})
	if _, err := fmt.Fprintf(c, "%s\n", line); err != nil {
		return err
	}
	got, err := r.ReadString('\n')
	if err != nil {
		return err
	}
	if got != line+"\n" {
		return fmt.Errorf("echoed %q, want %q", got, line)
	}
	return nil
}

func dial(t *testing.T, p *Proxy) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.DialTimeout("tcp", p.Addr(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, bufio.NewReader(c)
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("%s: not within 10s", what)
		}
	}
}

func TestPass(t *testing.T) {
	t.Parallel()
	p := Start(t, startEcho(t).addr())
	c, r := dial(t, p)
	for i := range 100 {
		if err := roundTrip(c, r, fmt.Sprint("line", i), 10*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if m, _ := p.Mode(); m != Pass {
		t.Fatalf("mode %v, want pass", m)
	}
}

// TestDelay: a round trip takes at least twice the delay (it is added
// each way), and healing ends it.
func TestDelay(t *testing.T) {
	t.Parallel()
	const d = 60 * time.Millisecond
	p := Start(t, startEcho(t).addr())
	c, r := dial(t, p)
	if err := p.SetDelay(d); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		start := time.Now()
		if err := roundTrip(c, r, fmt.Sprint("slow", i), 10*time.Second); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took < 2*d {
			t.Fatalf("round trip %v with %v added each way: want ≥ %v", took, d, 2*d)
		}
	}
	// Several chunks in flight at once keep their order.
	for i := range 20 {
		fmt.Fprintf(c, "burst%d\n", i)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for i := range 20 {
		got, err := r.ReadString('\n')
		if err != nil || got != fmt.Sprintf("burst%d\n", i) {
			t.Fatalf("burst %d: %q %v", i, got, err)
		}
	}
	p.Heal()
	// Healed: a round trip is fast again (bounded loosely: a loaded machine
	// is slow, but not by a delay each way every time).
	fast := 0
	for i := range 5 {
		start := time.Now()
		if err := roundTrip(c, r, fmt.Sprint("fast", i), 10*time.Second); err != nil {
			t.Fatal(err)
		}
		if time.Since(start) < 2*d {
			fast++
		}
	}
	if fast == 0 {
		t.Fatal("after Heal, no round trip was faster than the delay")
	}
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	if _, err := New("no-port"); err == nil {
		t.Error("a target without a port was accepted")
	}
	p := Start(t, startEcho(t).addr())
	for _, d := range []time.Duration{0, -time.Second} {
		if err := p.SetDelay(d); err == nil {
			t.Errorf("SetDelay(%v) accepted", d)
		}
	}
	p.Partition()
	if err := p.SetDelay(time.Second); err == nil {
		t.Error("SetDelay during a partition accepted")
	}
}

// TestPartition: connections open at the partition and connections made
// during it hang — writes succeed, reads neither return data nor EOF nor
// a reset — and stay hung after the heal; new connections after the heal
// pass. The target sees a hung connection's close only after the heal.
func TestPartition(t *testing.T) {
	t.Parallel()
	echo := startEcho(t)
	p := Start(t, echo.addr())
	old, oldR := dial(t, p)
	if err := roundTrip(old, oldR, "before", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	quitter, quitterR := dial(t, p)
	if err := roundTrip(quitter, quitterR, "before", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "echo sees 2 connections", func() bool { return echo.open.Load() == 2 })

	p.Partition()
	hung := func(c net.Conn, r *bufio.Reader, what string) {
		t.Helper()
		err := roundTrip(c, r, "during", 150*time.Millisecond)
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("%s: round trip: %v; want a timeout (no data, no EOF, no reset)", what, err)
		}
	}
	hung(old, oldR, "a connection open at the partition")
	// A new connection is accepted (not refused) and hangs.
	during, duringR := dial(t, p)
	hung(during, duringR, "a connection made during the partition")
	// Writes keep succeeding: the bytes are swallowed, nothing pushes back.
	during.SetWriteDeadline(time.Now().Add(5 * time.Second))
	for range 100 {
		if _, err := during.Write(make([]byte, 8<<10)); err != nil {
			t.Fatalf("write during the partition: %v", err)
		}
	}
	if st := p.Stats(); st.Open != 3 || st.Hung != 3 {
		t.Fatalf("during the partition: %+v; want 3 open, 3 hung", st)
	}
	// A client that gives up: the target does not see it yet.
	quitter.Close()
	waitFor(t, "the proxy sees the quitter go", func() bool { return p.Stats().Open == 2 })
	time.Sleep(50 * time.Millisecond)
	if n := echo.open.Load(); n != 2 {
		t.Fatalf("the target saw a close through the partition: %d connections open, want 2", n)
	}

	p.Heal()
	// Now the quitter's close gets through.
	waitFor(t, "the target sees the quitter's close", func() bool { return echo.open.Load() == 1 })
	hung(old, oldR, "a connection open at the partition, after the heal")
	hung(during, duringR, "a connection made during the partition, after the heal")
	fresh, freshR := dial(t, p)
	if err := roundTrip(fresh, freshR, "after", 10*time.Second); err != nil {
		t.Fatalf("a connection made after the heal: %v", err)
	}
	if st := p.Stats(); st.Open != 3 || st.Hung != 2 || st.Accepted != 4 {
		t.Fatalf("after the heal: %+v; want 4 accepted, 3 open, 2 hung", st)
	}
	// Clients closing hung connections after the heal: their target
	// connections close at once, and nothing is left open.
	old.Close()
	during.Close()
	fresh.Close()
	waitFor(t, "every connection closed", func() bool { return p.Stats().Open == 0 && echo.open.Load() == 0 })
}

// TestTargetDown: a target that refuses makes the proxy close the
// connection (a refusal, not a hang).
func TestTargetDown(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	p := Start(t, addr)
	c, r := dial(t, p)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := r.ReadByte(); !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && !isReset(err) {
		t.Fatalf("read from a proxy whose target refuses: %v; want the connection closed", err)
	}
}

func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && !op.Timeout()
}

// TestConcurrentModes runs echo clients while the mode flips between
// pass, delay and partition, then checks that Close leaves no connection
// and no goroutine behind, and that a client on a connection that was
// never hung got every line back in order.
func TestConcurrentModes(t *testing.T) {
	t.Parallel()
	echo := startEcho(t)
	p, err := New(echo.addr())
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var ok, failed atomic.Int64
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				c, err := net.DialTimeout("tcp", p.Addr(), time.Second)
				if err != nil {
					failed.Add(1)
					continue
				}
				r := bufio.NewReader(c)
				for j := range 5 {
					if err := roundTrip(c, r, fmt.Sprintf("w%d-%d-%d", w, i, j), 100*time.Millisecond); err != nil {
						// A timeout is a hang (partition, or a delay past the
						// limit); anything else must not happen.
						var ne net.Error
						if !errors.As(err, &ne) || !ne.Timeout() {
							t.Errorf("worker %d: %v", w, err)
						}
						failed.Add(1)
						break
					}
					ok.Add(1)
				}
				c.Close()
			}
		}()
	}
	for i := range 30 {
		switch i % 3 {
		case 0:
			p.Heal()
		case 1:
			if err := p.SetDelay(time.Duration(1+i%4) * 10 * time.Millisecond); err != nil {
				t.Error(err)
			}
		case 2:
			p.Partition()
		}
		time.Sleep(20 * time.Millisecond)
	}
	p.Heal()
	time.Sleep(100 * time.Millisecond)
	close(stop)
	wg.Wait()
	if ok.Load() == 0 {
		t.Fatalf("no round trip succeeded (%d failed)", failed.Load())
	}
	waitFor(t, "every client connection closed", func() bool { return p.Stats().Open == 0 })
	if err := p.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		t.Fatal(err)
	}
	if st := p.Stats(); st.Open != 0 {
		t.Fatalf("after Close: %+v", st)
	}
	waitFor(t, "the target sees every connection closed", func() bool { return echo.open.Load() == 0 })
	t.Logf("%d round trips, %d connections broken off", ok.Load(), failed.Load())
}
