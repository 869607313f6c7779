package e2e

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/testkit/mockllm"
)

// TestPluginKitOutsideTheCheckout takes the path docs/PLUGINS.md gives a
// plugin author, in a temp folder outside this repository, with the
// commands it names: tollgate plugin new, an edit (a deny term added to
// the config and a case for it), plugin test, plugin build, then tollgate
// serve -policy policy.yaml; a request naming the new term gets the
// guard's rejection, a clean one streams.
func TestPluginKitOutsideTheCheckout(t *testing.T) {
	t.Parallel() // checks no time (see the package doc)
	for _, lang := range []string{"go", "rust"} {
		t.Run(lang, func(t *testing.T) {
			if lang == "rust" {
				if _, err := os.Stat("/usr/bin/rustc"); err != nil && os.Getenv("RUSTC") == "" {
					t.Fatal("no /usr/bin/rustc: install Debian's rustc with its wasm32 target (make test-deps, or apt-get install rustc libstd-rust-dev-wasm32 lld-14)")
				}
			}
			pluginKitFlow(t, lang)
		})
	}
}

func pluginKitFlow(t *testing.T, lang string) {
	work := t.TempDir()
	root, _ := filepath.Abs("../..")
	if strings.HasPrefix(work, root+string(filepath.Separator)) {
		t.Fatalf("temp dir %s is inside the checkout %s", work, root)
	}
	tollgate := filepath.Join(binDir, "tollgate")
	out := runIn(t, work, tollgate, "plugin", "new", "-lang", lang, "myguard")
	for _, w := range []string{"tollgate plugin test .", "tollgate plugin build .", "tollgate serve -policy policy.yaml"} {
		if !strings.Contains(out, w) {
			t.Errorf("plugin new's next steps lack %q:\n%s", w, out)
		}
	}
	dir := filepath.Join(work, "myguard")

	// The edit: a third term, in the cases' config and the policy's, and
	// a case for it.
	edit(t, filepath.Join(dir, "plugin_test.json"), `"p@ssw0rd"]`, `"p@ssw0rd", "hunter2"]`)
	edit(t, filepath.Join(dir, "plugin_test.json"), `"cases": [`, `"cases": [
    {"name": "the added term",
     "request": {"body": "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"my HUNTER2\"}]}"},
     "expect": {"verdict": "reject", "status": 400, "code": "content_blocked"}},`)
	edit(t, filepath.Join(dir, "policy.yaml"), `"p@ssw0rd"]`, `"p@ssw0rd","hunter2"]`)

	out = runIn(t, dir, tollgate, "plugin", "test", ".")
	if !strings.Contains(out, "ok    the added term") || !strings.Contains(out, "15 cases passed") {
		t.Errorf("plugin test:\n%s", out)
	}
	runIn(t, dir, tollgate, "plugin", "build", ".")
	if b, err := os.ReadFile(filepath.Join(dir, "myguard.wasm")); err != nil || !bytes.HasPrefix(b, []byte("\x00asm")) {
		t.Fatalf("myguard.wasm: %v", err)
	}

	_, mockURL := startMock(t, mockllm.Config{})
	gw := serveIn(t, dir, tollgate, "TOLLGATE_UPSTREAM_URL="+mockURL+"/v1")
	status, body := postChat(t, gw, `{"model":"mock-1","messages":[{"role":"user","content":"my hunter2 is safe"}]}`)
	if status != 400 || !strings.Contains(body, `"code":"content_blocked"`) || strings.Contains(body, "hunter2") {
		t.Errorf("blocked request: %d %s", status, body)
	}
	status, body = postChat(t, gw, `{"model":"mock-1","stream":true,"messages":[{"role":"user","content":"hello"}]}`)
	if status != 200 || !strings.Contains(body, "data: {") || !strings.HasSuffix(strings.TrimSpace(body), "data: [DONE]") {
		t.Errorf("clean stream: %d %s", status, body)
	}
}

// runIn runs a command in dir and returns its output; it fails the test
// when the command fails.
func runIn(t *testing.T, dir string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
	return string(out)
}

func edit(t *testing.T, path, old, new string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(old)) {
		t.Fatalf("%s has no %q to change", path, old)
	}
	if err := os.WriteFile(path, bytes.Replace(b, []byte(old), []byte(new), 1), 0o644); err != nil {
		t.Fatal(err)
	}
}

// serveIn runs `tollgate serve -policy policy.yaml` in dir on a free
// loopback port (TOLLGATE_LISTEN) and returns its URL once it is ready.
func serveIn(t *testing.T, dir, tollgate string, env ...string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(tollgate, "serve", "-policy", "policy.yaml")
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "TOLLGATE_LISTEN="+addr), env...)
	var logs bytes.Buffer
	cmd.Stderr = &syncWriter{w: &logs}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("gateway logs:\n%s", tail(logs.String(), 3000))
		}
	})
	url := "http://" + addr
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if resp, err := http.Get(url + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return url
			}
		}
		if time.Now().After(end) {
			t.Fatalf("gateway not ready after 30 s")
		}
	}
}

func postChat(t *testing.T, gw, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(gw+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestPluginsDocExample takes the plugin of docs/PLUGINS.md's "A plugin in
// 20 lines" and the test its "Test without a gateway" shows into a new
// module outside the checkout (its go.mod requiring the SDK with a replace
// to this checkout's sdk) and runs go test there.
func TestPluginsDocExample(t *testing.T) {
	t.Parallel() // checks no time (see the package doc)
	doc, err := os.ReadFile("../../docs/PLUGINS.md")
	if err != nil {
		t.Fatal(err)
	}
	plugin := goBlockAfter(t, string(doc), "## A plugin in 20 lines")
	test := goBlockAfter(t, string(doc), "## Test without a gateway")
	sdkDir, err := filepath.Abs("../../sdk")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files := map[string]string{
		"go.mod": "module example.com/o1guard\n\ngo 1.25.0\n\nrequire github.com/tollgate/tollgate/sdk v0.0.0\n\n" +
			"replace github.com/tollgate/tollgate/sdk => " + sdkDir + "\n",
		"main.go":      plugin,
		"main_test.go": test,
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	runIn(t, dir, "go", "mod", "tidy")
	out := runIn(t, dir, "go", "test", "-count=1", "-v", ".")
	if !strings.Contains(out, "--- PASS: Test") {
		t.Errorf("go test ran no passing test:\n%s", out)
	}
}

// goBlockAfter returns the first ```go block after heading in doc.
func goBlockAfter(t *testing.T, doc, heading string) string {
	t.Helper()
	_, rest, ok := strings.Cut(doc, "\n"+heading+"\n")
	if !ok {
		t.Fatalf("no heading %q", heading)
	}
	_, rest, ok = strings.Cut(rest, "```go\n")
	if !ok {
		t.Fatalf("no Go block after %q", heading)
	}
	block, _, ok := strings.Cut(rest, "```\n")
	if !ok {
		t.Fatalf("unterminated Go block after %q", heading)
	}
	return block
}
