package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/testkit/mockllm"
)

// gatewayProcess runs the tollgate binary with a policy file and returns its
// address; the process is killed at cleanup if still running.
func gatewayProcess(t *testing.T, policyYAML string, env ...string) (*exec.Cmd, string, *bytes.Buffer) {
	t.Helper()
	dir := t.TempDir()
	pf := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(pf, []byte(policyYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(filepath.Join(binDir, "tollgate"), "serve", "-policy", pf, "-listen", addr)
	cmd.Env = append(os.Environ(), env...)
	var logs bytes.Buffer
	cmd.Stderr = &syncWriter{w: &logs}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	url := "http://" + addr
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if resp, err := http.Get(url + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(end) {
			t.Fatalf("gateway not ready; logs:\n%s", logs.String())
		}
	}
	return cmd, url, &logs
}

type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// String is what was written so far, when w is a fmt.Stringer (a
// bytes.Buffer), read under the lock the writes take.
func (s *syncWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st, ok := s.w.(fmt.Stringer); ok {
		return st.String()
	}
	return ""
}

// TestSIGTERMDrainsOpenStreams opens streams, sends SIGTERM, and checks that
// readiness fails, new connections are refused, and every open stream runs
// to its [DONE] with its whole text within the drain time.
func TestSIGTERMDrainsOpenStreams(t *testing.T) {
	const streams, tokens = 40, 40 // each stream lasts about 40 × 25 ms = 1 s
	_, mockURL := startMock(t, mockllm.Config{Tokens: tokens, InterToken: 25 * time.Millisecond})
	pol := strings.Replace(policy(mockURL, ""), "drain_timeout: 2s", "drain_timeout: 10s", 1)
	cmd, gw, logs := gatewayProcess(t, pol)

	type result struct {
		text string
		done bool
		err  error
	}
	results := make(chan result, streams)
	started := make(chan struct{}, streams)
	var want strings.Builder
	for i := 0; i < tokens; i++ {
		fmt.Fprintf(&want, "tok%d ", i)
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	for i := 0; i < streams; i++ {
		go func() {
			body := `{"model":"mock-1","stream":true,"messages":[{"role":"user","content":"hi"}]}`
			resp, err := client.Post(gw+"/v1/chat/completions", "application/json", strings.NewReader(body))
			if err != nil {
				started <- struct{}{}
				results <- result{err: err}
				return
			}
			defer resp.Body.Close()
			buf := make([]byte, 1)
			io.ReadFull(resp.Body, buf) // the stream is open
			started <- struct{}{}
			rest, err := io.ReadAll(resp.Body)
			text, done := sseText(t, append(buf, rest...))
			results <- result{text, done, err}
		}()
	}
	for i := 0; i < streams; i++ {
		<-started
	}
	sent := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// Readiness fails and new connections are refused while streams drain.
	time.Sleep(150 * time.Millisecond)
	if resp, err := http.Get(gw + "/readyz"); err == nil {
		resp.Body.Close()
		t.Errorf("new connection accepted during drain (readyz %d)", resp.StatusCode)
	}
	for i := 0; i < streams; i++ {
		r := <-results
		if r.err != nil || !r.done || r.text != want.String() {
			t.Errorf("stream cut during drain: err=%v done=%v text=%q", r.err, r.done, r.text)
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("gateway exit: %v\n%s", err, logs.String())
	}
	t.Logf("%d streams drained; process exited %v after SIGTERM", streams, time.Since(sent).Round(time.Millisecond))
}

// TestSIGTERMDrainTimeoutEndsStreams checks that streams still open when the
// drain time runs out end with a final error event, and the process exits.
func TestSIGTERMDrainTimeoutEndsStreams(t *testing.T) {
	_, mockURL := startMock(t, mockllm.Config{Tokens: 100, InterToken: 100 * time.Millisecond})
	pol := strings.Replace(policy(mockURL, ""), "drain_timeout: 2s", "drain_timeout: 300ms", 1)
	cmd, gw, logs := gatewayProcess(t, pol)
	resp, err := http.Post(gw+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"mock-1","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	buf := make([]byte, 1)
	io.ReadFull(resp.Body, buf)
	start := time.Now()
	cmd.Process.Signal(syscall.SIGTERM)
	rest, _ := io.ReadAll(resp.Body)
	body := string(append(buf, rest...))
	if !strings.Contains(body, `"code":"shutting_down"`) || strings.Contains(body, "[DONE]") {
		t.Errorf("stream past the drain time should end with a shutting_down event, got tail %q\nlogs:\n%s", tail(body, 300), logs)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("gateway exit: %v\n%s", err, logs.String())
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("shutdown took %v with a 300ms drain", d)
	}
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}
