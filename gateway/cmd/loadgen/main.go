// Command loadgen is a closed-loop HTTP load generator for OpenAI-compatible
// endpoints: each of -c workers holds one keep-alive connection and sends
// requests back to back, for -n requests in total or for -d.
//
// Examples:
//
//	loadgen -url http://127.0.0.1:8080/v1/chat/completions -c 8 -d 10s
//	loadgen -url http://127.0.0.1:8080/v1/chat/completions -c 8 -n 5000 -stream -json
//	loadgen -url http://127.0.0.1:8080/mcp/docs -mcp -c 8 -d 10s   # MCP tools/call of "echo"
//	loadgen -free-port    # print a free loopback TCP port and exit
//	loadgen report -section latency:non-streaming results.jsonl   # markdown report of a benchmark run
//	go tool pprof -traces cpu.pb.gz | loadgen cpubuckets           # a CPU profile's share per bucket (scripts/cpubreak.sh)
//
// It prints a human-readable summary, or with -json one JSON object (the
// loadgen.Result). The exit status is 0 when the run completed (even with
// failed requests: see "failures"), 1 on a run error or an interrupt (the
// partial result is still printed), 2 on bad flags.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/testkit/loadgen"
)

// headerList collects repeated -H flags.
type headerList []loadgen.Header

func (h *headerList) String() string {
	parts := make([]string, len(*h))
	for i, x := range *h {
		parts[i] = x.Name + ": " + x.Value
	}
	return strings.Join(parts, ", ")
}

func (h *headerList) Set(s string) error {
	x, err := loadgen.ParseHeader(s)
	if err != nil {
		return err
	}
	*h = append(*h, x)
	return nil
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "report" {
		return report(args[1:], os.Stdin, stdout, stderr)
	}
	if len(args) > 0 && args[0] == "cpubuckets" {
		return cpuBuckets(args[1:], os.Stdin, stdout, stderr)
	}
	logger := slog.New(slog.NewTextHandler(stderr, nil))
	fs := flag.NewFlagSet("loadgen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		cfg      loadgen.Config
		headers  headerList
		bodyFile string
		asJSON   bool
		freePort bool
	)
	fs.StringVar(&cfg.URL, "url", "http://127.0.0.1:8080/v1/chat/completions", "full endpoint URL (requests are POSTs)")
	fs.IntVar(&cfg.Concurrency, "c", 1, "concurrency: workers, each with one keep-alive connection")
	fs.IntVar(&cfg.Requests, "n", 0, "total measured requests (exclusive with -d)")
	fs.DurationVar(&cfg.Duration, "d", 0, "measured duration, e.g. 10s (exclusive with -n; default 10s if neither is set)")
	fs.IntVar(&cfg.Warmup, "warmup", 20, "unrecorded warmup requests per worker")
	fs.DurationVar(&cfg.Ramp, "ramp", 0, "spread the workers' start over this duration")
	fs.BoolVar(&cfg.Stream, "stream", false, `set "stream":true and measure TTFT and total stream time`)
	fs.StringVar(&cfg.Model, "model", loadgen.DefaultModel, "model name in the generated body")
	fs.IntVar(&cfg.MaxTokens, "max-tokens", 64, "max_tokens in the generated body (0 omits it)")
	fs.StringVar(&bodyFile, "body", "", "file whose raw content is sent as the body (overrides -model, -max-tokens and the stream field)")
	fs.BoolVar(&cfg.MCP, "mcp", false, `the URL is an MCP Streamable HTTP endpoint: each worker opens a session (untimed), then calls the tool "echo" (tools/call); with -stream the answer must be SSE, and ttft is its first event, total its result; a -body has each "`+loadgen.MCPIDMark+`" replaced by the request's id`)
	fs.BoolVar(&cfg.Unique, "unique", false, `make every request's body unique (each "`+loadgen.UniqueMark+`" in it replaced by a fresh number; the generated body has one): a response cache never hits`)
	fs.Var(&headers, "H", `extra request header "Name: value" (repeatable)`)
	fs.DurationVar(&cfg.Timeout, "timeout", loadgen.DefaultTimeout, "per-request timeout, including a whole stream")
	fs.StringVar(&cfg.Label, "label", "", "label copied into the output")
	fs.BoolVar(&asJSON, "json", false, "print the result as one JSON object")
	fs.BoolVar(&freePort, "free-port", false, "print a free TCP port on 127.0.0.1 and exit")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "loadgen: unexpected arguments %q\n", fs.Args())
		return 2
	}
	if freePort {
		port, err := pickFreePort()
		if err != nil {
			logger.Error("free port", "err", err)
			return 1
		}
		fmt.Fprintln(stdout, port)
		return 0
	}
	if cfg.Requests > 0 && cfg.Duration > 0 {
		fmt.Fprintln(stderr, "loadgen: -n and -d are mutually exclusive")
		return 2
	}
	if cfg.Requests == 0 && cfg.Duration == 0 {
		cfg.Duration = 10 * time.Second
	}
	cfg.Headers = headers
	if bodyFile != "" {
		b, err := os.ReadFile(bodyFile)
		if err != nil {
			logger.Error("reading body", "err", err)
			return 2
		}
		cfg.Body = b
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := loadgen.Run(ctx, cfg)
	if err != nil && !errors.Is(err, context.Canceled) {
		logger.Error("run failed", "err", err)
		return 1
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		if err := enc.Encode(res); err != nil {
			logger.Error("writing result", "err", err)
			return 1
		}
	} else {
		printHuman(stdout, res)
	}
	if err != nil {
		logger.Warn("interrupted; partial result", "err", err)
		return 1
	}
	return 0
}

// pickFreePort asks the kernel for an unused loopback port. The port is
// free when returned but not reserved: a caller should bind it promptly.
func pickFreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func printHuman(w io.Writer, r loadgen.Result) {
	if r.Label != "" {
		fmt.Fprintf(w, "label:      %s\n", r.Label)
	}
	mcp := ""
	if r.MCP {
		mcp = ", MCP tools/call"
	}
	fmt.Fprintf(w, "url:        %s (c=%d, stream=%v%s, warmup=%d/worker, GOMAXPROCS=%d)\n",
		r.URL, r.Concurrency, r.Stream, mcp, r.Warmup, r.GOMAXPROCS)
	fmt.Fprintf(w, "requests:   %d in %.2fs, %d failed → %.1f req/s (%.1f ok/s)\n",
		r.Count, r.ElapsedSeconds, r.Failures, r.RequestsPerSec, r.SuccessesPerSec)
	row := func(name string, p loadgen.Percentiles) {
		fmt.Fprintf(w, "%-11s p50 %10.1f  p90 %10.1f  p95 %10.1f  p99 %10.1f  max %10.1f  (µs, n=%d)\n",
			name, p.P50, p.P90, p.P95, p.P99, p.Max, p.Samples)
	}
	row("latency:", r.Latency)
	if r.TTFT != nil {
		row("ttft:", *r.TTFT)
	}
	if r.StreamTotal != nil {
		row("total:", *r.StreamTotal)
	}
	for _, e := range r.Errors {
		fmt.Fprintf(w, "error:      %d× %s\n", e.Count, e.Message)
	}
	if r.WarmupFailures > 0 {
		fmt.Fprintf(w, "warmup:     %d failed warmup requests\n", r.WarmupFailures)
	}
}
