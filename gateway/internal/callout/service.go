package callout

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/callout/allow"
	"github.com/tollgate/tollgate/sdk/wasmhost"
)

// Negative statuses of a Result (sdk/ABI.md, "Dispatched calls").
const (
	StatusUnavailable = -4
	StatusTimeout     = -5
	StatusTooLarge    = -6
	StatusBusy        = -7
)

// ErrNotAllowed is Check's answer for a plugin without a grant, or a URL
// its grant does not allow.
var ErrNotAllowed = errors.New("call-out not allowed")

// Result is a call's answer: the HTTP status and the body and headers
// (Status ≥ 100), or a negative status and nothing.
type Result struct {
	Status int
	Body   []byte
	Header []wasmhost.Header
	Cached bool
}

// Config builds a Service.
type Config struct {
	// Grants are the plugins' grants by plugin name; a plugin without
	// one cannot call out.
	Grants map[string]*Grant
	// Metrics count the calls; nil: counted nowhere.
	Metrics *Metrics
	Log     *slog.Logger
	// CacheBytes caps the answers cached (default 32MiB).
	CacheBytes int64
}

// Service is the `http` service of one policy state. Its methods are safe
// for concurrent use.
type Service struct {
	plugins   map[string]*plugin
	client    http.Client
	transport *http.Transport
	cache     *cache
	metrics   *Metrics // nil: not counted
	log       *slog.Logger
}

type plugin struct {
	name     string
	grant    *Grant
	inFlight atomic.Int64
	metrics  *pluginMetrics
}

// New builds the service. Close it when its policy state ends.
func New(cfg Config) (*Service, error) {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	var c *cache // none without a grant: every call is refused
	if len(cfg.Grants) > 0 {
		var err error
		if c, err = newCache(cfg.CacheBytes); err != nil {
			return nil, err
		}
	}
	s := &Service{plugins: make(map[string]*plugin, len(cfg.Grants)), cache: c, metrics: cfg.Metrics, log: cfg.Log}
	for name, g := range cfg.Grants {
		s.plugins[name] = &plugin{name: name, grant: g, metrics: cfg.Metrics.forPlugin(name)}
	}
	s.transport = newTransport()
	s.client = http.Client{Transport: s.transport, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse // a redirect is the answer, never followed
	}}
	return s, nil
}

