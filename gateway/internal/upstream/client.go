// Package upstream sends requests to one model server over a pool of
// keep-alive HTTP/1.1 connections that the gateway owns.
//
// The gateway owns the connections (rather than using fasthttp.HostClient)
// for three reasons: a stream must be cancellable from another goroutine the
// instant its client goes away (Exchange.Cancel closes the socket, so the
// upstream sees the close at once); each phase needs its own deadline
// (connect, first byte, idle between stream reads, total); and a request
// must be retried on a fresh connection when a pooled one turns out to have
// been closed by the server. Parsing still uses fasthttp's header and body
// readers.
package upstream

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/tollgate/tollgate/gateway/internal/config"
	"github.com/tollgate/tollgate/gateway/internal/sockio"
)

// Errors that classify a failed exchange. Use errors.Is.
var (
	// ErrTimeout means a phase deadline passed (connect, first byte, idle
	// or total).
	ErrTimeout = errors.New("upstream timed out")
	// ErrUnreachable means no connection could be made or the upstream
	// broke the exchange before a valid response.
	ErrUnreachable = errors.New("upstream unreachable")
	// ErrCanceled means the exchange was canceled by its caller.
	ErrCanceled = errors.New("upstream request canceled")
	// ErrPoolFull means every connection the gateway may open to the
	// upstream (max_connections) stayed busy for the whole wait: the
	// gateway's own limit, which says nothing about the upstream's health.
	ErrPoolFull = errors.New("every connection to the upstream is busy")
	// ErrCredentials means the upstream's Authorizer could not produce
	// credentials for the request (its source failed); nothing was sent.
	ErrCredentials = errors.New("no credentials for the upstream")
)

// maxIdleAge drops pooled connections idle longer than this; servers
// commonly close idle keep-alive connections after 60–120 s.
const maxIdleAge = 50 * time.Second

// Client sends requests to one upstream. It is safe for concurrent use.
type Client struct {
	name     string
	addr     string // host:port
	tls      *tls.Config
	timeouts config.Timeouts
	// static is the header block every request carries: Host,
	// Authorization and configured headers, each ending in CRLF.
	static   []byte
	basePath string
	provider string
	// auth writes per-request credentials (nil: the static headers carry
	// them, if any); host is the Host it signs.
	auth Authorizer
	host string

	dialer net.Dialer
	idle   chan *conn    // pooled idle connections
	slots  chan struct{} // one token per open connection

	closed atomic.Bool
}

// Option configures a Client beyond its policy entry.
type Option func(*options)

type options struct {
	auth      Authorizer
	keyHeader string
}

// WithAuthorizer has every request written to the upstream carry the
// credentials a writes (see Authorizer): SigV4 signatures, OAuth tokens.
func WithAuthorizer(a Authorizer) Option { return func(o *options) { o.auth = a } }

// WithKeyHeader sends the upstream's key (api_key_env) as the header name
// with the key as its whole value (Anthropic's x-api-key, Azure's
// api-key), instead of the default "Authorization: Bearer <key>".
func WithKeyHeader(name string) Option { return func(o *options) { o.keyHeader = name } }

// New returns a Client for u (validated by config).
func New(u *config.Upstream, opts ...Option) *Client {
	var o options
	for _, f := range opts {
		f(&o)
	}
	host := u.URL.Host
	port := u.URL.Port()
	var tc *tls.Config
	if port == "" {
		port = "80"
		if u.URL.Scheme == "https" {
			port = "443"
		}
		host = net.JoinHostPort(u.URL.Hostname(), port)
	}
	if u.URL.Scheme == "https" {
		tc = &tls.Config{ServerName: u.URL.Hostname(), NextProtos: []string{"http/1.1"}, MinVersion: tls.VersionTLS12}
	}
	c := &Client{
		name:     u.Name,
		addr:     host,
		tls:      tc,
		timeouts: u.Timeouts,
		basePath: u.URL.EscapedPath(),
		dialer:   net.Dialer{Timeout: u.Timeouts.Connect, KeepAlive: 30 * time.Second},
		idle:     make(chan *conn, u.MaxConnections),
		slots:    make(chan struct{}, u.MaxConnections),
	}
	c.host = hostHeader(u.URL)
	c.static = appendHeader(c.static, "Host", c.host)
	c.provider, c.auth = u.Provider, o.auth
	switch {
	case u.APIKey == "":
	case o.keyHeader != "":
		c.static = appendHeader(c.static, o.keyHeader, u.APIKey)
	default:
		c.static = appendHeader(c.static, "Authorization", "Bearer "+u.APIKey)
	}
	for k, v := range u.Headers {
		c.static = appendHeader(c.static, k, v)
	}
	return c
}

