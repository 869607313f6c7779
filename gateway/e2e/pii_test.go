package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/tollgate/tollgate/gateway/internal/proxy"
	"github.com/tollgate/tollgate/gateway/internal/testkit/mockllm"
)

// The pii plugin (plugins/pii, built in) between a client and the mock
// model: what the upstream receives is read from the mock, what the client
// gets from the gateway's reply.

const (
	piiEmail  = "john.doe@example.com"
	piiPhone  = "+44 20 7946 0958"
	piiPrompt = "Please mail " + piiEmail + " or call " + piiPhone + " about order ORD-2024-000123."
)

// piiWorld is a mock that records the bodies it received by request id,
// and a gateway running the pii plugin with a config.
type piiWorld struct {
	url  string
	srv  *proxy.Server
	mock *mockllm.Server
	mu   sync.Mutex
	seen map[string]string // upstream bodies by X-Request-Id
}

func startPII(t *testing.T, config string) *piiWorld {
	t.Helper()
	mock, mockURL := startMock(t, mockllm.Config{})
	w := &piiWorld{mock: mock, seen: map[string]string{}}
	mock.SetOnRequest(func(h http.Header, body []byte) {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.seen[h.Get("X-Request-Id")] = string(body)
	})
	pol := policy(mockURL, "") + fmt.Sprintf("plugins:\n  - name: pii\n    builtin: pii\n    on_error: fail_closed\n    config: %s\n", config)
	w.srv, w.url = startGateway(t, pol, nil)
	return w
}

// upstream returns the body the mock received for request id, and whether
// it received one.
func (w *piiWorld) upstream(id string) (string, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	b, ok := w.seen[id]
	return b, ok
}

func piiBody(stream bool) string {
	return fmt.Sprintf(`{"model":"mock-1","stream":%v,"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":%q}]}`, stream, piiPrompt)
}

// send posts the prompt with the mock told to answer reply (cut at cuts
// when streamed) and returns the status, the reply's text and the raw body.
func (w *piiWorld) send(t *testing.T, id string, stream bool, reply string, cuts ...int) (int, string, []byte) {
	t.Helper()
	status, _, raw := post(t, w.url+"/v1/chat/completions", piiBody(stream),
		"X-Request-Id", id, "X-Mock-Text", url.QueryEscape(reply), "X-Mock-Split", hbSplit(cuts...))
	if status != 200 {
		return status, "", raw
	}
	if stream {
		text, done := sseText(t, raw)
		if !done {
			t.Fatalf("%s: the stream did not end with [DONE]: %s", id, raw)
		}
		return status, text, raw
	}
	var v struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(raw, &v); err != nil || len(v.Choices) == 0 {
		t.Fatalf("%s: %v: %s", id, err, raw)
	}
	return status, v.Choices[0].Message.Content, raw
}

// checkMasked checks that the upstream got the prompt with placeholders
// and none of the data.
func (w *piiWorld) checkMasked(t *testing.T, id string) {
	t.Helper()
	up, ok := w.upstream(id)
	if !ok {
		t.Fatalf("%s: the upstream received nothing", id)
	}
	if strings.Contains(up, piiEmail) || strings.Contains(up, "7946") {
		t.Fatalf("%s: the upstream saw the data: %s", id, up)
	}
	want := "Please mail [EMAIL_1] or call [PHONE_1] about order ORD-2024-000123."
	if !strings.Contains(up, want) || !strings.Contains(up, "Be brief.") {
		t.Fatalf("%s: the upstream received %s, want the prompt %q", id, up, want)
	}
}

// TestPIIRedact: the upstream never sees the data, and the client gets the
// reply as the model wrote it, placeholders included.
func TestPIIRedact(t *testing.T) {
	t.Parallel() // checks no time (see the package doc)
	w := startPII(t, `{mode: redact}`)
	reply := "I will mail [EMAIL_1] today."
	for _, stream := range []bool{false, true} {
		id := fmt.Sprintf("redact-%v", stream)
		status, text, raw := w.send(t, id, stream, reply, 9, 14)
		if status != 200 || text != reply {
			t.Fatalf("%s: status %d, text %q: %s", id, status, text, raw)
		}
		w.checkMasked(t, id)
	}
}

