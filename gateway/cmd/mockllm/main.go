// Command mockllm runs the OpenAI-compatible mock model server used by the
// gateway's end-to-end tests, `make run` and benchmarks. It also serves
// Anthropic's Messages API on POST /v1/messages, and a Model Context
// Protocol server (Streamable HTTP, tools echo, sleep and fail) on /mcp.
//
// Every flag sets the matching mockllm.Config field; requests can still
// override most of them with X-Mock-* headers.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/sockio"
	"github.com/tollgate/tollgate/gateway/internal/testkit/mockllm"
)

// rawListener hands the server its connections through sockio, as the
// gateway's listener does: reads and writes without the runtime's syscall
// bookkeeping. The mock stands in for a model server on another machine;
// on a benchmark's shared cores, each wake-up of its runtime's monitor
// thread is CPU taken from the proxy under test (docs/BENCHMARKS.md, "A
// leaner mock").
type rawListener struct{ net.Listener }

func (l rawListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return rawConn{sockio.New(c), c}, nil
}

// rawConn keeps the TCP connection's CloseWrite, which net/http uses to
// let a client read an error reply before the connection closes.
type rawConn struct {
	net.Conn
	tcp net.Conn
}

func (c rawConn) CloseWrite() error {
	if cw, ok := c.tcp.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

func main() {
	logger := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	if err := run(os.Args[1:], logger); err != nil {
		logger.Error("mockllm failed", "error", err.Error())
		os.Exit(1)
	}
}

func run(args []string, logger *slog.Logger) error {
	fs := flag.NewFlagSet("mockllm", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:9090", "address to listen on")
	var cfg mockllm.Config
	fs.DurationVar(&cfg.TTFT, "ttft", 0, "delay before the first stream event or the non-streaming reply")
	fs.IntVar(&cfg.Tokens, "tokens", mockllm.DefaultTokens, "number of generated content tokens (ignored with -text)")
	fs.DurationVar(&cfg.InterToken, "inter-token", 0, "delay between content events")
	fs.BoolVar(&cfg.Usage, "usage", false, "always end streams with a usage chunk")
	fs.BoolVar(&cfg.TokensPerByte, "tokens-per-byte", false, "count usage as one token per byte of text (prompt: plus 4 per message), for prompts far above chars/4")
	fs.StringVar(&cfg.Text, "text", "", "reply with exactly this text instead of generated tokens")
	fs.IntVar(&cfg.ChunkSize, "chunk-size", mockllm.DefaultChunkSize, "bytes of -text per content event")
	fs.IntVar(&cfg.FailStatus, "fail-status", 0, "if non-zero, reply with this HTTP status and an OpenAI-style error")
	fs.DurationVar(&cfg.FailDelay, "fail-delay", 0, "delay before the first byte of every reply")
	fs.IntVar(&cfg.CutAfter, "cut-after", 0, "if > 0, cut streams after this many events")
	fs.IntVar(&cfg.GarbageAfter, "garbage-after", 0, "if > 0, write malformed SSE into streams after this many events, then go on")
	fs.StringVar(&cfg.APIKey, "api-key", "", "if set, require Authorization: Bearer <key> (x-api-key: <key> on /v1/messages, x-goog-api-key or a Vertex bearer token on generateContent)")
	models := fs.String("models", strings.Join(mockllm.DefaultModels, ","), "comma-separated models listed by GET /v1/models")
	fs.IntVar(&cfg.EmbeddingDims, "embedding-dims", mockllm.DefaultEmbeddingDims, "embedding vector length")
	kinds := fs.String("usage-kinds", "", "tokens of priced kinds every reply's usage adds, e.g. cached=100,reasoning=50 (names: cached, cache_write, audio_in, image_in, reasoning, audio_out, image_out)")
	awsKeys := fs.String("aws-keys", "", "comma-separated ACCESS_KEY_ID=SECRET_ACCESS_KEY pairs: if set, the Bedrock routes verify SigV4 signatures with these credentials")
	fs.DurationVar(&cfg.MCPSleep, "mcp-sleep", 0, "how long the MCP tool sleep sleeps when its call names no ms")
	fs.BoolVar(&cfg.MCPStream, "mcp-stream", false, "answer MCP tools/call as text/event-stream (-mcp-progress notifications, then the result; first after -ttft, the rest -inter-token apart) instead of JSON")
	fs.IntVar(&cfg.MCPProgress, "mcp-progress", 0, "progress notifications before an MCP tools/call result streamed with -mcp-stream")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	switch {
	case cfg.Tokens < 0:
		return errors.New("-tokens must be >= 0")
	case cfg.ChunkSize < 1:
		return errors.New("-chunk-size must be >= 1")
	case cfg.FailStatus != 0 && (cfg.FailStatus < 200 || cfg.FailStatus > 599):
		return errors.New("-fail-status must be 0 or between 200 and 599")
	case cfg.CutAfter < 0:
		return errors.New("-cut-after must be >= 0")
	case cfg.GarbageAfter < 0:
		return errors.New("-garbage-after must be >= 0")
	case cfg.EmbeddingDims < 1:
		return errors.New("-embedding-dims must be >= 1")
	case cfg.MCPProgress < 0:
		return errors.New("-mcp-progress must be >= 0")
	case cfg.TTFT < 0 || cfg.InterToken < 0 || cfg.FailDelay < 0 || cfg.MCPSleep < 0:
		return errors.New("durations must be >= 0")
	}
	for _, m := range strings.Split(*models, ",") {
		if m = strings.TrimSpace(m); m != "" {
			cfg.Models = append(cfg.Models, m)
		}
	}
	usageKinds, err := mockllm.ParseUsageKinds(*kinds)
	if err != nil {
		return fmt.Errorf("-usage-kinds: %w", err)
	}
	cfg.UsageKinds = usageKinds
	keys, err := parseAWSKeys(*awsKeys)
	if err != nil {
		return err
	}
	cfg.AWSSecretKeys = keys
	if cfg.Tokens == 0 {
		// Config treats 0 as "default" and a negative count as zero.
		cfg.Tokens = -1
	}

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           mockllm.New(cfg),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(rawListener{ln}) }()
	logger.Info("mockllm listening",
		"addr", ln.Addr().String(),
		"ttft", cfg.TTFT.String(),
		"tokens", max(cfg.Tokens, 0),
		"inter_token", cfg.InterToken.String(),
		"usage", cfg.Usage,
		"text_bytes", len(cfg.Text),
		"chunk_size", cfg.ChunkSize,
		"fail_status", cfg.FailStatus,
		"fail_delay", cfg.FailDelay.String(),
		"cut_after", cfg.CutAfter,
		"garbage_after", cfg.GarbageAfter,
		"api_key_set", cfg.APIKey != "",
		"models", cfg.Models,
		"embedding_dims", cfg.EmbeddingDims,
		"aws_keys", len(cfg.AWSSecretKeys),
		"mcp_sleep", cfg.MCPSleep.String(),
		"mcp_stream", cfg.MCPStream,
		"mcp_progress", cfg.MCPProgress,
	)
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		// Streams still running after the grace period are cut.
		_ = srv.Close()
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	logger.Info("mockllm stopped")
	return nil
}

// parseAWSKeys reads -aws-keys: ACCESS_KEY_ID=SECRET pairs separated by
// commas (an access key id never holds '=' or ','; a secret never holds
// ','). "" is nil: signatures are checked for shape only.
func parseAWSKeys(s string) (map[string]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	keys := map[string]string{}
	for _, pair := range strings.Split(s, ",") {
		id, secret, ok := strings.Cut(strings.TrimSpace(pair), "=")
		if !ok || id == "" || secret == "" {
			return nil, fmt.Errorf("-aws-keys: want ACCESS_KEY_ID=SECRET_ACCESS_KEY pairs separated by commas, got an entry without both (%d bytes)", len(pair))
		}
		keys[id] = secret
	}
	return keys, nil
}
