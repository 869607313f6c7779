package e2e

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/config"
	"github.com/tollgate/tollgate/gateway/internal/proxy"
	"github.com/tollgate/tollgate/gateway/internal/testkit/mockllm"
)

// moderationPlugin is the moderation plugin's policy entry: its config
// (JSON) and its callout grant (YAML flow), under on_error.
func moderationPlugin(t *testing.T, onError, pluginConfig, grant string) string {
	return fmt.Sprintf(`
  - name: moderation
    path: %s
    on_error: %s
    config: %s
    callout: %s
`, pluginPath(t, "moderation"), onError, pluginConfig, grant)
}

// moderationGateway runs a memory-store policy with the moderation plugin
// in-process, its logs kept for the test to read.
func moderationGateway(t *testing.T, mockURL, plugins string) (*proxy.Server, string, *syncWriter, *strings.Builder) {
	t.Helper()
	pol := policy(mockURL, "plugins:"+plugins)
	p, err := config.Parse([]byte(pol), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatalf("policy: %v\n%s", err, pol)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var buf strings.Builder
	logs := &syncWriter{w: &buf}
	srv, err := proxy.New(p, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo})))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { srv.Serve(ln); close(done) }()
	t.Cleanup(func() {
		srv.Shutdown(0, 2*time.Second)
		<-done
		if t.Failed() {
			logs.mu.Lock()
			t.Logf("gateway logs:\n%s", tail(buf.String(), 4000))
			logs.mu.Unlock()
		}
	})
	return srv, "http://" + ln.Addr().String(), logs, &buf
}

func chatBody(text string, stream bool) string {
	return fmt.Sprintf(`{"model":"mock-1","stream":%v,"messages":[{"role":"system","content":"be nice [violence]"},{"role":"user","content":"earlier [hate]"},{"role":"assistant","content":"ok"},{"role":"user","content":%q}]}`, stream, text)
}

// moderationCalls counts the mock's classifier calls.
func moderationCalls(m *mockllm.Server) *atomic.Int64 {
	var n atomic.Int64
	m.SetOnRequest(func(h http.Header, body []byte) {
		if strings.Contains(string(body), `"input"`) && strings.Contains(string(body), `"model":"omni-moderation-latest"`) {
			n.Add(1)
		}
	})
	return &n
}

