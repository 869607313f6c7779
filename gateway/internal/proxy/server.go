package proxy

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"

	"github.com/tollgate/tollgate/gateway/internal/accounting"
	"github.com/tollgate/tollgate/gateway/internal/anthropic"
	"github.com/tollgate/tollgate/gateway/internal/callout"
	"github.com/tollgate/tollgate/gateway/internal/cancels"
	"github.com/tollgate/tollgate/gateway/internal/config"
	"github.com/tollgate/tollgate/gateway/internal/fleet"
	"github.com/tollgate/tollgate/gateway/internal/hostsvc"
	"github.com/tollgate/tollgate/gateway/internal/mcp"
	"github.com/tollgate/tollgate/gateway/internal/obs"
	"github.com/tollgate/tollgate/gateway/internal/openai"
	"github.com/tollgate/tollgate/gateway/internal/proxy/observe"
	"github.com/tollgate/tollgate/sdk/wasmhost"
)

// ErrCancelled is the cancel cause of a request cancelled through
// POST /v1/requests/{id}/cancel (here or on another replica).
var ErrCancelled = cancels.ErrCancelled

// CancelStats counts the cancel poller's work.
type CancelStats = cancels.Stats

// CancelStats returns the cancel poller's counters.
func (s *Server) CancelStats() CancelStats { return s.cancels.Stats() }

// AccountingStats are counters of the ledger and the reconcile job.
type AccountingStats = accounting.Stats

// AccountingStats returns the ledger's and the reconcile job's counters.
func (s *Server) AccountingStats() AccountingStats { return s.acct.Stats() }

// ErrShuttingDown is the cancel cause of streams still open when the drain
// time after SIGTERM runs out.
var ErrShuttingDown = cancels.ErrShuttingDown

// Server serves one policy. Create it with New, run it with Serve, stop it
// with Shutdown.
type Server struct {
	log      *slog.Logger
	host     *wasmhost.Host
	pgTracer pgx.QueryTracer
	// ledgerTracer traces the ledger's pool.
	ledgerTracer pgx.QueryTracer
	acct         *accounting.Accounting
	// svcCounts are the host services' decisions, for metrics; they
	// outlive reloads.
	svcCounts hostsvc.Counts
	// callouts count the plugins' HTTP call-outs; they outlive reloads.
	callouts *callout.Metrics
	cancels  *cancels.Registry
	fin      *finisher
	obs      *observe.Metrics
	tracing  *obs.Tracing // nil: tracing off
	state    atomic.Pointer[state]
	srv      *fasthttp.Server
	ids      *requestIDs

	// publicMetrics serves /metrics on the public listener behind its
	// token (metrics.public); nil: that path is unknown there.
	publicMetrics fasthttp.RequestHandler

	// base is the parent of every request's context; canceling it ends
	// every exchange still open.
	base      context.Context
	cancelAll context.CancelCauseFunc

	reloads atomic.Int64
	// lastReloadFailure is the last reload's error while the last reload
	// failed (nil after a successful one).
	lastReloadFailure atomic.Pointer[reloadFailure]
	ready             atomic.Bool
	draining          atomic.Bool
	inflight          atomic.Int64
	// panics counts the requests whose handling panicked: in the handler,
	// in a stream's sending (observe.Sources.Panics).
	panics [2]atomic.Int64
	// conns counts open client connections (fasthttp's own count is off
	// by one once a shutdown has returned).
	conns atomic.Int64
	// sse are the MCP HTTP+SSE streams this gateway relays (mcp_sse.go).
	sse sseStreams
	// mcpKey signs the HTTP+SSE message URLs when the policy has no
	// mcp.endpoint_key: random, this process's for its whole life, so a
	// reload does not void the URLs of open sessions.
	mcpKey *mcp.EndpointKey
}

// Option tunes a Server.
type Option func(*Server)

// WithPGTracer traces every statement of the Postgres tenant store (the
// query-budget test counts them).
func WithPGTracer(t pgx.QueryTracer) Option { return func(s *Server) { s.pgTracer = t } }

