// Package console tests the operator console in a real browser: headless
// Chromium (Debian's chromium, driven by playwright-core from
// web/console's node_modules) against the tollgate binary serving on
// Postgres and Redis with the mock model behind it. The scenario is
// web/console/test/console.mjs; this package starts the world it needs
// and checks that every step it runs passes.
//
// It runs without the race detector (the gateway is a separate process,
// and the time goes to the browser). Its two tests run in parallel: they
// measure no time, and their deadlines are generous.
package console

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/testkit/gobin"
	"github.com/tollgate/tollgate/gateway/internal/testkit/mockllm"
	"github.com/tollgate/tollgate/gateway/internal/testkit/pgtest"
	"github.com/tollgate/tollgate/gateway/internal/testkit/redistest"
	"github.com/tollgate/tollgate/gateway/internal/testkit/syncbuf"
)

// The scenarios' steps in order (console.mjs prints one line for each).
var (
	fullSteps = []string{
		"load", "bad-token", "sign-in", "create-plan", "set-price", "create-tenant", "create-key",
		"traffic", "spend", "cancel-stream", "keys-page", "policy", "admin-token", "audit",
		"session-ended", "csp-detector", "secrets-and-csp",
	}
	readOnlySteps = []string{"load", "sign-in", "read-only", "csp-detector", "secrets-and-csp"}
)

var binDir string

func TestMain(m *testing.M) { gobin.Main(m, &binDir, "../../cmd/tollgate") }

func repoRoot(t *testing.T) string {
	t.Helper()
	abs, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// syncBuffer collects output that goroutines write at once.
type syncBuffer = syncbuf.Buffer

// world is a gateway process and what the script needs to reach it.
type world struct {
	root, chromium   string
	proxyURL, admURL string
	adminToken       string
	log              *syncBuffer
}

// prerequisites fails the test when the browser or the script's packages
// are missing (make test-deps installs both).
func prerequisites(t *testing.T) (root, chromium string) {
	t.Helper()
	root = repoRoot(t)
	chromium = os.Getenv("CHROMIUM")
	if chromium == "" {
		chromium = "/usr/bin/chromium"
	}
	if _, err := os.Stat(chromium); err != nil {
		t.Fatalf("no Chromium at %s (%v): make test-deps installs Debian's chromium", chromium, err)
	}
	if _, err := os.Stat(filepath.Join(root, "web/console/node_modules/playwright-core")); err != nil {
		t.Fatalf("web/console has no node_modules/playwright-core (%v): make test-deps runs npm ci there", err)
	}
	return root, chromium
}

// startGateway runs the tollgate binary on the policy that policy makes of
// the mock model's URL, the admin listener's address and a directory of
// its own, with env added to its environment.
func startGateway(t *testing.T, policy func(mockURL, adminAddr, dir string) string, env ...string) *world {
	t.Helper()
	root, chromium := prerequisites(t)
	mock := httptest.NewServer(mockllm.New(mockllm.Config{Tokens: 16, Usage: true}))
	t.Cleanup(mock.Close)
	tokenBytes := make([]byte, 24)
	rand.Read(tokenBytes)
	w := &world{root: root, chromium: chromium, adminToken: "console-test-" + hex.EncodeToString(tokenBytes), log: &syncBuffer{}}
	proxyAddr, adminAddr := freeAddr(t), freeAddr(t)
	w.proxyURL, w.admURL = "http://"+proxyAddr, "http://"+adminAddr
	dir := t.TempDir()
	pf := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(pf, []byte(policy(mock.URL, adminAddr, dir)), 0o600); err != nil {
		t.Fatal(err)
	}
	gw := exec.Command(filepath.Join(binDir, "tollgate"), "serve", "-policy", pf, "-listen", proxyAddr)
	gw.Env = append(append(os.Environ(), "TOLLGATE_ADMIN_TOKEN="+w.adminToken), env...)
	gw.Stdout, gw.Stderr = w.log, w.log
	if err := gw.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- gw.Wait() }()
	t.Cleanup(func() {
		gw.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("gateway log:\n%s", tail(w.log.String(), 4000))
		}
	})
	waitReady(t, w.proxyURL+"/readyz", exited, w.log)
	waitReady(t, w.admURL+"/", exited, w.log)
	return w
}

// basePolicy routes the mock models to the mock and opens the admin
// listener.
func basePolicy(mockURL, adminAddr string) string {
	return fmt.Sprintf(`
version: 1
server:
  drain_timeout: 2s
  cancel_poll_interval: 200ms
upstreams:
  - name: up
    base_url: %s/v1
    forward_headers: ["x-mock-*"]
    timeouts: {connect: 2s, first_byte: 10s, idle: 10s, total: 120s}
routes:
  - models: ["mock-1", "mock-*"]
    upstream: up
admin:
  listen: %q
`, mockURL, adminAddr)
}