// TestModerationRequests: the last user message goes to mockllm's
// classifier through the host's call-out; a flagged one is refused with
// content_flagged naming its categories, a clean one served, a verdict
// reused from the cache; a classifier that is slow, down, failing or
// answering garbage fails the request under fail_closed and lets it
// through under fail_open, each counted by outcome.
func TestModerationRequests(t *testing.T) {
	mock, mockURL := startMock(t, mockllm.Config{Tokens: 3})
	calls := moderationCalls(mock)
	endpoint := mockURL + "/v1/moderations"
	cfg := fmt.Sprintf(`{"endpoint": %q, "cache_ttl": "1m"}`, endpoint)
	grant := fmt.Sprintf(`{allow: [%q], timeout: 400ms}`, endpoint)
	srvClosed, closed, _, _ := moderationGateway(t, mockURL, moderationPlugin(t, "fail_closed", cfg, grant))
	_, open, _, _ := moderationGateway(t, mockURL, moderationPlugin(t, "fail_open", cfg, grant))

	t.Run("clean", func(t *testing.T) {
		for _, gw := range []string{closed, open} {
			status, _, body := post(t, gw+"/v1/chat/completions", chatBody("what is the weather", false))
			if status != 200 || !strings.Contains(string(body), "tok0") {
				t.Fatalf("%s: %d %s", gw, status, body)
			}
		}
	})
	t.Run("flagged", func(t *testing.T) {
		for _, gw := range []string{closed, open} {
			status, _, body := post(t, gw+"/v1/chat/completions", chatBody("I will [violence] and [self-harm/intent]", false))
			e := decodeError(t, body).Error
			if status != 400 || e.Type != "invalid_request_error" || e.Code == nil || *e.Code != "content_flagged" ||
				!strings.Contains(e.Message, "self-harm/intent") || !strings.Contains(e.Message, "violence") {
				t.Fatalf("%s: %d %s", gw, status, body)
			}
		}
	})
	t.Run("only the last user message", func(t *testing.T) {
		// The system prompt and the earlier user turn carry triggers; the
		// last user message does not.
		status, _, body := post(t, closed+"/v1/chat/completions", chatBody("a clean question", true))
		if text, done := sseText(t, body); status != 200 || !done || text != "tok0 tok1 tok2 " {
			t.Fatalf("%d %s", status, body)
		}
	})
	t.Run("cache", func(t *testing.T) {
		metrics := srvClosed.MetricsHandler()
		before, cachedBefore := calls.Load(), metric(t, metrics, "tollgate_plugin_callouts_total", `outcome="cached"`)
		for range 3 {
			if status, _, body := post(t, closed+"/v1/chat/completions", chatBody("the same question, thrice", false)); status != 200 {
				t.Fatalf("%d %s", status, body)
			}
		}
		if got := calls.Load() - before; got != 1 {
			t.Errorf("the classifier was called %d times for one text, want 1", got)
		}
		if got := metric(t, metrics, "tollgate_plugin_callouts_total", `outcome="cached"`) - cachedBefore; got != 2 {
			t.Errorf("cached outcomes %v, want 2", got)
		}
	})
	faults := []struct{ name, fault, outcome string }{
		{"slow", "mock-moderation:slow=2s", "timeout"},
		{"error status", "mock-moderation:status=503", "error_status"},
		{"connection closed", "mock-moderation:close", "unavailable"},
		{"garbage", "mock-moderation:garbage", "ok"},
	}
	for _, f := range faults {
		t.Run(f.name, func(t *testing.T) {
			metrics := srvClosed.MetricsHandler()
			before := metric(t, metrics, "tollgate_plugin_callouts_total", `outcome="`+f.outcome+`"`)
			start := time.Now()
			status, _, body := post(t, closed+"/v1/chat/completions", chatBody("hello "+f.fault, false))
			e := decodeError(t, body).Error
			if status != 500 || e.Code == nil || *e.Code != "plugin_failed" {
				t.Errorf("fail_closed: %d %s", status, body)
			}
			if d := time.Since(start); d > 1500*time.Millisecond {
				t.Errorf("fail_closed answered after %v: the grant's timeout is 400ms", d)
			}
			if got := metric(t, metrics, "tollgate_plugin_callouts_total", `outcome="`+f.outcome+`"`) - before; got != 1 {
				t.Errorf("outcome %s counted %v times, want 1", f.outcome, got)
			}
			status, _, body = post(t, open+"/v1/chat/completions", chatBody("hello "+f.fault, false))
			if status != 200 || !strings.Contains(string(body), "tok0") {
				t.Errorf("fail_open: %d %s", status, body)
			}
		})
	}
	t.Run("down", func(t *testing.T) {
		down := "http://" + closedPort(t) + "/v1/moderations"
		_, gw, _, _ := moderationGateway(t, mockURL, moderationPlugin(t, "fail_closed",
			fmt.Sprintf(`{"endpoint": %q}`, down), fmt.Sprintf(`{allow: [%q]}`, down)))
		status, _, body := post(t, gw+"/v1/chat/completions", chatBody("hello", false))
		if e := decodeError(t, body).Error; status != 500 || e.Code == nil || *e.Code != "plugin_failed" {
			t.Errorf("%d %s", status, body)
		}
	})
	if got := metric(t, srvClosed.MetricsHandler(), "tollgate_plugin_callout_seconds_count", `plugin="moderation"`); got < 5 {
		t.Errorf("callout_seconds counted %v calls", got)
	}
}

