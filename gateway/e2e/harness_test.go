// Package e2e tests the gateway with real servers on both sides: a real
// client (Go's net/http, raw TCP, or the official OpenAI Node SDK), the
// gateway on a loopback port, and a real upstream (the mock model or a
// canned HTTP server).
//
// The tests that call t.Parallel() run after all the others, two at a
// time (-parallel defaults to GOMAXPROCS). They are the ones whose time
// goes to work that leaves a core idle (Node clients, go and rustc builds
// in a subprocess, plugin loads) and that check no time: no latency bar,
// no rate or budget window, no lease or timeout, nothing set in the
// process's environment. A test that measures time stays serial, alone
// with its gateway.
package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/config"
	"github.com/tollgate/tollgate/gateway/internal/proxy"
	"github.com/tollgate/tollgate/gateway/internal/testkit/gobin"
	"github.com/tollgate/tollgate/gateway/internal/testkit/mockllm"
)

// binDir holds binaries built once by TestMain for the tests that need a
// real process (signals).
var binDir string

func TestMain(m *testing.M) { gobin.Main(m, &binDir, "../cmd/tollgate") }

// startMock serves a mock model on a loopback port.
func startMock(t *testing.T, cfg mockllm.Config) (*mockllm.Server, string) {
	t.Helper()
	m := mockllm.New(cfg)
	ts := httptest.NewServer(m)
	t.Cleanup(ts.Close)
	return m, ts.URL
}

// startUpstream serves h on a loopback port (a canned upstream).
func startUpstream(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts.URL
}

// policy returns a policy routing the given models to one upstream at url.
func policy(url string, extra string, models ...string) string {
	if len(models) == 0 {
		models = []string{"mock-1", "mock-*"}
	}
	return fmt.Sprintf(`
version: 1
server:
  max_body_bytes: 64KiB
  drain_timeout: 2s
upstreams:
  - name: up
    base_url: %s/v1
    forward_headers: ["x-mock-*"]
    timeouts: {connect: 1s, first_byte: 5s, idle: 5s, total: 30s}
%s
routes:
  - models: [%s]
    upstream: up
`, url, extra, quoteJoin(models))
}

func quoteJoin(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}

// startGateway runs the gateway in-process on a loopback port.
func startGateway(t *testing.T, policyYAML string, vars map[string]string) (*proxy.Server, string) {
	t.Helper()
	p, err := config.Parse([]byte(policyYAML), func(k string) (string, bool) { v, ok := vars[k]; return v, ok })
	if err != nil {
		t.Fatalf("policy: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	srv, err := proxy.New(p, log)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { srv.Serve(ln); close(done) }()
	t.Cleanup(func() {
		srv.Shutdown(0, 2*time.Second)
		<-done
	})
	return srv, "http://" + ln.Addr().String()
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// post sends body to url with headers and returns status, headers and body.
func post(t *testing.T, url, body string, hdr ...string) (int, http.Header, []byte) {
	t.Helper()
	return postWith(t, http.DefaultClient, url, body, hdr...)
}

// postWith is post through client c.
func postWith(t *testing.T, c *http.Client, url, body string, hdr ...string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest("POST", url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading body: %v", err)
	}
	return resp.StatusCode, resp.Header, b
}

// sseText concatenates the content deltas of an SSE body and reports
// whether it ended with [DONE].
func sseText(t *testing.T, body []byte) (text string, done bool) {
	t.Helper()
	var b strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			done = true
			continue
		}
		if s := jsonString(data, `"content":`); s != "" {
			b.WriteString(s)
		}
	}
	return b.String(), done
}

// jsonString extracts a simple JSON string value following key (no nested
// escapes beyond \" and \\), enough for the mock's output.
func jsonString(s, key string) string {
	i := strings.Index(s, key)
	if i < 0 {
		return ""
	}
	s = s[i+len(key):]
	if !strings.HasPrefix(s, `"`) {
		return ""
	}
	var b strings.Builder
	for j := 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			j++
			if j < len(s) {
				b.WriteByte(s[j])
			}
		case '"':
			return b.String()
		default:
			b.WriteByte(s[j])
		}
	}
	return b.String()
}

func repoRoot(t *testing.T) string {
	t.Helper()
	abs, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

// readResponse reads one HTTP/1.1 response from br, body included.
func readResponse(br *bufio.Reader) (string, error) {
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}