// WithLedgerPGTracer traces every statement of the ledger's Postgres pool
// (call log writes, budget seeding, reconcile).
func WithLedgerPGTracer(t pgx.QueryTracer) Option { return func(s *Server) { s.ledgerTracer = t } }

// New builds a Server for p, compiling and configuring its plugins. log nil
// means slog.Default().
func New(p *config.Policy, log *slog.Logger, opts ...Option) (*Server, error) {
	if log == nil {
		log = slog.Default()
	}
	s := &Server{log: log, ids: newRequestIDs(), mcpKey: mcp.NewEndpointKey("")}
	for _, o := range opts {
		o(s)
	}
	for _, w := range p.BudgetLeaseWarnings() {
		log.Warn("budget lease too short", "detail", w)
	}
	host, err := wasmhost.NewHost(p.PluginRuntime.CacheDir, log)
	if err != nil {
		return nil, err
	}
	s.host = host
	s.obs = observe.NewMetrics(s.pgTracer, s.ledgerTracer, p.Metrics.TenantLabels) // before the pools: it wraps their tracers
	s.pgTracer, s.ledgerTracer = s.obs.PGTracers()
	s.callouts = callout.NewMetrics()
	s.obs.Register(s.callouts.Collectors()...)
	if p.Metrics.Public { // validation required a token
		s.publicMetrics = fasthttpadaptor.NewFastHTTPHandler(obs.RequireBearer(p.Metrics.Token, s.obs.Handler()))
	}
	if s.acct, err = accounting.New(p, log, s.ledgerTracer); err != nil {
		host.Close()
		return nil, err
	}
	replica := fleet.NewID()
	if s.acct.Fleet != nil {
		replica = s.acct.Fleet.ID() // the same name in the fleet and in listings
	}
	s.cancels = cancels.New(log.With("component", "cancel"), s.acct.Redis, p.Server.CancelPollInterval, replica)
	s.fin = new(finisher)
	s.obs.SetSources(observe.Sources{
		Inflight: &s.inflight, Reloads: &s.reloads, Panics: &s.panics, Accounting: s.acct, Cancels: s.cancels,
		Services: &s.svcCounts, Upstreams: s.readUpstreams,
	})
	if s.tracing, err = obs.NewTracing(context.Background(), p.Tracing, log); err != nil {
		s.cancels.Close()
		s.acct.Close(context.Background())
		host.Close()
		return nil, err
	}
	st, err := s.newState(p)
	if err != nil {
		s.cancels.Close()
		s.acct.Close(context.Background())
		s.tracing.Shutdown(context.Background())
		host.Close()
		return nil, err
	}
	s.state.Store(st)
	s.base, s.cancelAll = context.WithCancelCause(context.Background())
	s.srv = &fasthttp.Server{
		Handler:              s.handle,
		ErrorHandler:         s.handleServerError,
		Name:                 "tollgate",
		MaxRequestBodySize:   int(p.Server.MaxBodyBytes),
		ReadTimeout:          p.Server.ReadTimeout,
		IdleTimeout:          p.Server.IdleTimeout,
		Concurrency:          p.Server.MaxConnections,
		NoDefaultDate:        false,
		NoDefaultContentType: true,
		DisableKeepalive:     false,
		ReadBufferSize:       8 << 10, // also the cap on request headers
		// A reply's headers and a body or stream batch of up to ~8 KB in
		// one write (fasthttp's default, 4 KB, split a 5 KB batch in two).
		WriteBufferSize: 8 << 10,
		// Idle keep-alive connections hold no buffers, and every reply is
		// flushed before the connection turns idle, which is when its end
		// work runs (finish.go): keep it true.
		ReduceMemoryUsage:     true,
		CloseOnShutdown:       true,
		NoDefaultServerHeader: false,
		Logger:                fasthttpLogger{log},
		ConnState:             s.connState,
	}
	return s, nil
}

