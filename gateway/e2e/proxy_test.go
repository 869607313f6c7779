package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/tollgate/tollgate/gateway/internal/testkit/mockllm"
)

// cannedEvents is an upstream stream with the shapes real servers send:
// a comment, CRLF line ends, event/id fields, escapes, a usage-only chunk.
var cannedEvents = []string{
	": keep-alive\n\n",
	`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}],"usage":null}` + "\n\n",
	`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"Hel\u006co \"w\""},"finish_reason":null}],"usage":null}` + "\r\n\r\n",
	"event: message\nid: 7\n" + `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"orld ✓"},"finish_reason":null}],"usage":null}` + "\n\n",
	`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}` + "\n\n",
	`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":3,"total_tokens":8}}` + "\n\n",
	"data: [DONE]\n\n",
}

const usageEvent = 5 // index of the usage-only chunk in cannedEvents

const cannedJSON = `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi \u2713"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}` + "\n"

// cannedUpstream replies with cannedEvents (flushed one by one) to streaming
// requests and cannedJSON otherwise, recording each request body.
func cannedUpstream(t *testing.T, bodies chan<- []byte) string {
	return startUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if bodies != nil {
			bodies <- b
		}
		if !strings.Contains(string(b), `"stream":true`) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, cannedJSON)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range cannedEvents {
			io.WriteString(w, ev)
			w.(http.Flusher).Flush()
		}
	})
}

func TestStreamPassThroughByteForByte(t *testing.T) {
	bodies := make(chan []byte, 4)
	_, gw := startGateway(t, policy(cannedUpstream(t, bodies), ""), nil)
	all := strings.Join(cannedEvents, "")
	withoutUsage := strings.Join(append(append([]string{}, cannedEvents[:usageEvent]...), cannedEvents[usageEvent+1:]...), "")

	tests := []struct {
		name       string
		body       string
		want       string
		wantUpBody func(map[string]any) error
	}{
		{
			name: "client asked for usage: every byte as the upstream sent it",
			body: `{"model":"mock-1","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`,
			want: all,
		},
		{
			name: "client did not ask: usage requested upstream, usage chunk stripped, rest byte for byte",
			body: `{"model":"mock-1","stream":true,"messages":[{"role":"user","content":"hi"}]}`,
			want: withoutUsage,
		},
		{
			name: "include_usage false: set upstream, stripped for the client",
			body: `{"model":"mock-1","stream":true,"stream_options":{"include_usage":false},"messages":[{"role":"user","content":"hi"}]}`,
			want: withoutUsage,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, hdr, got := post(t, gw+"/v1/chat/completions", tt.body)
			if status != 200 {
				t.Fatalf("status %d: %s", status, got)
			}
			if ct := hdr.Get("Content-Type"); ct != "text/event-stream" {
				t.Errorf("content-type %q", ct)
			}
			if string(got) != tt.want {
				t.Errorf("stream differs\n got: %q\nwant: %q", got, tt.want)
			}
			up := <-bodies
			var m map[string]any
			if err := json.Unmarshal(up, &m); err != nil {
				t.Fatalf("upstream got invalid JSON %q: %v", up, err)
			}
			so, _ := m["stream_options"].(map[string]any)
			if so["include_usage"] != true {
				t.Errorf("upstream was not asked for usage: %s", up)
			}
		})
	}
}

func TestNonStreamPassThroughByteForByte(t *testing.T) {
	bodies := make(chan []byte, 1)
	_, gw := startGateway(t, policy(cannedUpstream(t, bodies), ""), nil)
	req := `{"model":"mock-1","messages":[{"role":"user","content":"hi"}],"temperature":0.2,"extra_field":{"kept":[1,2]}}`
	status, hdr, got := post(t, gw+"/v1/chat/completions", req)
	if status != 200 || string(got) != cannedJSON {
		t.Fatalf("status %d body %q, want 200 %q", status, got, cannedJSON)
	}
	if hdr.Get("Content-Type") != "application/json" {
		t.Errorf("content-type %q", hdr.Get("Content-Type"))
	}
	if up := <-bodies; string(up) != req {
		t.Errorf("upstream body changed:\n got %s\nwant %s", up, req)
	}
}

func TestMockStreamsThroughGateway(t *testing.T) {
	_, mockURL := startMock(t, mockllm.Config{Tokens: 30})
	_, gw := startGateway(t, policy(mockURL, ""), nil)
	for _, ep := range []string{"/v1/chat/completions", "/v1/completions"} {
		body := `{"model":"mock-1","stream":true,"messages":[{"role":"user","content":"hi"}],"prompt":"hi"}`
		status, _, got := post(t, gw+ep, body)
		if status != 200 {
			t.Fatalf("%s: status %d: %s", ep, status, got)
		}
		var want strings.Builder
		for i := 0; i < 30; i++ {
			fmt.Fprintf(&want, "tok%d ", i)
		}
		text := sseTextAny(t, got)
		if text != want.String() {
			t.Errorf("%s: text %q, want %q", ep, text, want.String())
		}
		if strings.Contains(string(got), `"choices":[]`) {
			t.Errorf("%s: usage chunk reached a client that did not ask for it", ep)
		}
		if !strings.HasSuffix(string(got), "data: [DONE]\n\n") {
			t.Errorf("%s: stream did not end with [DONE]", ep)
		}
	}
}