// TestCalloutNotGranted: a classifier URL outside the plugin's grant, or a
// plugin without one, is refused before any I/O; the plugin fails (here
// fail_closed), and the gateway logs a warning naming the plugin and the
// URL without its query string.
func TestCalloutNotGranted(t *testing.T) {
	mock, mockURL := startMock(t, mockllm.Config{Tokens: 3})
	calls := moderationCalls(mock)
	endpoint := mockURL + "/v1/moderations?api-key=s3cret"
	tests := []struct{ name, grant string }{
		{"outside the prefixes", fmt.Sprintf(`{allow: [%q]}`, mockURL+"/v1/moderations/other")},
		{"another port", `{allow: ["http://127.0.0.1:1/v1/moderations"]}`},
		{"no grant", `null`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, gw, logs, buf := moderationGateway(t, mockURL, moderationPlugin(t, "fail_closed", fmt.Sprintf(`{"endpoint": %q}`, endpoint), tt.grant))
			status, _, body := post(t, gw+"/v1/chat/completions", chatBody("hello", false))
			if e := decodeError(t, body).Error; status != 500 || e.Code == nil || *e.Code != "plugin_failed" {
				t.Errorf("%d %s", status, body)
			}
			logs.mu.Lock()
			out := buf.String()
			logs.mu.Unlock()
			if !strings.Contains(out, "call-out refused") || !strings.Contains(out, "plugin=moderation") {
				t.Errorf("no warning naming the plugin:\n%s", out)
			}
			if strings.Contains(out, "s3cret") {
				t.Errorf("the log shows the URL's query string:\n%s", out)
			}
			if !strings.Contains(out, mockURL+"/v1/moderations") {
				t.Errorf("the warning does not name the URL:\n%s", out)
			}
			if got := metric(t, srv.MetricsHandler(), "tollgate_plugin_callouts_total", `outcome="denied",plugin="moderation"`); got != 1 {
				t.Errorf("denied counted %v times", got)
			}
		})
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("the classifier was called %d times", n)
	}
}

// TestModerationReplies: with check.reply a whole reply the classifier
// flags is replaced by the correction; with
// check.stream a stream is held until its end, then released whole or
// stopped with the correction, none of its text sent.
func TestModerationReplies(t *testing.T) {
	_, mockURL := startMock(t, mockllm.Config{Text: "A calm and friendly reply.", ChunkSize: 5})
	endpoint := mockURL + "/v1/moderations"
	cfg := fmt.Sprintf(`{"endpoint": %q, "check": {"request": false, "reply": true, "stream": true}, "correction": "[withheld]"}`, endpoint)
	_, gw, _, _ := moderationGateway(t, mockURL, moderationPlugin(t, "fail_closed", cfg, fmt.Sprintf(`{allow: [%q]}`, endpoint)))
	flagged := []string{mockllm.HeaderText, url.QueryEscape("You are [harassment] and I [violence=0.7] it.")}
	chat := func(stream bool, hdr ...string) (int, []byte) {
		status, _, body := post(t, gw+"/v1/chat/completions", chatBody("[violence] in the request is not checked", stream), hdr...)
		return status, body
	}

	status, body := chat(false)
	if status != 200 || !strings.Contains(string(body), "A calm and friendly reply.") || !strings.Contains(string(body), `"finish_reason":"stop"`) {
		t.Errorf("clean whole reply: %d %s", status, body)
	}
	status, body = chat(false, flagged...)
	if status != 200 || strings.Contains(string(body), "harassment") || !strings.Contains(string(body), `"content":"[withheld]"`) {
		t.Errorf("flagged whole reply: %d %s", status, body)
	}
	status, body = chat(true)
	if text, done := sseText(t, body); status != 200 || !done || text != "A calm and friendly reply." {
		t.Errorf("clean stream: %d %q %s", status, text, body)
	}
	status, body = chat(true, flagged...)
	text, done := sseText(t, body)
	if status != 200 || !done || text != "[withheld]" || !strings.Contains(string(body), `"finish_reason":"content_filter"`) {
		t.Errorf("flagged stream: %d %q %s", status, text, body)
	}
}

