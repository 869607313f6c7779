package mockllm

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

// start runs a mock behind an httptest.Server and returns it with a client
// that does not share connections with other tests.
func start(t *testing.T, cfg Config) (*Server, *httptest.Server, *http.Client) {
	t.Helper()
	m := New(cfg)
	ts := httptest.NewServer(m)
	t.Cleanup(ts.Close)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return m, ts, &http.Client{Transport: tr}
}

// do sends a request and returns the response with its whole body (and the
// body read error, if any).
func do(t *testing.T, c *http.Client, method, url, body string, hdr map[string]string) (*http.Response, []byte, error) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, rerr := io.ReadAll(resp.Body)
	return resp, b, rerr
}

// apiError is the decoded OpenAI-style error body.
type apiError struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

func decodeError(t *testing.T, b []byte) apiError {
	t.Helper()
	var e apiError
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatalf("error body %q: %v", b, err)
	}
	if e.Error.Message == "" || e.Error.Param != nil {
		t.Fatalf("error body %q: want message and null param", b)
	}
	var keys map[string]map[string]json.RawMessage
	if err := json.Unmarshal(b, &keys); err != nil || len(keys["error"]) != 4 {
		t.Fatalf("error body %q: want exactly message,type,param,code", b)
	}
	return e
}

func TestNonStreamingChat(t *testing.T) {
	_, ts, c := start(t, Config{Tokens: 3})
	body := `{"model":"gpt-x","messages":[{"role":"system","content":"abcdefgh"},` +
		`{"role":"user","content":[{"type":"text","text":"abcd"}]},{"role":"assistant","content":null}]}`
	resp, b, err := do(t, c, "POST", ts.URL+"/v1/chat/completions", body, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("status %d err %v body %s", resp.StatusCode, err, b)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q", ct)
	}
	var got struct{ Created int64 }
	if err := json.Unmarshal(b, &got); err != nil || got.Created < time.Now().Add(-time.Minute).Unix() {
		t.Fatalf("created %d err %v", got.Created, err)
	}
	want := `{"id":"chatcmpl-mock-1","object":"chat.completion","created":` + strconv.FormatInt(got.Created, 10) +
		`,"model":"gpt-x","system_fingerprint":"fp_mock","choices":[{"index":0,"message":{"role":"assistant",` +
		`"content":"tok0 tok1 tok2 "},"logprobs":null,"finish_reason":"stop"}],` +
		`"usage":{"prompt_tokens":3,"completion_tokens":3,"total_tokens":6}}` + "\n"
	if string(b) != want {
		t.Errorf("body\n got %s\nwant %s", b, want)
	}
	if cl := resp.Header.Get("Content-Length"); cl != strconv.Itoa(len(want)) {
		t.Errorf("Content-Length = %q", cl)
	}
}