func hostHeader(u *url.URL) string {
	if p := u.Port(); (u.Scheme == "http" && p == "80") || (u.Scheme == "https" && p == "443") {
		return u.Hostname()
	}
	return u.Host
}

func appendHeader(dst []byte, k, v string) []byte {
	dst = append(dst, k...)
	dst = append(dst, ": "...)
	dst = append(dst, v...)
	return append(dst, "\r\n"...)
}

// Name is the upstream's name from the policy.
func (c *Client) Name() string { return c.name }

// Provider is the API the upstream speaks (config.ProviderOpenAI, ...).
func (c *Client) Provider() string { return c.provider }

// Request is what Do sends. Path is appended to the upstream's base path
// ("/chat/completions"). Header holds extra header lines, each ending in
// CRLF, already validated by the caller. Body is sent with Content-Length.
type Request struct {
	Method string
	Path   string
	Header []byte
	Body   []byte
}

// Do sends req and returns once the response headers have arrived. The
// caller must call Exchange.Release exactly once. Canceling ctx closes the
// connection at once, whatever phase the exchange is in.
func (c *Client) Do(ctx context.Context, req *Request) (*Exchange, error) {
	ex := acquireExchange()
	ex.client = c
	ex.start = time.Now()
	if c.timeouts.Total > 0 {
		ex.deadline = ex.start.Add(c.timeouts.Total)
	}
	for attempt := 0; ; attempt++ {
		err := ex.attempt(ctx, req)
		if err == nil {
			return ex, nil
		}
		// A pooled connection the server closed while idle fails before a
		// single response byte; the server never saw the request, so a
		// fresh connection may carry it again (as net/http does).
		retry := attempt == 0 && ex.reusedConn && ex.noResponseByte(err) && ctx.Err() == nil
		ex.dropConn()
		if !retry {
			ex.Release()
			return nil, c.classify(ctx, err)
		}
	}
}

func (c *Client) classify(ctx context.Context, err error) error {
	var ne net.Error
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("%w: %s: %w", ErrCanceled, c.name, context.Cause(ctx))
	case errors.Is(err, ErrPoolFull), errors.Is(err, ErrCredentials):
		return err
	case errors.Is(err, ErrTimeout), errors.Is(err, context.DeadlineExceeded), errors.Is(err, fasthttp.ErrTimeout),
		errors.As(err, &ne) && ne.Timeout():
		return fmt.Errorf("%w: %s: %w", ErrTimeout, c.name, err)
	case errors.Is(err, ErrUnreachable):
		return err
	default:
		return fmt.Errorf("%w: %s: %w", ErrUnreachable, c.name, err)
	}
}

// getConn returns a pooled connection or dials a new one, waiting for a
// free slot while the pool is at its cap.
func (c *Client) getConn(ctx context.Context, deadline time.Time) (*conn, bool, error) {
	for {
		select {
		case cn := <-c.idle:
			if time.Since(cn.lastUsed) < maxIdleAge {
				return cn, true, nil
			}
			cn.close()
			continue
		default:
		}
		break
	}
	wait := c.timeouts.FirstByte
	if !deadline.IsZero() {
		if d := time.Until(deadline); d < wait {
			wait = d
		}
	}
	select {
	case c.slots <- struct{}{}:
	case cn := <-c.idle:
		return cn, true, nil
	default:
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case c.slots <- struct{}{}:
		case cn := <-c.idle:
			return cn, true, nil
		case <-t.C:
			return nil, false, fmt.Errorf("%w: all %d connections to %s busy for %s", ErrPoolFull, cap(c.slots), c.name, wait)
		case <-ctx.Done():
			return nil, false, ctx.Err()
		}
	}
	cn, err := c.dial(ctx)
	if err != nil {
		<-c.slots
		return nil, false, err
	}
	return cn, false, nil
}

