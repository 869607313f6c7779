package upstream

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/config"
)

// rawServer accepts connections and hands each to serve; it counts them.
type rawServer struct {
	ln    net.Listener
	conns atomic.Int64
}

func newRawServer(t *testing.T, serve func(c net.Conn, br *bufio.Reader)) *rawServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &rawServer{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.conns.Add(1)
			go func() { defer c.Close(); serve(c, bufio.NewReader(c)) }()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return s
}

// readRequest consumes one request with a Content-Length body.
func readRequest(br *bufio.Reader) (string, error) {
	var n int
	var head strings.Builder
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return "", err
		}
		head.WriteString(line)
		if line == "\r\n" {
			break
		}
		if v, ok := strings.CutPrefix(strings.ToLower(line), "content-length: "); ok {
			fmt.Sscanf(v, "%d", &n)
		}
	}
	body := make([]byte, n)
	_, err := io.ReadFull(br, body)
	return head.String() + string(body), err
}

func client(t *testing.T, addr string, tm config.Timeouts, maxConns int) *Client {
	u, _ := url.Parse("http://" + addr + "/v1")
	if tm.Connect == 0 {
		tm.Connect = time.Second
	}
	if tm.FirstByte == 0 {
		tm.FirstByte = 2 * time.Second
	}
	if tm.Idle == 0 {
		tm.Idle = 2 * time.Second
	}
	c := New(&config.Upstream{Name: "t", URL: u, Timeouts: tm, MaxConnections: maxConns, APIKey: "sk-x"})
	t.Cleanup(c.Close)
	return c
}

func do(t *testing.T, c *Client, ctx context.Context) (string, error) {
	ex, err := c.Do(ctx, &Request{Method: "POST", Path: "/chat/completions", Header: []byte("X-A: 1\r\n"), Body: []byte(`{}`)})
	if err != nil {
		return "", err
	}
	defer ex.Release()
	b, err := ex.ReadAll(nil, 1<<20)
	return string(b), err
}

func TestRequestOnTheWireAndReuse(t *testing.T) {
	reqs := make(chan string, 10)
	srv := newRawServer(t, func(c net.Conn, br *bufio.Reader) {
		for {
			r, err := readRequest(br)
			if err != nil {
				return
			}
			reqs <- r
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n")
		}
	})
	c := client(t, srv.ln.Addr().String(), config.Timeouts{}, 4)
	for i := 0; i < 5; i++ {
		body, err := do(t, c, context.Background())
		if err != nil || body != "ok" {
			t.Fatalf("request %d: %q %v", i, body, err)
		}
	}
	want := "POST /v1/chat/completions HTTP/1.1\r\nHost: " + srv.ln.Addr().String() + "\r\nAuthorization: Bearer sk-x\r\nX-A: 1\r\nContent-Length: 2\r\n\r\n{}"
	if got := <-reqs; got != want {
		t.Errorf("request on the wire:\n%q\nwant\n%q", got, want)
	}
	if n := srv.conns.Load(); n != 1 {
		t.Errorf("%d connections for 5 sequential requests, want 1 (keep-alive)", n)
	}
}

// A pooled connection the server closed while idle is retried on a fresh
// one, invisibly to the caller.
func TestStalePooledConnectionRetried(t *testing.T) {
	srv := newRawServer(t, func(c net.Conn, br *bufio.Reader) {
		if _, err := readRequest(br); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		// then close: the connection goes stale in the client's pool
	})
	c := client(t, srv.ln.Addr().String(), config.Timeouts{}, 4)
	for i := 0; i < 3; i++ {
		if body, err := do(t, c, context.Background()); err != nil || body != "ok" {
			t.Fatalf("request %d: %q %v", i, body, err)
		}
		time.Sleep(20 * time.Millisecond) // let the close arrive
	}
	if n := srv.conns.Load(); n != 3 {
		t.Errorf("%d connections, want 3", n)
	}
}

func TestTimeouts(t *testing.T) {
	tests := []struct {
		name  string
		tm    config.Timeouts
		serve func(c net.Conn)
		phase string // "do" or "body"
	}{
		{"first byte", config.Timeouts{FirstByte: 100 * time.Millisecond}, func(c net.Conn) { time.Sleep(time.Second) }, "do"},
		{"idle between reads", config.Timeouts{Idle: 100 * time.Millisecond}, func(c net.Conn) {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n")
			time.Sleep(time.Second)
		}, "body"},
		{"total", config.Timeouts{Total: 300 * time.Millisecond}, func(c net.Conn) {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
			for i := 0; i < 20; i++ {
				io.WriteString(c, "2\r\nok\r\n")
				time.Sleep(50 * time.Millisecond)
			}
		}, "body"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newRawServer(t, func(c net.Conn, br *bufio.Reader) {
				readRequest(br)
				tt.serve(c)
			})
			c := client(t, srv.ln.Addr().String(), tt.tm, 4)
			start := time.Now()
			ex, err := c.Do(context.Background(), &Request{Method: "POST", Path: "/x", Body: []byte("{}")})
			if tt.phase == "do" {
				if !errors.Is(err, ErrTimeout) {
					t.Fatalf("Do error %v, want ErrTimeout", err)
				}
			} else {
				if err != nil {
					t.Fatal(err)
				}
				_, err = ex.ReadAll(nil, 1<<20)
				ex.Release()
				if !errors.Is(err, ErrTimeout) {
					t.Fatalf("body error %v, want ErrTimeout", err)
				}
			}
			if d := time.Since(start); d > 700*time.Millisecond {
				t.Errorf("took %v", d)
			}
		})
	}
}

