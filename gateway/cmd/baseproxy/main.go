// Command baseproxy is a plain fasthttp reverse proxy with no pipeline: it
// forwards every request to one upstream over a keep-alive pool
// (fasthttp.HostClient) and streams the response body back as it arrives,
// so server-sent events pass through one by one. It parses no JSON, runs no
// plugin, keeps no metrics and writes no log per request.
//
// It is the benchmark's floor for a Go proxy: scripts/bench.sh measures it
// beside the gateway, against the same mock model, so the cost of the
// gateway's pipeline shows as the ratio of the two proxies' added latency.
//
//	baseproxy -listen 127.0.0.1:8090 -upstream http://127.0.0.1:9090
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"
)

func main() {
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(os.Args[1:], logger); err != nil {
		logger.Error("baseproxy failed", "err", err.Error())
		os.Exit(1)
	}
}

func run(args []string, logger *slog.Logger) error {
	fs := flag.NewFlagSet("baseproxy", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:8090", "address to listen on")
	upstream := fs.String("upstream", "http://127.0.0.1:9090", "upstream base URL (scheme and host; the request path is kept)")
	maxConns := fs.Int("max-conns", 512, "keep-alive connections to the upstream at most")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	p, err := newProxy(*upstream, *maxConns)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	srv := p.server()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	logger.Info("baseproxy listening", "addr", ln.Addr().String(), "upstream", *upstream, "max_conns", *maxConns)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return srv.ShutdownWithContext(shutdownCtx)
}

// proxy forwards to one upstream.
type proxy struct {
	client *fasthttp.HostClient
	host   string // the upstream's Host header
}

func newProxy(upstream string, maxConns int) (*proxy, error) {
	u, err := url.Parse(upstream)
	if err != nil {
		return nil, fmt.Errorf("-upstream: %w", err)
	}
	if u.Scheme != "http" || u.Host == "" {
		return nil, fmt.Errorf("-upstream must be an http://host:port URL, got %q", upstream)
	}
	if maxConns < 1 {
		return nil, errors.New("-max-conns must be at least 1")
	}
	return &proxy{
		host: u.Host,
		client: &fasthttp.HostClient{
			Addr:     fasthttp.AddMissingPort(u.Host, false),
			MaxConns: maxConns,
			// A request is sent once: a POST is not retried on another
			// connection.
			MaxIdemponentCallAttempts: 1,
			ReadTimeout:               5 * time.Minute,
			WriteTimeout:              30 * time.Second,
			MaxIdleConnDuration:       50 * time.Second,
			// The body is handed to the server's writer as it arrives.
			StreamResponseBody:            true,
			DisableHeaderNamesNormalizing: true,
			NoDefaultUserAgentHeader:      true,
		},
	}, nil
}

// server returns the listening side, set up like the gateway's (the same
// read buffer and memory settings), so the two differ only in what they do
// with a request.
func (p *proxy) server() *fasthttp.Server {
	return &fasthttp.Server{
		Handler:               p.handle,
		Name:                  "baseproxy",
		ReadBufferSize:        8 << 10,
		ReduceMemoryUsage:     true,
		NoDefaultContentType:  true,
		CloseOnShutdown:       true,
		NoDefaultServerHeader: true,
		MaxRequestBodySize:    4 << 20,
	}
}

// hopHeaders are the connection-scoped headers a proxy does not forward
// (RFC 9110 section 7.6.1).
var hopHeaders = []string{"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate",
	"Proxy-Authorization", "TE", "Trailer", "Upgrade"}

func (p *proxy) handle(ctx *fasthttp.RequestCtx) {
	req := &ctx.Request
	for _, h := range hopHeaders {
		req.Header.Del(h)
	}
	req.SetHost(p.host)
	resp := fasthttp.AcquireResponse()
	if err := p.client.Do(req, resp); err != nil {
		fasthttp.ReleaseResponse(resp)
		ctx.Response.Header.SetContentType("application/json")
		ctx.SetStatusCode(fasthttp.StatusBadGateway)
		ctx.SetBodyString(`{"error":{"message":"upstream unreachable","type":"server_error","param":null,"code":"bad_gateway"}}`)
		return
	}
	resp.Header.CopyTo(&ctx.Response.Header)
	for _, h := range hopHeaders {
		ctx.Response.Header.Del(h)
	}
	if resp.BodyStream() == nil { // no body to stream (HEAD, 204, 304)
		ctx.Response.SetBody(resp.Body())
		fasthttp.ReleaseResponse(resp)
		return
	}
	// Content-Length as the upstream sent it, or -1 (chunked) for a body
	// of unknown length such as a stream.
	size := resp.Header.ContentLength()
	if size < 0 {
		size = -1
	}
	r := relayPool.Get().(*relay)
	r.resp = resp
	ctx.Response.SetBodyStream(r, size)
}

// relay hands the upstream's body stream to the server. The server writes
// each Read as it returns (a chunk per read, flushed, for chunked bodies)
// and calls Close when done, which releases the upstream connection.
type relay struct {
	resp *fasthttp.Response
}

var relayPool = sync.Pool{New: func() any { return new(relay) }}

func (r *relay) Read(b []byte) (int, error) { return r.resp.BodyStream().Read(b) }

func (r *relay) Close() error {
	err := r.resp.CloseBodyStream()
	fasthttp.ReleaseResponse(r.resp)
	r.resp = nil
	relayPool.Put(r)
	return err
}