// TestConsoleInBrowser: the full scenario, on Postgres and Redis.
func TestConsoleInBrowser(t *testing.T) {
	t.Parallel()
	db := pgtest.Start(t)
	if err := pgtest.Migrate(context.Background(), db.DSN()); err != nil {
		t.Fatal(err)
	}
	rd := redistest.Start(t)
	w := startGateway(t, func(mockURL, adminAddr, dir string) string {
		return basePolicy(mockURL, adminAddr) + fmt.Sprintf(`
store:
  kind: postgres
  cache: {ttl: 2s}
redis: {addrs: [%q], timeout: 2s}
call_log: {spool_dir: %q}
plugins:
  - {name: preflight, builtin: preflight}
  - {name: ratelimit, builtin: ratelimit, config: {default_max_tokens: 64}}
  - {name: budget, builtin: budget, config: {default_max_tokens: 64}}
`, rd.Addr(), filepath.Join(dir, "spool"))
	}, "TOLLGATE_DATABASE_URL="+db.DSN())
	w.run(t, "full", fullSteps)
}

// TestConsoleReadOnly: on the memory store the console says it is
// read-only and shows the API's refusal of a write.
func TestConsoleReadOnly(t *testing.T) {
	t.Parallel()
	w := startGateway(t, func(mockURL, adminAddr, _ string) string { return basePolicy(mockURL, adminAddr) })
	w.run(t, "read-only", readOnlySteps)
}

// run runs console.mjs's scenario and checks that it reports exactly the
// steps given, in order, each "ok".
func (w *world) run(t *testing.T, scenario string, steps []string) {
	t.Helper()
	shots := os.Getenv("TOLLGATE_SCREENSHOTS")
	switch {
	case shots == "":
		shots = t.TempDir()
	case !filepath.IsAbs(shots):
		shots = filepath.Join(w.root, shots)
	}
	runCtx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	start := time.Now()
	node := exec.CommandContext(runCtx, "node", "test/console.mjs")
	node.Dir = filepath.Join(w.root, "web/console")
	node.Env = append(os.Environ(),
		"CONSOLE_URL="+w.admURL,
		"GATEWAY_URL="+w.proxyURL,
		"ADMIN_TOKEN="+w.adminToken,
		"SCREENSHOTS="+shots,
		"CHROMIUM="+w.chromium,
		"SCENARIO="+scenario,
	)
	stdout, err := node.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &syncBuffer{}
	node.Stderr = stderr
	if err := node.Start(); err != nil {
		t.Fatal(err)
	}
	var out []string
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		out = append(out, line)
		t.Log(line)
	}
	runErr := node.Wait()
	t.Logf("console.mjs (%s) took %v (screenshots in %s)", scenario, time.Since(start).Round(time.Millisecond), shots)
	if stderr.String() != "" {
		t.Logf("console.mjs stderr:\n%s", tail(stderr.String(), 3000))
	}
	var got []string
	for _, line := range out {
		if rest, ok := strings.CutPrefix(line, "step "); ok {
			got = append(got, rest)
		}
	}
	if len(got) != len(steps) {
		t.Errorf("console.mjs reported %d steps, want %d (%v): %q", len(got), len(steps), runErr, got)
	}
	for i, name := range steps {
		want := name + " ok"
		if i >= len(got) || !strings.HasPrefix(got[i], want) {
			have := "nothing"
			if i < len(got) {
				have = got[i]
			}
			t.Errorf("step %d: %q, want %q", i, have, want)
		}
	}
	if runErr != nil {
		t.Errorf("console.mjs: %v", runErr)
	}
	// The admin token is in no output: the script's, the browser's, the
	// gateway's.
	for what, s := range map[string]string{"script output": strings.Join(out, "\n"), "script stderr": stderr.String(), "gateway log": w.log.String()} {
		if strings.Contains(s, w.adminToken) {
			t.Errorf("the admin token appears in the %s", what)
		}
	}
}

func waitReady(t *testing.T, url string, exited chan error, log *syncBuffer) {
	t.Helper()
	c := http.Client{Timeout: time.Second}
	for end := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("gateway exited at start (%v):\n%s", err, tail(log.String(), 4000))
		default:
		}
		if resp, err := c.Get(url); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		if time.Now().After(end) {
			t.Fatalf("%s not ready after 60s:\n%s", url, tail(log.String(), 4000))
		}
	}
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