// TestModerationCallLog: requests refused by the classifier, served, and
// failed by it under fail_closed, concurrently, each leave exactly one
// call-log row in Postgres with the status the client got.
func TestModerationCallLog(t *testing.T) {
	w := newBudgetWorld(t, 1_000_000_000)
	mock, mockURL := startMock(t, mockllm.Config{Tokens: 3})
	calls := moderationCalls(mock)
	endpoint := mockURL + "/v1/moderations"
	pol := w.policy(t, mockURL, `{}`, "") + moderationPlugin(t, "fail_closed",
		fmt.Sprintf(`{"endpoint": %q, "cache_ttl": "0s"}`, endpoint), fmt.Sprintf(`{allow: [%q], timeout: 300ms}`, endpoint))
	_, gw := w.gateway(t, pol)

	const n = 48
	texts := []struct {
		text   string
		status int
	}{
		{"a clean question", 200},
		{"a [hate] question", 400},
		{"a slow one mock-moderation:slow=1s", 500},
		{"a failing one mock-moderation:status=502", 500},
	}
	var wg sync.WaitGroup
	var wrong atomic.Int64
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tc := texts[i%len(texts)]
			status, _, body := w.chat(t, gw, chatBody(fmt.Sprintf("%s #%d", tc.text, i), i%2 == 0))
			if status != tc.status {
				wrong.Add(1)
				t.Errorf("%q: %d %s", tc.text, status, body)
			}
		}()
	}
	wg.Wait()
	w.waitRows(t, n)
	rows := statusCounts(t, w)
	want := map[int]int64{200: n / 4, 400: n / 4, 500: n / 2}
	for st, c := range want {
		if rows[st] != c {
			t.Errorf("call_log: %d rows of status %d, want %d (all: %v)", rows[st], st, c, rows)
		}
	}
	if got := calls.Load(); got != n {
		t.Errorf("the classifier was called %d times, want %d", got, n)
	}
}

// statusCounts counts acme's call_log rows by status.
func statusCounts(t *testing.T, w *budgetWorld) map[int]int64 {
	t.Helper()
	return queryMap[int, int64](t, w.dsn, `SELECT status, count(*) FROM call_log WHERE tenant_id = 'acme' GROUP BY status`)
}

// TestModerationAnthropicMessages: the native Messages API's last user
// message is checked the same way (the plugin reads the conversation, not
// the wire format), a refusal is in Anthropic's error shape, and the
// classifier gets the credential the grant reads from the environment
// (the mock wants the upstream's key on every route).
func TestModerationAnthropicMessages(t *testing.T) {
	mock, anthURL := startAnthropicMock(t, mockllm.Config{Text: "Fine."})
	var auth atomic.Value
	mock.SetOnRequest(func(h http.Header, body []byte) {
		if strings.Contains(string(body), `"model":"omni-moderation-latest"`) {
			auth.Store(h.Get("Authorization"))
		}
	})
	endpoint := anthURL + "/v1/moderations"
	plugins := moderationPlugin(t, "fail_closed", fmt.Sprintf(`{"endpoint": %q}`, endpoint),
		fmt.Sprintf(`{allow: [%q], headers_env: {Authorization: MODERATION_AUTH}}`, endpoint))
	vars := map[string]string{"ANTHROPIC_API_KEY": anthropicKey, "MODERATION_AUTH": "Bearer " + anthropicKey}
	gw, logs := startLoggingGateway(t, anthropicPolicy(anthURL, anthURL, "", "plugins:"+plugins), vars)
	msgs := func(last string) string {
		return fmt.Sprintf(`{"model":"claude-x","max_tokens":9,"system":"[hate] in the system prompt","messages":[`+
			`{"role":"user","content":"[violence] earlier"},{"role":"assistant","content":"ok"},`+
			`{"role":"user","content":[{"type":"text","text":%q}]}]}`, last)
	}

	status, _, body := post(t, gw+"/v1/messages", msgs("a clean question"))
	if status != 200 || !strings.Contains(string(body), "Fine.") {
		t.Fatalf("clean: %d %s", status, body)
	}
	if got, _ := auth.Load().(string); got != "Bearer "+anthropicKey {
		t.Errorf("the classifier got Authorization %q", got)
	}
	status, _, body = post(t, gw+"/v1/messages", msgs("I [self-harm/intent]"))
	if status != 400 || !strings.Contains(string(body), `"type":"error"`) || !strings.Contains(string(body), "self-harm/intent") {
		t.Errorf("flagged: %d %s", status, body)
	}
	if strings.Contains(logs.String(), anthropicKey) {
		t.Errorf("the log shows the credential:\n%s", logs.String())
	}
}
