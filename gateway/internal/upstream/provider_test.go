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
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/config"
)

// WithKeyHeader sends the key under the provider's header (Anthropic's
// x-api-key), never as Authorization; other headers are the caller's.
func TestKeyHeader(t *testing.T) {
	reqs := make(chan string, 1)
	srv := newRawServer(t, func(c net.Conn, br *bufio.Reader) {
		r, err := readRequest(br)
		if err != nil {
			return
		}
		reqs <- r
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	})
	u, _ := url.Parse("http://" + srv.ln.Addr().String() + "/v1")
	c := New(&config.Upstream{Name: "claude", Provider: config.ProviderAnthropic, URL: u,
		Timeouts: config.Timeouts{Connect: time.Second, FirstByte: 2 * time.Second, Idle: 2 * time.Second}, MaxConnections: 1, APIKey: "sk-ant"},
		WithKeyHeader("x-api-key"))
	t.Cleanup(c.Close)
	if c.Provider() != config.ProviderAnthropic {
		t.Fatalf("provider %q", c.Provider())
	}
	ex, err := c.Do(context.Background(), &Request{Method: "POST", Path: "/messages", Header: []byte("anthropic-version: 2023-06-01\r\n"), Body: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	ex.Release()
	want := "POST /v1/messages HTTP/1.1\r\nHost: " + srv.ln.Addr().String() + "\r\nx-api-key: sk-ant\r\nanthropic-version: 2023-06-01\r\nContent-Length: 2\r\n\r\n{}"
	if got := <-reqs; got != want {
		t.Errorf("request on the wire:\n%q\nwant\n%q", got, want)
	}
}

// countingAuth writes "X-Auth: <n> <method> <host> <path> <body length>"
// with n counting its calls, or fails when err is set.
type countingAuth struct {
	calls atomic.Int64
	err   error
}

func (a *countingAuth) AppendAuth(dst []byte, r *AuthRequest) ([]byte, error) {
	n := a.calls.Add(1)
	if a.err != nil {
		return dst, a.err
	}
	if r.Now.IsZero() {
		return dst, errors.New("no time")
	}
	return fmt.Appendf(dst, "X-Auth: %d %s %s %s %d\r\n", n, r.Method, r.Host, r.Path, len(r.Body)), nil
}

// The authorizer runs on every write of a request, the retry on a fresh
// connection included (a signature or token is never replayed from a
// write the server did not see), after the request's own headers and
// before the body, over the full path with its query.
func TestAuthorizerOnEveryWrite(t *testing.T) {
	got := make(chan string, 10)
	srv := newRawServer(t, func(c net.Conn, br *bufio.Reader) {
		r, err := readRequest(br)
		if err != nil {
			return
		}
		for _, line := range strings.Split(r, "\r\n") {
			if v, ok := strings.CutPrefix(line, "X-Auth: "); ok {
				got <- v
			}
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		// then close: the connection goes stale in the client's pool
	})
	addr := srv.ln.Addr().String()
	u, _ := url.Parse("http://" + addr + "/base")
	auth := &countingAuth{}
	c := New(&config.Upstream{Name: "signed", URL: u, MaxConnections: 2,
		Timeouts: config.Timeouts{Connect: time.Second, FirstByte: 2 * time.Second, Idle: 2 * time.Second}}, WithAuthorizer(auth))
	t.Cleanup(c.Close)
	for i := range 3 {
		ex, err := c.Do(context.Background(), &Request{Method: "POST", Path: "/model/m%3A1/converse?x=1", Header: []byte("X-A: 1\r\n"), Body: []byte(`{"a":1}`)})
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if _, err := ex.ReadAll(nil, 100); err != nil {
			t.Fatal(err)
		}
		ex.Release()
		time.Sleep(20 * time.Millisecond) // let the close arrive
	}
	// Requests 2 and 3 were written twice: to the stale connection, then
	// to a fresh one. The server saw the 1st, 3rd and 5th signatures.
	if n := auth.calls.Load(); n != 5 {
		t.Errorf("authorizer called %d times, want 5", n)
	}
	for _, n := range []int{1, 3, 5} {
		want := fmt.Sprintf("%d POST %s /base/model/m%%3A1/converse?x=1 7", n, addr)
		if v := <-got; v != want {
			t.Errorf("X-Auth %q, want %q", v, want)
		}
	}
}

// A failing authorizer fails the request with ErrCredentials, its message
// kept, before a connection is taken: nothing reaches the upstream.
func TestAuthorizerFailure(t *testing.T) {
	srv := newRawServer(t, func(c net.Conn, br *bufio.Reader) {})
	u, _ := url.Parse("http://" + srv.ln.Addr().String())
	c := New(&config.Upstream{Name: "vertex", URL: u, MaxConnections: 1,
		Timeouts: config.Timeouts{Connect: time.Second, FirstByte: time.Second, Idle: time.Second}},
		WithAuthorizer(&countingAuth{err: errors.New("metadata server: no token")}))
	t.Cleanup(c.Close)
	_, err := c.Do(context.Background(), &Request{Method: "POST", Path: "/x", Body: []byte(`{}`)})
	if !errors.Is(err, ErrCredentials) || !strings.Contains(err.Error(), "vertex: metadata server: no token") {
		t.Fatalf("err = %v, want ErrCredentials naming the upstream and the source", err)
	}
	time.Sleep(20 * time.Millisecond)
	if n := srv.conns.Load(); n != 0 {
		t.Errorf("%d connections made", n)
	}
}