// TestPIIMaskAndRestore: the upstream sees placeholders; the client gets
// the originals back, whole and streamed, wherever the stream cuts the
// placeholders (every offset across them, and in three events).
func TestPIIMaskAndRestore(t *testing.T) {
	w := startPII(t, `{mode: mask-and-restore}`)
	reply := "Done: mailed [EMAIL_1] and called [PHONE_1][EMAIL_1]."
	want := "Done: mailed " + piiEmail + " and called " + piiPhone + piiEmail + "."
	status, text, raw := w.send(t, "whole", false, reply)
	if status != 200 || text != want {
		t.Fatalf("whole: status %d, text %q: %s", status, text, raw)
	}
	w.checkMasked(t, "whole")
	start := strings.Index(reply, "[")
	for cut := start; cut <= len(reply)-1; cut++ {
		id := fmt.Sprintf("stream-%d", cut)
		if status, text, raw := w.send(t, id, true, reply, cut); status != 200 || text != want {
			t.Fatalf("%s: status %d, text %q: %s", id, status, text, raw)
		}
		w.checkMasked(t, id)
	}
	for i, cuts := range [][]int{{start + 1, start + 3}, {start + 6, start + 8, start + 30}, {start + 4, start + 24, start + 25}} {
		id := fmt.Sprintf("multi-%d", i)
		if status, text, raw := w.send(t, id, true, reply, cuts...); status != 200 || text != want {
			t.Fatalf("%s: status %d, text %q: %s", id, status, text, raw)
		}
	}
	// A placeholder the request did not issue is left as the model wrote it.
	if _, text, _ := w.send(t, "unknown", true, "See [EMAIL_7].", 6); text != "See [EMAIL_7]." {
		t.Fatalf("unknown placeholder: %q", text)
	}
}

// TestPIIReject: the client gets an OpenAI-style 400 naming the kinds,
// never the data, and nothing goes upstream.
func TestPIIReject(t *testing.T) {
	w := startPII(t, `{mode: reject, detectors: [email, phone, card]}`)
	for _, stream := range []bool{false, true} {
		id := fmt.Sprintf("reject-%v", stream)
		status, _, raw := w.send(t, id, stream, "unused")
		var v struct {
			Error struct {
				Type, Code, Message string
			} `json:"error"`
		}
		if err := json.Unmarshal(raw, &v); err != nil || status != 400 || v.Error.Code != "pii_detected" || v.Error.Type != "invalid_request_error" {
			t.Fatalf("%s: status %d: %s", id, status, raw)
		}
		if !strings.Contains(v.Error.Message, "(email, phone)") || strings.Contains(string(raw), piiEmail) {
			t.Fatalf("%s: message %q", id, v.Error.Message)
		}
		if _, ok := w.upstream(id); ok {
			t.Fatalf("%s: the request went upstream", id)
		}
	}
	// A clean request passes.
	status, _, raw := post(t, w.url+"/v1/chat/completions", `{"model":"mock-1","messages":[{"role":"user","content":"Release 1.2.3 on 2024-01-15"}]}`,
		"X-Request-Id", "clean")
	if status != 200 {
		t.Fatalf("clean: %d %s", status, raw)
	}
}

