package e2e

import (
	"bufio"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/testkit/mockllm"
)

// The binary with no -policy runs the embedded default: the four built-in
// plugins on demo keys it makes at start and prints, with a curl line for
// each. Each printed line is run as printed (bash and curl, as a reader of
// `make run` would) and must show its plugin at work.
func TestBuiltinPluginsDemo(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Fatal("curl is needed to run the printed lines (scripts/run.sh needs it too):", err)
	}
	_, mockURL := startMock(t, mockllm.Config{Tokens: 5})
	addr := freeAddr(t)
	cmd := exec.Command(filepath.Join(binDir, "tollgate"), "serve", "-listen", addr)
	cmd.Env = append(os.Environ(), "TOLLGATE_MOCK_URL="+mockURL+"/v1")
	var logBuf strings.Builder
	logs := &syncWriter{w: &logBuf}
	cmd.Stderr = logs
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			logs.mu.Lock()
			defer logs.mu.Unlock()
			t.Logf("gateway logs:\n%s", tail(logBuf.String(), 3000))
		}
	})
	banner := readBanner(t, stdout)

	keys := map[string]string{}
	for _, m := range regexp.MustCompile(`(TOLLGATE_DEMO_\w+)=(tg_demo_[0-9a-f]{48})`).FindAllStringSubmatch(banner, -1) {
		keys[m[1]] = m[2]
	}
	if len(keys) != 3 {
		t.Fatalf("want 3 demo keys in the banner, got %v:\n%s", keys, banner)
	}
	var lines []string
	for _, l := range strings.Split(banner, "\n") {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, "curl ") || strings.HasPrefix(l, "for ") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 4 {
		t.Fatalf("want 4 curl lines, got %d:\n%s", len(lines), banner)
	}
	run := func(t *testing.T, line string) string {
		c := exec.Command("bash", "-c", line)
		c.Env = append(os.Environ(), "PATH="+filepath.Dir(curl)+":"+os.Getenv("PATH"))
		out, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", line, err, out)
		}
		return string(out)
	}

	t.Run("stream", func(t *testing.T) {
		out := run(t, lines[0])
		if strings.Count(out, `"content":"tok`) != 5 || !strings.Contains(out, `"finish_reason":"stop"`) || !strings.HasSuffix(strings.TrimSpace(out), "data: [DONE]") {
			t.Errorf("want a stream of 5 tokens ending in stop and [DONE]:\n%s", out)
		}
	})
	t.Run("guard stop", func(t *testing.T) {
		out := run(t, lines[1])
		if strings.Contains(out, "oaidalleapiprodscus") || !strings.Contains(out, `"finish_reason":"content_filter"`) ||
			!strings.Contains(out, "This reply was cut off") || !strings.HasSuffix(strings.TrimSpace(out), "data: [DONE]") {
			t.Errorf("want the marker withheld and the stream ended by content_filter:\n%s", out)
		}
	})
	t.Run("rate limit", func(t *testing.T) {
		out := run(t, lines[2])
		got := regexp.MustCompile(`HTTP/1.1 (\d+)`).FindAllStringSubmatch(out, -1)
		var codes []string
		for _, m := range got {
			codes = append(codes, m[1])
		}
		if strings.Join(codes, " ") != "200 200 200 429" {
			t.Errorf("statuses %v, want 200 200 200 429:\n%s", codes, out)
		}
		ra := regexp.MustCompile(`(?i)retry-after: (\d+)`).FindAllStringSubmatch(out, -1)
		if len(ra) != 1 {
			t.Fatalf("want one Retry-After:\n%s", out)
		}
		if n, _ := strconv.Atoi(ra[0][1]); n < 1 || n > 60 {
			t.Errorf("want one Retry-After of 1 to 60 seconds:\n%s", out)
		}
	})
	t.Run("budget", func(t *testing.T) {
		out := run(t, lines[3])
		if !strings.Contains(out, `"code":"insufficient_quota"`) || !strings.Contains(out, "monthly budget") {
			t.Errorf("want insufficient_quota:\n%s", out)
		}
	})
	t.Run("preflight", func(t *testing.T) {
		// No key, and a key the gateway did not make.
		for _, key := range []string{"", "tg_demo_" + strings.Repeat("0", 48)} {
			req, _ := http.NewRequest("POST", "http://"+addr+"/v1/chat/completions",
				strings.NewReader(`{"model":"mock-1","messages":[{"role":"user","content":"hi"}]}`))
			if key != "" {
				req.Header.Set("Authorization", "Bearer "+key)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 401 {
				t.Errorf("key %q: %d %s; want 401", key, resp.StatusCode, body)
			}
		}
	})
}

// readBanner reads the gateway's stdout until the demo banner's last curl
// line (the gateway prints it once it listens, plugins compiled).
func readBanner(t *testing.T, r io.Reader) string {
	t.Helper()
	type result struct {
		text string
		ok   bool
	}
	done := make(chan result, 1)
	go func() {
		var b strings.Builder
		sc := bufio.NewScanner(r)
		sc.Buffer(nil, 1<<20)
		curls := 0
		for sc.Scan() {
			b.WriteString(sc.Text() + "\n")
			if l := strings.TrimSpace(sc.Text()); strings.HasPrefix(l, "curl ") || strings.HasPrefix(l, "for ") {
				if curls++; curls == 4 {
					done <- result{b.String(), true}
					io.Copy(io.Discard, r)
					return
				}
			}
		}
		done <- result{b.String(), false}
	}()
	select {
	case res := <-done:
		if !res.ok {
			t.Fatalf("the gateway exited before printing its banner:\n%s", res.text)
		}
		return res.text
	case <-time.After(3 * time.Minute): // a cold compilation cache on a loaded machine
		t.Fatal("no banner within 3 minutes")
	}
	return ""
}