// Serve accepts connections on ln until Shutdown. It reports ready once
// called.
func (s *Server) Serve(ln net.Listener) error {
	s.ready.Store(true)
	return s.srv.Serve(connListener{Listener: ln})
}

// ServeTLS is Serve over TLS: ln is a plain TCP listener and cfg the
// server side of TLS (tlsconf.Server.Config).
func (s *Server) ServeTLS(ln net.Listener, cfg *tls.Config) error {
	s.ready.Store(true)
	return s.srv.Serve(connListener{Listener: ln, tls: cfg})
}

// InFlight is the number of requests being forwarded.
func (s *Server) InFlight() int64 { return s.inflight.Load() }

// Shutdown drains the server: readiness fails at once, the listener closes
// after delay (time for load balancers to notice), open requests and
// streams may finish until drain runs out, then those still open are ended
// with a final error event and their upstreams canceled.
func (s *Server) Shutdown(delay, drain time.Duration) error {
	s.ready.Store(false)
	s.draining.Store(true)
	if delay > 0 {
		time.Sleep(delay)
	}
	ctx, cancel := context.WithTimeout(context.Background(), drain)
	err := s.srv.ShutdownWithContext(ctx)
	cancel()
	if err == nil {
		s.fin.close(drain + 10*time.Second) // end work parked on closing connections
		s.retire()
		return s.closeAccounting(drain)
	}
	s.log.Warn("drain time ran out; ending open streams", "open_connections", s.conns.Load(), "in_flight", s.inflight.Load(), "drain", drain.String())
	s.cancelAll(ErrShuttingDown)
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if s.conns.Load() == 0 {
			break
		}
	}
	s.fin.close(drain + 10*time.Second)
	s.retire()
	aerr := s.closeAccounting(drain)
	if n := s.conns.Load(); n > 0 {
		return fmt.Errorf("shutdown: %d connections still open", n)
	}
	return aerr
}

// closeAccounting drains the ledger once the last request has ended.
func (s *Server) closeAccounting(drain time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), drain+30*time.Second)
	defer cancel()
	s.fin.close(drain + 10*time.Second)
	s.cancels.Close()
	err := s.acct.Close(ctx)
	// The last requests' spans are queued by now: export them, waiting
	// at most a few seconds for a collector that does not answer.
	tctx, tcancel := context.WithTimeout(context.Background(), 5*time.Second)
	if terr := s.tracing.Shutdown(tctx); terr != nil {
		s.log.Warn("tracing: spans not exported at shutdown", "err", terr)
	}
	tcancel()
	if err != nil {
		return fmt.Errorf("shutdown: call log: %w", err)
	}
	return nil
}

func (s *Server) connState(c net.Conn, cs fasthttp.ConnState) {
	cc, _ := c.(*clientConn) // every connection Serve accepts
	switch cs {
	case fasthttp.StateNew:
		s.conns.Add(1)
	case fasthttp.StateIdle:
		s.fin.finishEnded(cc) // the reply is flushed: its end work runs now
		// While draining, a connection is closed as soon as its response
		// is out rather than kept alive for a request it could not serve.
		if s.draining.Load() {
			c.Close()
		}
	case fasthttp.StateClosed, fasthttp.StateHijacked:
		s.fin.finishEnded(cc)
		cc.forget()
		s.conns.Add(-1)
	}
}

// retire drops the current state; it closes once its last request ends.
func (s *Server) retire() {
	if st := s.state.Swap(nil); st != nil {
		st.release()
	}
	s.host.Close()
}

// handle is the server's handler. A panic while it serves a request — a
// bug, never the client's or the upstream's doing — fails that request
// alone: fasthttp, unlike net/http, recovers none, and the process would
// end with every request it was serving.
func (s *Server) handle(ctx *fasthttp.RequestCtx) {
	defer s.survive(ctx)
	s.serve(ctx)
}