// newTransport is the pooled transport: keep-alive connections to the few
// services plugins call, bounded so a slow service cannot take the
// process's file descriptors (max_in_flight bounds the calls anyway).
func newTransport() *http.Transport {
	return &http.Transport{
		Proxy:                  http.ProxyFromEnvironment,
		DialContext:            (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           256,
		MaxIdleConnsPerHost:    64,
		MaxConnsPerHost:        512,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    5 * time.Second,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: 64 << 10,
	}
}

// Close closes the idle connections and the cache.
func (s *Service) Close() {
	s.transport.CloseIdleConnections()
	s.cache.close()
}

// Check decides, without I/O, whether plugin may make the call req: nil,
// ErrBadRequest (wrapped) or ErrNotAllowed (wrapped, and logged as a
// warning naming the plugin and the URL without its query).
func (s *Service) Check(plugin string, req []byte) error {
	_, _, err := s.check(plugin, req)
	return err
}

func (s *Service) check(name string, raw []byte) (*plugin, Request, error) {
	r, err := ParseRequest(raw)
	if err != nil {
		return nil, r, err
	}
	p := s.plugins[name]
	u, err := allow.Target(string(r.URL))
	switch {
	case err != nil:
		err = fmt.Errorf("%w: %w", ErrNotAllowed, err)
	case p == nil:
		err = fmt.Errorf("%w: plugin %q has no callout grant in the policy", ErrNotAllowed, name)
	case !allow.Any(p.grant.allow, u):
		err = fmt.Errorf("%w: %s is not under plugin %q's callout.allow", ErrNotAllowed, allow.Redact(string(r.URL)), name)
	}
	if err != nil {
		switch {
		case p != nil:
			p.metrics.calls[OutcomeDenied].Inc()
		case s.metrics != nil: // a plugin without a grant: its label made once, here
			s.metrics.calls.WithLabelValues(name, OutcomeDenied.String()).Inc()
		}
		s.log.Warn("call-out refused", "plugin", name, "service", "http", "url", allow.Redact(string(r.URL)), "err", err)
		return nil, r, err
	}
	return p, r, nil
}

// Do makes the call req for plugin: from the cache, or over the network
// within the grant's timeout (and ctx). It never fails: a failure is a
// negative status.
func (s *Service) Do(ctx context.Context, name string, raw []byte) Result {
	p, r, err := s.check(name, raw)
	if err != nil {
		return Result{Status: StatusUnavailable}
	}
	if r.CacheKey != nil {
		if res, ok := s.cache.get(name, r.CacheKey); ok {
			p.metrics.calls[OutcomeCached].Inc()
			return res
		}
	}
	if p.inFlight.Add(1) > p.grant.maxInFlight {
		p.inFlight.Add(-1)
		p.metrics.calls[OutcomeBusy].Inc()
		return Result{Status: StatusBusy}
	}
	p.metrics.inFlight.Inc()
	start := time.Now()
	res, out := s.roundTrip(ctx, p, &r)
	p.metrics.seconds.Observe(time.Since(start).Seconds())
	p.metrics.inFlight.Dec()
	p.inFlight.Add(-1)
	p.metrics.calls[out].Inc()
	if out == OutcomeOK && r.CacheKey != nil {
		s.cache.set(name, r.CacheKey, res, r.CacheTTL)
	}
	return res
}

// roundTrip sends r and reads the answer within the grant's timeout. (The
// plugin host makes each dispatched call a span of the request's trace,
// with its status: wasmhost.DispatchTracer.)
func (s *Service) roundTrip(ctx context.Context, p *plugin, r *Request) (Result, Outcome) {
	ctx, cancel := context.WithTimeout(ctx, p.grant.timeout)
	defer cancel()
	res, out, _ := s.send(ctx, p, r)
	return res, out
}

func (s *Service) send(ctx context.Context, p *plugin, r *Request) (Result, Outcome, error) {
	req, err := http.NewRequestWithContext(ctx, string(r.Method), string(r.URL), bodyReader(r.Body))
	if err != nil {
		return Result{Status: StatusUnavailable}, OutcomeUnavailable, err
	}
	for _, h := range r.Header {
		req.Header.Add(string(h[0]), string(h[1]))
	}
	for name, v := range p.grant.header {
		req.Header[name] = v // the grant's over the plugin's
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return failed(ctx, err)
	}
	defer resp.Body.Close()
	max := p.grant.maxResponseBytes
	if resp.ContentLength > max {
		return Result{Status: StatusTooLarge}, OutcomeTooLarge, errTooLarge
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, max+1))
	if err != nil {
		return failed(ctx, err)
	}
	if int64(len(body)) > max {
		return Result{Status: StatusTooLarge}, OutcomeTooLarge, errTooLarge
	}
	res := Result{Status: resp.StatusCode, Body: body, Header: flatten(resp.Header)}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return res, OutcomeErrorStatus, nil
	}
	return res, OutcomeOK, nil
}

var errTooLarge = errors.New("response body above max_response_bytes")

// failed classifies a transport error: the call's own deadline is a
// timeout; anything else (refused, reset, DNS, TLS, the host abandoning
// the call) is unavailable.
func failed(ctx context.Context, err error) (Result, Outcome, error) {
	var ue *url.Error
	if errors.Is(ctx.Err(), context.DeadlineExceeded) || (errors.As(err, &ue) && ue.Timeout() && ctx.Err() == nil) {
		return Result{Status: StatusTimeout}, OutcomeTimeout, err
	}
	return Result{Status: StatusUnavailable}, OutcomeUnavailable, err
}

func bodyReader(b []byte) io.Reader {
	if len(b) == 0 {
		return nil
	}
	return bytes.NewReader(b)
}

// flatten lists h's values as the host hands them to call_response_header.
func flatten(h http.Header) []wasmhost.Header {
	n := 0
	for _, vs := range h {
		n += len(vs)
	}
	out := make([]wasmhost.Header, 0, n)
	for name, vs := range h {
		for _, v := range vs {
			out = append(out, wasmhost.Header{Name: []byte(name), Value: []byte(v)})
		}
	}
	return out
}