func TestNonStreamingVariants(t *testing.T) {
	type reply struct {
		ID      string
		Object  string
		Model   string
		Choices []struct {
			Text         *string
			Message      *struct{ Role, Content string }
			FinishReason string `json:"finish_reason"`
		}
		Usage struct {
			Prompt     int `json:"prompt_tokens"`
			Completion int `json:"completion_tokens"`
			Total      int `json:"total_tokens"`
		}
	}
	tests := []struct {
		name, path, body string
		cfg              Config
		hdr              map[string]string
		object, content  string
		finish           string
		prompt, compl    int
	}{
		{"chat default tokens", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
			Config{}, nil, "chat.completion", gen(16), "stop", 1, 16},
		{"chat max_tokens", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"héllo wörld!"}],"max_tokens":2}`,
			Config{Tokens: 5}, nil, "chat.completion", "tok0 tok1 ", "length", 3, 2},
		{"chat max_completion_tokens tighter", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":4,"max_completion_tokens":1}`,
			Config{Tokens: 5}, nil, "chat.completion", "tok0 ", "length", 1, 1},
		{"chat cap not reached", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":5}`,
			Config{Tokens: 5}, nil, "chat.completion", gen(5), "stop", 1, 5},
		{"chat text", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"x"}]}`,
			Config{Text: "Hello, \"wörld\"\n"}, nil, "chat.completion", "Hello, \"wörld\"\n", "stop", 1, 4},
		{"chat text capped", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":2}`,
			Config{Text: "abcdefghij", ChunkSize: 3}, nil, "chat.completion", "abcdef", "length", 1, 2},
		{"chat empty text header", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"x"}]}`,
			Config{}, map[string]string{HeaderText: ""}, "chat.completion", "", "stop", 1, 0},
		{"completion", "/v1/completions", `{"model":"davinci","prompt":"abcdefghijklmnop"}`,
			Config{Tokens: 2}, nil, "text_completion", "tok0 tok1 ", "stop", 4, 2},
		{"completion prompt array and tokens", "/v1/completions", `{"model":"m","prompt":["abcd","efgh"],"max_tokens":1}`,
			Config{Tokens: 2}, nil, "text_completion", "tok0 ", "length", 2, 1},
		{"completion token prompt", "/v1/completions", `{"model":"m","prompt":[1,2,3,4,5]}`,
			Config{Text: "ok"}, nil, "text_completion", "ok", "stop", 5, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ts, c := start(t, tc.cfg)
			resp, b, err := do(t, c, "POST", ts.URL+tc.path, tc.body, tc.hdr)
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("status %d err %v body %s", resp.StatusCode, err, b)
			}
			var r reply
			if err := json.Unmarshal(b, &r); err != nil {
				t.Fatal(err)
			}
			if r.Object != tc.object || r.Model != modelOf(tc.body) || len(r.Choices) != 1 {
				t.Fatalf("reply %s", b)
			}
			ch := r.Choices[0]
			var content string
			if tc.object == "chat.completion" {
				if ch.Message == nil || ch.Message.Role != "assistant" || ch.Text != nil || !strings.HasPrefix(r.ID, "chatcmpl-mock-") {
					t.Fatalf("reply %s", b)
				}
				content = ch.Message.Content
			} else {
				if ch.Text == nil || ch.Message != nil || !strings.HasPrefix(r.ID, "cmpl-mock-") {
					t.Fatalf("reply %s", b)
				}
				content = *ch.Text
			}
			if content != tc.content || ch.FinishReason != tc.finish {
				t.Errorf("content %q finish %q, want %q %q", content, ch.FinishReason, tc.content, tc.finish)
			}
			if r.Usage.Prompt != tc.prompt || r.Usage.Completion != tc.compl || r.Usage.Total != tc.prompt+tc.compl {
				t.Errorf("usage %+v, want prompt %d completion %d", r.Usage, tc.prompt, tc.compl)
			}
		})
	}
}

// modelOf extracts the "model" of a request body.
func modelOf(body string) string {
	var v struct{ Model string }
	_ = json.Unmarshal([]byte(body), &v)
	return v.Model
}

// gen is the generated text of n tokens.
func gen(n int) string {
	var sb strings.Builder
	for i := range n {
		sb.WriteString("tok" + strconv.Itoa(i) + " ")
	}
	return sb.String()
}

func TestEmbeddings(t *testing.T) {
	_, ts, c := start(t, Config{})
	type reply struct {
		Object string
		Data   []struct {
			Object    string
			Index     int
			Embedding json.RawMessage
		}
		Model string
		Usage struct {
			Prompt int `json:"prompt_tokens"`
			Total  int `json:"total_tokens"`
		}
	}
	vectors := func(t *testing.T, r reply, base64Format bool) [][]float32 {
		var out [][]float32
		for i, d := range r.Data {
			if d.Object != "embedding" || d.Index != i {
				t.Fatalf("data[%d] = %+v", i, d)
			}
			var v []float32
			if base64Format {
				var s string
				if err := json.Unmarshal(d.Embedding, &s); err != nil {
					t.Fatal(err)
				}
				v = decodeBase64Floats(t, s)
			} else {
				var nums []json.Number
				if err := json.Unmarshal(d.Embedding, &nums); err != nil {
					t.Fatal(err)
				}
				for _, n := range nums {
					f, err := strconv.ParseFloat(string(n), 32)
					if err != nil {
						t.Fatal(err)
					}
					v = append(v, float32(f))
				}
			}
			out = append(out, v)
		}
		return out
	}
	tests := []struct {
		name, body string
		inputs     []string
		dims       int
		tokens     int
		b64        bool
	}{
		{"string", `{"model":"e","input":"abcdefgh"}`, []string{"abcdefgh"}, 8, 2, false},
		{"array", `{"model":"e","input":["abcdefgh","hi"]}`, []string{"abcdefgh", "hi"}, 8, 3, false},
		{"dimensions", `{"model":"e","input":"abcdefgh","dimensions":4}`, []string{"abcdefgh"}, 4, 2, false},
		{"base64", `{"model":"e","input":["x","y"],"encoding_format":"base64"}`, []string{"x", "y"}, 8, 2, true},
		{"token array", `{"model":"e","input":[1,2,3]}`, []string{"[1,2,3]"}, 8, 3, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, b, err := do(t, c, "POST", ts.URL+"/v1/embeddings", tc.body, nil)
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("status %d err %v body %s", resp.StatusCode, err, b)
			}
			var r reply
			if err := json.Unmarshal(b, &r); err != nil {
				t.Fatal(err)
			}
			if r.Object != "list" || r.Model != "e" || r.Usage.Prompt != tc.tokens || r.Usage.Total != tc.tokens {
				t.Fatalf("reply %s", b)
			}
			got := vectors(t, r, tc.b64)
			if len(got) != len(tc.inputs) {
				t.Fatalf("%d vectors, want %d", len(got), len(tc.inputs))
			}
			for i, in := range tc.inputs {
				want := make([]float32, tc.dims)
				Embedding(want, in)
				var norm float64
				for j := range want {
					norm += float64(want[j]) * float64(want[j])
				}
				if norm < 0.999 || norm > 1.001 {
					t.Errorf("norm² %v", norm)
				}
				if len(got[i]) != tc.dims || !equalFloats(got[i], want) {
					t.Errorf("vector %d = %v, want %v", i, got[i], want)
				}
			}
			if len(got) == 2 && equalFloats(got[0], got[1]) {
				t.Error("different inputs gave equal vectors")
			}
		})
	}
	for _, bad := range []string{`{"model":"e","input":[]}`, `{"model":"e"}`, `{"model":"e","input":{}}`, `{"input":"x"}`, `{"model":"e","input":"x","encoding_format":"hex"}`} {
		resp, b, _ := do(t, c, "POST", ts.URL+"/v1/embeddings", bad, nil)
		if resp.StatusCode != 400 || decodeError(t, b).Error.Type != "invalid_request_error" {
			t.Errorf("%s: status %d body %s", bad, resp.StatusCode, b)
		}
	}
}

func decodeBase64Floats(t *testing.T, s string) []float32 {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(raw)%4 != 0 {
		t.Fatalf("base64 %q: %v", s, err)
	}
	out := make([]float32, len(raw)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return out
}

func equalFloats(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestModels(t *testing.T) {
	_, ts, c := start(t, Config{})
	resp, b, err := do(t, c, "GET", ts.URL+"/v1/models", "", nil)
	want := `{"object":"list","data":[{"id":"mock-1","object":"model","created":1700000000,"owned_by":"mock"},` +
		`{"id":"mock-2","object":"model","created":1700000000,"owned_by":"mock"}]}` + "\n"
	if err != nil || resp.StatusCode != 200 || string(b) != want {
		t.Fatalf("status %d err %v body %s", resp.StatusCode, err, b)
	}
	_, ts2, c2 := start(t, Config{Models: []string{"a\"b", "gpt-4o"}})
	_, b, _ = do(t, c2, "GET", ts2.URL+"/v1/models", "", nil)
	var list struct{ Data []struct{ ID string } }
	if err := json.Unmarshal(b, &list); err != nil || len(list.Data) != 2 || list.Data[0].ID != "a\"b" || list.Data[1].ID != "gpt-4o" {
		t.Fatalf("body %s err %v", b, err)
	}
	resp, b, _ = do(t, c2, "GET", ts2.URL+"/v1/models/gpt-4o", "", nil)
	if resp.StatusCode != 200 || string(b) != `{"id":"gpt-4o","object":"model","created":1700000000,"owned_by":"mock"}`+"\n" {
		t.Errorf("retrieve: %d %s", resp.StatusCode, b)
	}
	resp, b, _ = do(t, c2, "GET", ts2.URL+"/v1/models/nope", "", nil)
	if e := decodeError(t, b); resp.StatusCode != 404 || *e.Error.Code != "model_not_found" {
		t.Errorf("retrieve unknown: %d %s", resp.StatusCode, b)
	}
}

func TestErrors(t *testing.T) {
	tests := []struct {
		name, method, path, body string
		cfg                      Config
		hdr                      map[string]string
		status                   int
		typ, code, msgPart       string
	}{
		{"unknown path", "GET", "/v1/nope", "", Config{}, nil, 404, "invalid_request_error", "", "Invalid URL (GET /v1/nope)"},
		{"wrong method", "GET", "/v1/chat/completions", "", Config{}, nil, 404, "invalid_request_error", "", "Invalid URL (GET /v1/chat/completions)"},
		{"malformed json", "POST", "/v1/chat/completions", `{"model":`, Config{}, nil, 400, "invalid_request_error", "", "parse the JSON"},
		{"wrong json type", "POST", "/v1/completions", `{"model":"m","stream":"yes"}`, Config{}, nil, 400, "invalid_request_error", "", "parse the JSON"},
		{"missing model", "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}]}`, Config{}, nil, 400, "invalid_request_error", "", "model"},
		{"missing messages", "POST", "/v1/chat/completions", `{"model":"m"}`, Config{}, nil, 400, "invalid_request_error", "", "messages"},
		{"max_tokens zero", "POST", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":0}`, Config{}, nil, 400, "invalid_request_error", "integer_below_min_value", "max_tokens"},
		{"fail 503", "POST", "/v1/chat/completions", `{"model":"m","messages":[],"stream":true}`, Config{FailStatus: 503}, nil, 503, "server_error", "", "503"},
		{"fail 500 header", "POST", "/v1/embeddings", `{}`, Config{}, map[string]string{HeaderFailStatus: "500"}, 500, "server_error", "", "500"},
		{"fail 429", "POST", "/v1/completions", `{}`, Config{}, map[string]string{HeaderFailStatus: "429"}, 429, "requests", "rate_limit_exceeded", "429"},
		{"fail 400", "GET", "/v1/models", "", Config{FailStatus: 400}, nil, 400, "invalid_request_error", "", "400"},
		{"fail disabled by header", "GET", "/v1/models/mock-1", "", Config{FailStatus: 502}, map[string]string{HeaderFailStatus: "0"}, 200, "", "", ""},
		{"no api key", "GET", "/v1/models", "", Config{APIKey: "sk-1"}, nil, 401, "invalid_request_error", "", "didn't provide an API key"},
		{"wrong api key", "GET", "/v1/models", "", Config{APIKey: "sk-1"}, map[string]string{"Authorization": "Bearer sk-2"}, 401, "invalid_request_error", "invalid_api_key", "Incorrect API key"},
		{"not bearer", "GET", "/v1/models", "", Config{APIKey: "sk-1"}, map[string]string{"Authorization": "Basic sk-1"}, 401, "invalid_request_error", "invalid_api_key", "Incorrect API key"},
		{"right api key", "GET", "/v1/models", "", Config{APIKey: "sk-1"}, map[string]string{"Authorization": "Bearer sk-1"}, 200, "", "", ""},
	}
	bad := map[string]string{
		HeaderTTFT: "soon", HeaderTokens: "-1", HeaderInterToken: "-5ms", HeaderText: "%zz",
		HeaderChunkSize: "0", HeaderFailStatus: "99", HeaderFailDelay: "1", HeaderCutAfter: "x", HeaderUsage: "maybe",
	}
	for h, v := range bad {
		tests = append(tests, struct {
			name, method, path, body string
			cfg                      Config
			hdr                      map[string]string
			status                   int
			typ, code, msgPart       string
		}{"bad " + h, "POST", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"x"}]}`,
			Config{}, map[string]string{h: v}, 400, "invalid_request_error", "", h})
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, ts, c := start(t, tc.cfg)
			resp, b, err := do(t, c, tc.method, ts.URL+tc.path, tc.body, tc.hdr)
			if err != nil || resp.StatusCode != tc.status {
				t.Fatalf("status %d (want %d) err %v body %s", resp.StatusCode, tc.status, err, b)
			}
			if tc.status == 200 {
				return
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q", ct)
			}
			e := decodeError(t, b)
			if e.Error.Type != tc.typ || !strings.Contains(e.Error.Message, tc.msgPart) {
				t.Errorf("error %+v, want type %q message containing %q", e.Error, tc.typ, tc.msgPart)
			}
			if (tc.code == "") != (e.Error.Code == nil) || (e.Error.Code != nil && *e.Error.Code != tc.code) {
				t.Errorf("code %v, want %q", e.Error.Code, tc.code)
			}
			if st := m.Stats(); st != (Stats{Requests: 1, Completed: 1}) {
				t.Errorf("stats %+v", st)
			}
		})
	}
}

func TestFailDelay(t *testing.T) {
	_, ts, c := start(t, Config{FailStatus: 502, FailDelay: 80 * time.Millisecond})
	t0 := time.Now()
	resp, b, _ := do(t, c, "GET", ts.URL+"/v1/models", "", nil)
	if d := time.Since(t0); d < 80*time.Millisecond {
		t.Errorf("reply after %v, want >= 80ms", d)
	}
	if resp.StatusCode != 502 || decodeError(t, b).Error.Type != "server_error" {
		t.Errorf("status %d body %s", resp.StatusCode, b)
	}
}

func TestOnRequest(t *testing.T) {
	m, ts, c := start(t, Config{})
	type seen struct {
		h    http.Header
		body []byte
	}
	ch := make(chan seen, 1)
	m.SetOnRequest(func(h http.Header, body []byte) { ch <- seen{h, body} })
	body := `{"model":"m","messages":[{"role":"user","content":"x"}]}`
	do(t, c, "POST", ts.URL+"/v1/chat/completions", body, map[string]string{"X-Forwarded-Thing": "yes"})
	s := <-ch
	if string(s.body) != body || s.h.Get("X-Forwarded-Thing") != "yes" || s.h.Get("Content-Type") != "application/json" {
		t.Errorf("OnRequest got %v %q", s.h, s.body)
	}
}

func TestAppendEscaped(t *testing.T) {
	for _, s := range []string{"", "plain", "quote\" back\\slash", "ctl \x00\x01\x1f\b\f\n\r\t\x7f", "<a&b>",
		"héllo 世界 🎉", "bad \xff\xfe utf8 \xe4\xb8", "line\u2028para\u2029", "\U0010FFFF"} {
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(s); err != nil {
			t.Fatal(err)
		}
		if got := appendString(nil, s); string(got) != strings.TrimSuffix(want.String(), "\n") {
			t.Errorf("appendString(%q) = %s, want %s", s, got, want.String())
		}
	}
}