func (c *Client) dial(ctx context.Context) (*conn, error) {
	nc, err := c.dialer.DialContext(ctx, "tcp", c.addr)
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return nil, fmt.Errorf("%w: connecting to %s (%s): %w", ErrTimeout, c.name, c.addr, err)
		}
		return nil, fmt.Errorf("%w: connecting to %s (%s): %w", ErrUnreachable, c.name, c.addr, err)
	}
	// Small reads and writes skip the scheduler's syscall bookkeeping
	// (package sockio); under TLS, the socket's.
	nc = sockio.New(nc)
	if c.tls != nil {
		tc := tls.Client(nc, c.tls)
		hctx, cancel := context.WithTimeout(ctx, c.timeouts.Connect)
		err = tc.HandshakeContext(hctx)
		cancel()
		if err != nil {
			nc.Close()
			return nil, fmt.Errorf("%w: TLS handshake with %s: %w", ErrUnreachable, c.name, err)
		}
		nc = tc
	}
	cn := &conn{nc: nc}
	cn.br = bufio.NewReaderSize(cn, 8<<10)
	return cn, nil
}

func (c *Client) putConn(cn *conn) {
	if c.closed.Load() {
		c.closeConn(cn)
		return
	}
	cn.lastUsed = time.Now()
	select {
	case c.idle <- cn:
	default:
		c.closeConn(cn)
	}
}

func (c *Client) closeConn(cn *conn) {
	cn.close()
	<-c.slots
}

// Close closes idle connections; connections in use close when released.
func (c *Client) Close() {
	c.closed.Store(true)
	for {
		select {
		case cn := <-c.idle:
			c.closeConn(cn)
		default:
			return
		}
	}
}

// conn is one upstream connection. Reads go through conn.Read, which
// keeps the read deadline of the current phase armed before each read of
// the socket.
type conn struct {
	nc       net.Conn
	br       *bufio.Reader
	step     time.Duration // per-read deadline: first byte, then idle
	cap      time.Time     // absolute deadline (total), zero for none
	rdl, wdl time.Time     // the read and write deadlines set on nc
	lastUsed time.Time
	canceled atomic.Bool
}

func (cn *conn) Read(p []byte) (int, error) {
	if err := cn.arm(&cn.rdl, cn.step, cn.nc.SetReadDeadline); err != nil {
		return 0, err
	}
	return cn.nc.Read(p)
}

// arm makes the deadline *set (read or write) fall between now+step and
// now+step+step/8, or at cn.cap if that is earlier. A deadline still in
// that window is left alone: moving a deadline is a timer update in the
// runtime, and an update that makes it the process's earliest timer wakes
// an idle thread (at low load, once a request); kept, it is refreshed once
// per step/8 of use. A timeout therefore fires after its configured time,
// at most an eighth later.
func (cn *conn) arm(set *time.Time, step time.Duration, setDeadline func(time.Time) error) error {
	if step <= 0 {
		// No per-read bound (an MCP server's streams, which may stay
		// silent for as long as both ends keep them): the total's alone.
		if set.Equal(cn.cap) {
			return nil
		}
		if err := setDeadline(cn.cap); err != nil {
			*set = time.Time{}
			return err
		}
		*set = cn.cap
		return nil
	}
	lo := time.Now().Add(step)
	hi := lo.Add(step / 8)
	if !cn.cap.IsZero() {
		if cn.cap.Before(lo) {
			lo = cn.cap
		}
		if cn.cap.Before(hi) {
			hi = cn.cap
		}
	}
	if !set.Before(lo) && !set.After(hi) {
		return nil
	}
	if err := setDeadline(hi); err != nil {
		*set = time.Time{}
		return err
	}
	*set = hi
	return nil
}

func (cn *conn) close() { cn.nc.Close() }

// cancel runs on the context watch's goroutine: it only touches the conn,
// which is never pooled again once canceled.
func (cn *conn) cancel() {
	cn.canceled.Store(true)
	cn.nc.Close()
}

var (
	exchangePool = sync.Pool{New: func() any { return new(Exchange) }}
	// writers are borrowed for the few microseconds of writing a request,
	// so an idle or streaming connection holds no write buffer.
	writers = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 8<<10) }}
)

func acquireExchange() *Exchange { return exchangePool.Get().(*Exchange) }

func isConnReset(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}
