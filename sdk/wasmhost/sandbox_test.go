package wasmhost

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestSandbox runs a plugin that tries every way out it knows — read a host
// file, create one, list directories, read the environment and argv, dial
// a TCP listener, find preopened descriptors — against a host that has
// each of those to offer, and checks that it got none of them.
func TestSandbox(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret.txt")
	if err := os.WriteFile(secret, []byte("host secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	written := filepath.Join(dir, "written-by-plugin")
	t.Setenv("TOLLGATE_SANDBOX_PROBE", "host secret")

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var dialed atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			dialed.Add(1)
			c.Close()
		}
	}()

	probe, _ := json.Marshal(map[string]any{
		"request": "sandbox", "phases": []string{"request"},
		"sandbox": map[string]string{"file": secret, "write": written, "env": "TOLLGATE_SANDBOX_PROBE", "addr": ln.Addr().String()},
	})
	spec := Spec{Name: "probe", Module: testPlugin(t), Config: probe, Deadline: 5 * time.Second}
	pl, err := NewPipeline(t.Context(), testHost(t), []Spec{spec})
	if err != nil {
		t.Fatal(err)
	}
	defer pl.Close()
	r := request(`{}`)
	defer ReleaseRequest(r)
	if err := pl.Request(r); err != nil {
		t.Fatal(err)
	}
	var report string
	for _, h := range r.SetClientHeaders {
		if string(h.Name) == "X-Sandbox" {
			report = string(h.Value)
		}
	}
	const want = "file=-;write=-;root=-;cwd=-;env=-;environ=0;args=0;dial=-;fds=0"
	if report != want {
		t.Errorf("the plugin reached the host:\n got  %s\n want %s", report, want)
	}
	if _, err := os.Stat(written); err == nil {
		t.Errorf("the plugin created %s", written)
	}
	time.Sleep(50 * time.Millisecond) // an accepted connection is counted
	if n := dialed.Load(); n != 0 {
		t.Errorf("the plugin opened %d connections to the host's listener", n)
	}
	if strings.Contains(logs.String(), "host secret") {
		t.Error("the host secret reached the log")
	}
}