// TestPIIExamplePolicy serves policies/pii.yaml as it is: the curl line in
// its header gets the address back in place of the mock's placeholder.
func TestPIIExamplePolicy(t *testing.T) {
	data, err := os.ReadFile(repoRoot(t) + "/policies/pii.yaml")
	if err != nil {
		t.Fatal(err)
	}
	mock, mockURL := startMock(t, mockllm.Config{})
	var upstream string
	var mu sync.Mutex
	mock.SetOnRequest(func(_ http.Header, body []byte) { mu.Lock(); upstream = string(body); mu.Unlock() })
	_, gw := startGateway(t, string(data), map[string]string{"TOLLGATE_MOCK_URL": mockURL + "/v1"})
	status, _, raw := post(t, gw+"/v1/chat/completions",
		`{"model":"mock-1","stream":true,"messages":[{"role":"user","content":"mail jane@example.com"}]}`,
		"X-Mock-Text", "I%20will%20write%20to%20%5BEMAIL_1%5D.")
	text, done := sseText(t, raw)
	if status != 200 || !done || text != "I will write to jane@example.com." {
		t.Fatalf("status %d, text %q: %s", status, text, raw)
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(upstream, `"mail [EMAIL_1]"`) {
		t.Fatalf("the upstream received %s", upstream)
	}
}

// TestPIIAnthropic: POST /v1/messages to an Anthropic upstream — the
// Messages API body is masked (the system prompt, not scanned by
// default, is left alone) and the reply, streamed with the placeholder cut
// across deltas or whole, comes back with the address.
func TestPIIAnthropic(t *testing.T) {
	mock, anthURL := startAnthropicMock(t, mockllm.Config{})
	seen := recordRequests(mock)
	pol := anthropicPolicy(anthURL, anthURL, "", "") + "plugins:\n  - name: pii\n    builtin: pii\n    config: {mode: mask-and-restore}\n"
	_, gw := startGateway(t, pol, anthropicVars)
	reply := "Sure: [EMAIL_1]."
	want := "Sure: " + piiEmail + "."
	for _, stream := range []bool{true, false} {
		body := fmt.Sprintf(`{"model":"claude-x","max_tokens":99,"stream":%v,"system":"Escalate to boss@example.com",`+
			`"messages":[{"role":"user","content":[{"type":"text","text":"I am %s"}]}]}`, stream, piiEmail)
		status, _, raw := post(t, gw+"/v1/messages", body, "X-Mock-Text", url.QueryEscape(reply), "X-Mock-Split", "9,12")
		if status != 200 {
			t.Fatalf("stream %v: %d %s", stream, status, raw)
		}
		var text string
		if stream {
			text = readAnthropicStream(t, raw).text
		} else {
			var m struct {
				Content []struct{ Text string } `json:"content"`
			}
			if err := json.Unmarshal(raw, &m); err != nil || len(m.Content) == 0 {
				t.Fatalf("%v: %s", err, raw)
			}
			text = m.Content[0].Text
		}
		if text != want {
			t.Fatalf("stream %v: %q, want %q\n%s", stream, text, want, raw)
		}
		up := <-seen
		if strings.Contains(string(up.body), piiEmail) || !strings.Contains(string(up.body), `I am [EMAIL_1]`) ||
			!strings.Contains(string(up.body), "boss@example.com") {
			t.Fatalf("stream %v: the upstream received %s", stream, up.body)
		}
	}
}

// TestPIISkipsCleanReplies: a request with nothing to restore takes the
// plugin out of its reply (skip_phases): the plugin is called once, in the
// request phase, however many events the reply has, and a placeholder-like
// reply goes out as written. A masked request's reply calls it per event.
func TestPIISkipsCleanReplies(t *testing.T) {
	w := startPII(t, `{mode: mask-and-restore}`)
	m := httptest.NewServer(w.srv.MetricsHandler())
	defer m.Close()
	const series = `tollgate_plugin_calls_total{plugin="pii"}`
	calls := func() float64 {
		body, err := httpGet(m.URL)
		if err != nil {
			t.Fatal(err)
		}
		return metricValues(t, body)[series]
	}
	before := calls()
	reply := "See [EMAIL_1] there."
	status, _, raw := post(t, w.url+"/v1/chat/completions", `{"model":"mock-1","stream":true,"messages":[{"role":"user","content":"Release 1.2.3"}]}`,
		"X-Mock-Text", url.QueryEscape(reply), "X-Mock-Split", "5,8,12")
	if text, _ := sseText(t, raw); status != 200 || text != reply {
		t.Fatalf("clean: %d %q", status, text)
	}
	if got := calls() - before; got != 1 {
		t.Fatalf("a clean request called the plugin %v times, want 1 (the request phase)", got)
	}
	before = calls()
	if status, text, raw := w.send(t, "masked", true, reply, 5, 8, 12); status != 200 || text != "See "+piiEmail+" there." {
		t.Fatalf("masked: %d %q %s", status, text, raw)
	}
	if got := calls() - before; got < 5 {
		t.Fatalf("a masked request called the plugin %v times, want the request and every event", got)
	}
}