// survive recovers a panic of the handler: the request is answered 500
// internal_error, its connection closed, and the panic logged with its
// stack and counted (tollgate_panics_total{where="handler"}). A forwarded
// request lets go of its place in flight and its upstream connection on
// the way (exchange.abandon); its end work is left as a crash of the
// gateway would leave it, for that request alone: the call-log row and the
// settle it had not reached are not done, and its budget hold lapses at
// its lease.
func (s *Server) survive(ctx *fasthttp.RequestCtx) {
	p := recover()
	if p == nil {
		return
	}
	s.panics[0].Add(1)
	s.log.Error("request handling panicked; answered 500 internal_error",
		"method", string(ctx.Method()), "path", string(ctx.Path()), "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
	ctx.Response.Reset() // a body stream set before the panic is closed
	writeError(ctx, &openai.Error{Status: fasthttp.StatusInternalServerError, Type: "server_error", Code: "internal_error",
		Message: "The gateway failed while handling this request, which was not completed. If it recurs, report it with the time of the request."})
	if string(ctx.Path()) == "/v1/messages" {
		nativeErrors(ctx)
	}
	ctx.SetConnectionClose()
}

// serve routes a request by its path.
func (s *Server) serve(ctx *fasthttp.RequestCtx) {
	if msg := looseFraming(ctx.Request.Header.RawHeaders()); msg != "" {
		// RFC 9112 lets a server unfold folded lines (§5.2) and take a
		// bare LF for CRLF (§2.2), or refuse them. A proxy in front that
		// read such a line differently would frame the message, and the
		// one after it, differently: they are refused, and the connection
		// closed.
		writeError(ctx, openai.BadRequest("", "%s", msg))
		if string(ctx.Path()) == "/v1/messages" {
			nativeErrors(ctx)
		}
		ctx.SetConnectionClose()
		return
	}
	switch string(ctx.Path()) {
	case "/v1/chat/completions":
		s.forward(ctx, openai.ChatCompletions, "/chat/completions")
	case "/v1/completions":
		s.forward(ctx, openai.Completions, "/completions")
	case "/v1/embeddings":
		s.forward(ctx, openai.Embeddings, "/embeddings")
	case "/v1/messages":
		s.forward(ctx, endpointMessages, anthropic.MessagesPath)
		nativeErrors(ctx)
	case "/v1/responses":
		s.forward(ctx, endpointResponses, "/responses")
	case "/v1/models":
		if !ctx.IsGet() && !ctx.IsHead() {
			writeError(ctx, methodNotAllowed(ctx, "GET"))
			return
		}
		ctx.SetContentType("application/json")
		st := s.acquireState()
		ctx.SetBody(st.routes.models)
		st.release()
	case "/healthz":
		ctx.SetContentType("text/plain; charset=utf-8")
		ctx.SetBodyString("ok\n")
	case "/readyz":
		ctx.SetContentType("text/plain; charset=utf-8")
		if !s.ready.Load() {
			ctx.SetStatusCode(fasthttp.StatusServiceUnavailable)
			ctx.SetBodyString("draining\n")
			return
		}
		ctx.SetBodyString("ready\n")
	case "/metrics":
		if s.publicMetrics == nil {
			writeError(ctx, unknownURL(ctx))
			return
		}
		s.publicMetrics(ctx)
	default:
		if id, ok := cancelPath(ctx.Path()); ok {
			s.cancelRequest(ctx, id)
			return
		}
		if id, sub, ok := storedResponsePath(ctx.Path()); ok {
			s.storedResponse(ctx, id, sub)
			return
		}
		if name, leg, ok := mcpPath(ctx.Path()); ok {
			s.mcpServe(ctx, name, leg)
			return
		}
		if pe, id, allow, ok := passEndpointFor(ctx.Method(), ctx.Path()); ok {
			if pe == nil {
				writeError(ctx, methodNotAllowed(ctx, allow))
				return
			}
			s.passthru(ctx, pe, id)
			return
		}
		writeError(ctx, unknownURL(ctx))
	}
}

func unknownURL(ctx *fasthttp.RequestCtx) *openai.Error {
	return &openai.Error{Status: fasthttp.StatusNotFound, Type: "invalid_request_error", Code: "unknown_url",
		Message: fmt.Sprintf("Unknown request URL: %s %s.", ctx.Method(), ctx.Path())}
}

// looseFraming checks the raw header block for line ends RFC 9112 lets a
// server accept but not every proxy reads the same way: a bare LF, and a
// line starting with a space or tab that continues the previous header
// (obs-fold). It returns the client's error message, or "". One pass over
// the line ends, about 0.1 µs for a typical client's headers.
func looseFraming(raw []byte) string {
	for i := 0; i < len(raw); {
		j := bytes.IndexByte(raw[i:], '\n')
		if j < 0 {
			break
		}
		i += j
		if i == 0 || raw[i-1] != '\r' {
			return "Header lines must end with CRLF; a bare LF is not accepted."
		}
		i++
		if i < len(raw) && (raw[i] == ' ' || raw[i] == '\t') {
			return "Header line folding (obs-fold) is not accepted; send each header on one line."
		}
	}
	return ""
}

// handleServerError answers requests fasthttp could not read.
func (s *Server) handleServerError(ctx *fasthttp.RequestCtx, err error) {
	var e *openai.Error
	var small *fasthttp.ErrSmallBuffer
	switch {
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		e = openai.TooLarge(s.srv.MaxRequestBodySize)
		drainUpload(ctx.Conn(), ctx.Request.Header.ContentLength())
	case errors.As(err, &small):
		// The request line and headers must fit the read buffer.
		e = &openai.Error{Status: fasthttp.StatusRequestHeaderFieldsTooLarge, Type: "invalid_request_error", Code: "request_headers_too_large",
			Message: fmt.Sprintf("The request line and headers are too large: the limit is %d bytes.", s.srv.ReadBufferSize)}
	default:
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			e = &openai.Error{Status: fasthttp.StatusRequestTimeout, Type: "invalid_request_error", Code: "request_timeout",
				Message: "The request was not received in time."}
		} else {
			e = openai.BadRequest("", "The request could not be read: %v", err)
		}
	}
	writeError(ctx, e)
	if string(ctx.Path()) == "/v1/messages" {
		nativeErrors(ctx)
	}
	ctx.SetConnectionClose()
}