func TestUnreachableAndCancel(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	c := client(t, addr, config.Timeouts{}, 4)
	if _, err := do(t, c, context.Background()); !errors.Is(err, ErrUnreachable) {
		t.Errorf("closed port: %v, want ErrUnreachable", err)
	}

	closed := make(chan time.Time, 1)
	srv := newRawServer(t, func(c net.Conn, br *bufio.Reader) {
		readRequest(br)
		c.Read(make([]byte, 1)) // blocks until the client closes
		closed <- time.Now()
	})
	c = client(t, srv.ln.Addr().String(), config.Timeouts{}, 4)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(50 * time.Millisecond); cancel() }()
	_, err := do(t, c, ctx)
	if !errors.Is(err, ErrCanceled) {
		t.Errorf("canceled: %v, want ErrCanceled", err)
	}
	select {
	case at := <-closed:
		if d := time.Since(at); d > 100*time.Millisecond {
			t.Errorf("server saw the close late")
		}
	case <-time.After(time.Second):
		t.Fatal("server never saw the close")
	}
}

// The pool never opens more than MaxConnections; callers wait for a slot.
func TestMaxConnections(t *testing.T) {
	var open, peak atomic.Int64
	srv := newRawServer(t, func(c net.Conn, br *bufio.Reader) {
		n := open.Add(1)
		defer open.Add(-1)
		for {
			if p := peak.Load(); n > p {
				peak.CompareAndSwap(p, n)
			}
			if _, err := readRequest(br); err != nil {
				return
			}
			time.Sleep(5 * time.Millisecond)
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	})
	c := client(t, srv.ln.Addr().String(), config.Timeouts{}, 3)
	var wg sync.WaitGroup
	var failed atomic.Int64
	for i := 0; i < 30; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if body, err := do(t, c, context.Background()); err != nil || body != "ok" {
				failed.Add(1)
			}
		}()
	}
	wg.Wait()
	if failed.Load() != 0 || peak.Load() > 3 || srv.conns.Load() > 3 {
		t.Errorf("failed=%d peak=%d conns=%d, want 0, ≤3, ≤3", failed.Load(), peak.Load(), srv.conns.Load())
	}
}

// A 204 has no body whatever its headers say (an MCP server's reply to a
// DELETE has no Content-Length): it reads as empty at once, not as a body
// lasting until the server closes. With idle 0 (no per-read bound) a
// stream's reads wait as long as the server keeps it.
func TestNoContentAndUnboundedIdle(t *testing.T) {
	srv := newRawServer(t, func(c net.Conn, br *bufio.Reader) {
		for {
			r, err := readRequest(br)
			if err != nil {
				return
			}
			if strings.HasPrefix(r, "DELETE") {
				io.WriteString(c, "HTTP/1.1 204 No Content\r\n\r\n")
				continue
			}
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
			time.Sleep(300 * time.Millisecond) // past the first-byte step: no read deadline is left armed
			io.WriteString(c, "4\r\nlate\r\n0\r\n\r\n")
		}
	})
	u, _ := url.Parse("http://" + srv.ln.Addr().String() + "/mcp")
	c := New(&config.Upstream{Name: "mcp", URL: u, Timeouts: config.Timeouts{Connect: time.Second, FirstByte: 100 * time.Millisecond}, MaxConnections: 2})
	t.Cleanup(c.Close)
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second) // a body read to the close would hang
	defer cancel()
	ex, err := c.Do(ctx, &Request{Method: "DELETE"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := ex.ReadAll(nil, 1<<20)
	ex.Release()
	if err != nil || len(b) != 0 || time.Since(start) > time.Second {
		t.Fatalf("204: %q, %v after %v", b, err, time.Since(start))
	}
	ex, err = c.Do(context.Background(), &Request{Method: "POST", Body: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	defer ex.Release()
	if b, err := ex.ReadAll(nil, 1<<20); err != nil || string(b) != "late" {
		t.Fatalf("stream: %q, %v", b, err)
	}
}

// A request whose context is canceled as its exchange is released (the
// client went away at the reply's end) never leaves a closed connection
// in the pool: the next request is sent on a live one.
func TestCancelAtReleaseNeverPoolsClosed(t *testing.T) {
	srv := newRawServer(t, func(c net.Conn, br *bufio.Reader) {
		for {
			if _, err := readRequest(br); err != nil {
				return
			}
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	})
	c := client(t, srv.ln.Addr().String(), config.Timeouts{}, 4)
	for i := 0; i < 500; i++ {
		ctx, cancel := context.WithCancel(context.Background())
		ex, err := c.Do(ctx, &Request{Method: "POST", Path: "/chat/completions", Body: []byte(`{}`)})
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if b, err := ex.ReadAll(nil, 1<<20); err != nil || string(b) != "ok" {
			t.Fatalf("request %d: %q %v", i, b, err)
		}
		cancel() // the watch's cancel starts on its own goroutine, racing the release
		ex.Release()
		if body, err := do(t, c, context.Background()); err != nil || body != "ok" {
			t.Fatalf("after request %d: %q %v", i, body, err)
		}
	}
}
