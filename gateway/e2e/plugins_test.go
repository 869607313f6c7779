package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/config"
	"github.com/tollgate/tollgate/gateway/internal/testkit/mockllm"
	"github.com/tollgate/tollgate/sdk/wasmbuild"
)

// testPluginPath builds (once per source change) the configurable test
// plugin and returns its .wasm path.
func testPluginPath(t testing.TB) string {
	t.Helper()
	p, err := wasmbuild.Cached(repoRoot(t.(*testing.T)) + "/sdk/wasmhost/testdata/testplugin")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// withPlugins appends a plugins section: each config is one instance of
// the test plugin, in order.
func withPlugins(t *testing.T, pol string, onError string, configs ...string) string {
	var b strings.Builder
	b.WriteString(pol)
	b.WriteString("plugins:\n")
	for i, c := range configs {
		fmt.Fprintf(&b, "  - name: t%d\n    path: %s\n    on_error: %s\n    limits: {deadline: 200ms}\n    config: %s\n", i, testPluginPath(t), onError, c)
	}
	return b.String()
}

const chatStream = `{"model":"mock-1","stream":true,"messages":[{"role":"user","content":"hi"}]}`
const chatOnce = `{"model":"mock-1","messages":[{"role":"user","content":"hi"}]}`

func TestPluginRequestPhase(t *testing.T) {
	mock, mockURL := startMock(t, mockllm.Config{Tokens: 3})
	seen := make(chan http.Header, 10)
	mock.SetOnRequest(func(h http.Header, _ []byte) { seen <- h })

	t.Run("reject with the plugin's error and headers", func(t *testing.T) {
		_, gw := startGateway(t, withPlugins(t, policy(mockURL, ""), "fail_closed",
			`{"request":["set_response_header:X-Guard=checked","reject"],"reject_status":403,"reject_code":"content_policy_violation","reject_message":"Blocked by policy."}`), nil)
		status, hdr, body := post(t, gw+"/v1/chat/completions", chatOnce)
		e := decodeError(t, body)
		if status != 403 || e.Error.Message != "Blocked by policy." || e.Error.Type != "permission_error" || *e.Error.Code != "content_policy_violation" {
			t.Errorf("got %d %s", status, body)
		}
		if hdr.Get("X-Guard") != "checked" || hdr.Get("X-Request-Id") == "" {
			t.Errorf("headers %v", hdr)
		}
		select {
		case <-seen:
			t.Error("a rejected request reached the upstream")
		default:
		}
	})
	t.Run("headers set upstream and facts passed on", func(t *testing.T) {
		_, gw := startGateway(t, withPlugins(t, policy(mockURL, ""), "fail_closed",
			`{"request":["set_header:X-Tenant=acme","set_header:User-Agent=tollgate-test","fact_set:tier=gold"]}`,
			`{"request":"fact_copy:tier"}`), nil)
		status, hdr, _ := post(t, gw+"/v1/chat/completions", chatOnce, "User-Agent", "client/1.0")
		if status != 200 || hdr.Get("X-Fact-Tier") != "gold" {
			t.Errorf("status %d, X-Fact-tier %q", status, hdr.Get("X-Fact-Tier"))
		}
		h := <-seen
		if h.Get("X-Tenant") != "acme" || h.Get("User-Agent") != "tollgate-test" || len(h.Values("User-Agent")) != 1 {
			t.Errorf("upstream headers %v", h)
		}
	})
	t.Run("response_headers phase rejects before any byte reaches the client", func(t *testing.T) {
		_, gw := startGateway(t, withPlugins(t, policy(mockURL, ""), "fail_closed",
			`{"response_headers":["set_response_header:X-Seen-Status=yes","reject"],"reject_status":502,"reject_code":"upstream_refused","reject_message":"Refused by policy."}`), nil)
		status, hdr, body := post(t, gw+"/v1/chat/completions", chatStream)
		<-seen
		e := decodeError(t, body)
		if status != 502 || *e.Error.Code != "upstream_refused" || hdr.Get("X-Seen-Status") != "yes" || strings.Contains(string(body), "data:") {
			t.Errorf("got %d %v %s", status, hdr, body)
		}
	})
	t.Run("a trapping plugin fails closed with a clear error", func(t *testing.T) {
		_, gw := startGateway(t, withPlugins(t, policy(mockURL, ""), "fail_closed", `{"request":"trap"}`), nil)
		status, _, body := post(t, gw+"/v1/chat/completions", chatOnce)
		e := decodeError(t, body)
		if status != 500 || *e.Error.Code != "plugin_failed" || !strings.Contains(e.Error.Message, `"t0"`) {
			t.Errorf("got %d %s", status, body)
		}
	})
	t.Run("a trapping plugin fails open", func(t *testing.T) {
		_, gw := startGateway(t, withPlugins(t, policy(mockURL, ""), "fail_open", `{"request":"trap"}`), nil)
		if status, _, body := post(t, gw+"/v1/chat/completions", chatOnce); status != 200 {
			t.Errorf("got %d %s", status, body)
		}
		<-seen
	})
}

func TestPluginChunkPhase(t *testing.T) {
	const text = "the quick brown fox jumps over the lazy dog"
	mock, mockURL := startMock(t, mockllm.Config{Text: text, ChunkSize: 5})
	closed := make(chan struct{}, 10)
	mock.SetOnClose(func(string, time.Time) { closed <- struct{}{} })
	tests := []struct {
		name, config, onError string
		body                  string
		hdr                   []string
		check                 func(t *testing.T, status int, body string)
	}{
		{"replace every event", `{"chunk":"replace_upper"}`, "fail_closed", chatStream, nil, func(t *testing.T, status int, body string) {
			if got, done := sseText(t, []byte(body)); got != strings.ToUpper(text) || !done {
				t.Errorf("text %q done=%v", got, done)
			}
		}},
		{"replace the whole non-streamed reply", `{"chunk":"replace_upper"}`, "fail_closed", chatOnce, nil, func(t *testing.T, status int, body string) {
			var r struct {
				Choices []struct {
					Message struct{ Content string } `json:"message"`
				} `json:"choices"`
			}
			if err := json.Unmarshal([]byte(body), &r); err != nil || len(r.Choices) != 1 || r.Choices[0].Message.Content != strings.ToUpper(text) {
				t.Errorf("reply %s (%v)", body, err)
			}
		}},
		{"hold everything: released in order at the end", `{"chunk":"hold"}`, "fail_closed", chatStream, nil, func(t *testing.T, status int, body string) {
			if got, done := sseText(t, []byte(body)); got != text || !done {
				t.Errorf("text %q done=%v", got, done)
			}
		}},
		{"stop with a correction", `{"chunk":"stop:[withheld]","finish_reason":"content_filter"}`, "fail_closed", chatStream, []string{"X-Mock-Inter-Token", "20ms"}, func(t *testing.T, status int, body string) {
			got, done := sseText(t, []byte(body))
			if got != "[withheld]" || !done || !strings.Contains(body, `"finish_reason":"content_filter"`) {
				t.Errorf("body %q", body)
			}
			select {
			case <-closed:
			case <-time.After(2 * time.Second):
				t.Error("the upstream was not canceled after STOP")
			}
		}},
		{"a trap mid-stream ends the stream with an error event", `{"chunk":"trap"}`, "fail_closed", chatStream, nil, func(t *testing.T, status int, body string) {
			if !strings.Contains(body, `"code":"plugin_failed"`) || strings.Contains(body, "[DONE]") {
				t.Errorf("body %q", body)
			}
		}},
		{"a trap mid-stream fails open", `{"chunk":"trap"}`, "fail_open", chatStream, nil, func(t *testing.T, status int, body string) {
			if got, done := sseText(t, []byte(body)); got != text || !done {
				t.Errorf("text %q done=%v", got, done)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, gw := startGateway(t, withPlugins(t, policy(mockURL, ""), tt.onError, tt.config), nil)
			status, _, body := post(t, gw+"/v1/chat/completions", tt.body, tt.hdr...)
			if status != 200 {
				t.Fatalf("status %d: %s", status, body)
			}
			tt.check(t, status, string(body))
		})
	}
}

// TestHotReloadUnderLoad reloads the policy repeatedly while clients send
// requests and streams: no request fails, and once a reload is done every
// new request sees the new plugin config.
func TestHotReloadUnderLoad(t *testing.T) {
	_, mockURL := startMock(t, mockllm.Config{Tokens: 5, InterToken: 2 * time.Millisecond})
	gen := func(i int) string {
		return withPlugins(t, policy(mockURL, ""), "fail_closed", fmt.Sprintf(`{"request":"set_response_header:X-Gen=%d","chunk":"continue"}`, i))
	}
	srv, gw := startGateway(t, gen(0), nil)

	ctx, stop := context.WithCancel(context.Background())
	var ok, failed atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for ctx.Err() == nil {
				body := chatOnce
				if w%2 == 0 {
					body = chatStream
				}
				resp, err := http.Post(gw+"/v1/chat/completions", "application/json", strings.NewReader(body))
				if err != nil {
					failed.Add(1)
					continue
				}
				b := make([]byte, 64<<10)
				n, _ := readFull(resp.Body, b)
				resp.Body.Close()
				if resp.StatusCode != 200 || (w%2 == 0 && !strings.Contains(string(b[:n]), "[DONE]")) {
					failed.Add(1)
					continue
				}
				ok.Add(1)
			}
		}(w)
	}
	const reloads = 5
	for i := 1; i <= reloads; i++ {
		time.Sleep(150 * time.Millisecond)
		p, err := config.Parse([]byte(gen(i)), nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := srv.Reload(p); err != nil {
			t.Fatal(err)
		}
		_, hdr, _ := post(t, gw+"/v1/chat/completions", chatOnce)
		if got := hdr.Get("X-Gen"); got != fmt.Sprint(i) {
			t.Errorf("after reload %d, X-Gen = %q", i, got)
		}
	}
	// A policy whose plugin refuses its config leaves the old one serving.
	bad := withPlugins(t, policy(mockURL, ""), "fail_closed", `{"configure":"fail","fail_message":"nope"}`)
	p, err := config.Parse([]byte(bad), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Reload(p); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("bad reload: %v", err)
	}
	time.Sleep(150 * time.Millisecond)
	stop()
	wg.Wait()
	if _, hdr, _ := post(t, gw+"/v1/chat/completions", chatOnce); hdr.Get("X-Gen") != fmt.Sprint(reloads) {
		t.Errorf("after a failed reload X-Gen = %q, want the last good %d", hdr.Get("X-Gen"), reloads)
	}
	t.Logf("%d requests during %d reloads, %d failed", ok.Load(), reloads, failed.Load())
	if failed.Load() != 0 || ok.Load() < 50 {
		t.Errorf("ok=%d failed=%d", ok.Load(), failed.Load())
	}
	if srv.Reloads() != reloads {
		t.Errorf("reloads = %d", srv.Reloads())
	}
	// The admin API's view of the policy: the generation of the last
	// good reload, the failed one's error, the plugin and its counters.
	info := srv.PolicyInfo()
	if info.Generation != reloads+1 || info.Reloads != reloads || info.LastReloadError == nil ||
		!strings.Contains(*info.LastReloadError, "nope") || info.Store != "memory" || info.LoadedAt.IsZero() {
		t.Errorf("policy info %+v", info)
	}
	if len(info.Plugins) != 1 || info.Plugins[0].Calls == 0 || info.Plugins[0].Instances < 1 || len(info.Plugins[0].Phases) == 0 {
		t.Errorf("plugins %+v", info.Plugins)
	}
}

func readFull(r interface{ Read([]byte) (int, error) }, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := r.Read(b[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}