// maxDrainBytes bounds how much of a rejected upload is read and discarded.
const maxDrainBytes = 64 << 20

// drainUpload reads and discards the rest of a rejected request body before
// the error is sent and the connection closed. Closing a socket with unread
// data makes the kernel send a reset, and a client still uploading then sees
// "connection reset" instead of the 413. Uploads larger than maxDrainBytes,
// or that pause for more than 100 ms, are cut.
func drainUpload(c net.Conn, contentLength int) {
	if contentLength <= 0 || contentLength > maxDrainBytes {
		return
	}
	buf := make([]byte, 32<<10)
	for left := contentLength; left > 0; {
		c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		n, err := c.Read(buf)
		left -= n
		if err != nil {
			break
		}
	}
	c.SetReadDeadline(time.Time{})
}

func methodNotAllowed(ctx *fasthttp.RequestCtx, allow string) *openai.Error {
	ctx.Response.Header.Set("Allow", allow)
	return &openai.Error{Status: fasthttp.StatusMethodNotAllowed, Type: "invalid_request_error", Code: "method_not_allowed",
		Message: fmt.Sprintf("Method %s is not allowed on %s; use %s.", ctx.Method(), ctx.Path(), allow)}
}

func writeError(ctx *fasthttp.RequestCtx, e *openai.Error) {
	ctx.Response.SetStatusCode(e.Status)
	ctx.Response.Header.SetContentType("application/json")
	ctx.Response.SetBody(e.AppendJSON(nil))
}

type fasthttpLogger struct{ log *slog.Logger }

func (l fasthttpLogger) Printf(format string, args ...any) {
	l.log.Debug(fmt.Sprintf(format, args...), "component", "fasthttp")
}

// MetricsHandler serves Prometheus metrics (observe.Metrics.Handler).
func (s *Server) MetricsHandler() http.Handler { return s.obs.Handler() }