// sseTextAny reads chat deltas ("content") and completion chunks ("text").
func sseTextAny(t *testing.T, body []byte) string {
	text, _ := sseText(t, body)
	if text != "" {
		return text
	}
	var b strings.Builder
	for _, line := range strings.Split(string(body), "\n") {
		if data, ok := strings.CutPrefix(line, "data: "); ok {
			b.WriteString(jsonString(data, `"text":`))
		}
	}
	return b.String()
}

func TestEmbeddingsAndModels(t *testing.T) {
	_, mockURL := startMock(t, mockllm.Config{EmbeddingDims: 4})
	_, gw := startGateway(t, policy(mockURL, "", "mock-1", "mock-2", "emb-*"), nil)
	status, _, got := post(t, gw+"/v1/embeddings", `{"model":"emb-small","input":["a","b"]}`)
	if status != 200 {
		t.Fatalf("status %d: %s", status, got)
	}
	var emb struct {
		Data []struct {
			Embedding []float64 `json:"embedding"`
		} `json:"data"`
	}
	if err := json.Unmarshal(got, &emb); err != nil || len(emb.Data) != 2 || len(emb.Data[0].Embedding) != 4 {
		t.Fatalf("embeddings reply %s (err %v)", got, err)
	}

	resp, err := http.Get(gw + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Object string `json:"object"`
		Data   []struct {
			ID     string `json:"id"`
			Object string `json:"object"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	if list.Object != "list" || len(list.Data) != 2 || list.Data[0].ID != "mock-1" || list.Data[1].ID != "mock-2" || list.Data[0].Object != "model" {
		t.Errorf("models = %+v, want mock-1, mock-2 (patterns not listed)", list)
	}
}

func TestRoutingExactAndGlob(t *testing.T) {
	var mu sync.Mutex
	hits := map[string][]string{}
	upstream := func(name string) string {
		return startUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			var req struct{ Model string }
			json.NewDecoder(r.Body).Decode(&req)
			mu.Lock()
			hits[name] = append(hits[name], req.Model)
			mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"served_by":%q}`, name)
		})
	}
	a, b, c := upstream("a"), upstream("b"), upstream("c")
	pol := fmt.Sprintf(`
version: 1
upstreams:
  - {name: a, base_url: "%s/v1"}
  - {name: b, base_url: "%s/v1"}
  - {name: c, base_url: "%s/v1"}
routes:
  - {models: ["gpt-4o-mini", "llama-*"], upstream: a}
  - {models: ["gpt-4o*"], upstream: b}
  - {models: ["claude-?-haiku", "*"], upstream: c}
`, a, b, c)
	_, gw := startGateway(t, pol, nil)
	tests := []struct{ model, want string }{
		{"gpt-4o-mini", "a"},    // exact wins over an earlier-listed glob
		{"llama-3.1-70b", "a"},  // glob
		{"gpt-4o", "b"},         // glob matching the empty tail
		{"gpt-4o-2024-08", "b"}, // glob
		{"claude-3-haiku", "c"}, // ? glob
		{"anything-else", "c"},  // catch-all
	}
	for _, tt := range tests {
		status, _, got := post(t, gw+"/v1/chat/completions", fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"x"}]}`, tt.model))
		if status != 200 || string(got) != fmt.Sprintf(`{"served_by":%q}`, tt.want) {
			t.Errorf("model %s: %d %s, want served by %s", tt.model, status, got, tt.want)
		}
	}
}

func TestUpstreamCredentialsAndHeaders(t *testing.T) {
	seen := make(chan http.Header, 1)
	up := startUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header.Clone()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{}`)
	})
	_, gw := startGateway(t, policy(up, "    api_key_env: UP_KEY\n    headers: {OpenAI-Organization: org-1}"), map[string]string{"UP_KEY": "sk-upstream"})
	status, hdr, _ := post(t, gw+"/v1/chat/completions", `{"model":"mock-1","messages":[{"role":"user","content":"x"}]}`,
		"Authorization", "Bearer client-key", "Cookie", "session=1", "X-Mock-TTFT", "1ms", "X-Internal-Secret", "s", "X-Request-Id", "client-req-1")
	if status != 200 {
		t.Fatalf("status %d", status)
	}
	h := <-seen
	checks := []struct{ name, want string }{
		{"Authorization", "Bearer sk-upstream"},
		{"Openai-Organization", "org-1"},
		{"Cookie", ""},
		{"X-Mock-Ttft", "1ms"},
		{"X-Internal-Secret", ""},
		{"X-Request-Id", "client-req-1"},
	}
	for _, c := range checks {
		if got := h.Get(c.name); got != c.want {
			t.Errorf("upstream header %s = %q, want %q", c.name, got, c.want)
		}
	}
	if got := hdr.Get("X-Request-Id"); got != "client-req-1" {
		t.Errorf("response X-Request-Id = %q", got)
	}
	// A malformed client id is replaced by a generated one.
	_, hdr, _ = post(t, gw+"/v1/chat/completions", `{"model":"mock-1","messages":[{"role":"user","content":"x"}]}`, "X-Request-Id", "bad id\twith spaces")
	<-seen
	if got := hdr.Get("X-Request-Id"); !strings.HasPrefix(got, "req_") {
		t.Errorf("generated X-Request-Id = %q", got)
	}
}
