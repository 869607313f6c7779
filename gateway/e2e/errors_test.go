package e2e

import (
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/testkit/mockllm"
)

type apiError struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Code    *string `json:"code"`
		Param   *string `json:"param"`
	} `json:"error"`
}

func decodeError(t *testing.T, body []byte) apiError {
	t.Helper()
	var e apiError
	if err := json.Unmarshal(body, &e); err != nil || e.Error.Message == "" || e.Error.Type == "" {
		t.Fatalf("not an OpenAI-style error body: %q (%v)", body, err)
	}
	return e
}

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

func TestErrors(t *testing.T) {
	_, mockURL := startMock(t, mockllm.Config{})
	_, gw := startGateway(t, policy(mockURL, ""), nil)
	_, gwDown := startGateway(t, policy(closedPort(t), ""), nil)
	slow := policy(mockURL, "") // first_byte raised below
	slow = strings.Replace(slow, "first_byte: 5s", "first_byte: 300ms", 1)
	_, gwSlow := startGateway(t, slow, nil)

	chat := `{"model":"mock-1","messages":[{"role":"user","content":"hi"}]}`
	tests := []struct {
		name     string
		url      string
		body     string
		hdr      []string
		status   int
		typ      string
		code     string
		contains string
	}{
		{"unknown model", gw + "/v1/chat/completions", `{"model":"gpt-9","messages":[{"role":"user","content":"hi"}]}`, nil,
			404, "invalid_request_error", "model_not_found", "gpt-9"},
		{"malformed JSON", gw + "/v1/chat/completions", `{"model":"mock-1",`, nil,
			400, "invalid_request_error", "", "parse"},
		{"missing model", gw + "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}]}`, nil,
			400, "invalid_request_error", "", "model"},
		{"messages not an array", gw + "/v1/chat/completions", `{"model":"mock-1","messages":"hi"}`, nil,
			400, "invalid_request_error", "", "messages"},
		{"stream not a boolean", gw + "/v1/chat/completions", `{"model":"mock-1","stream":"yes","messages":[{"role":"user","content":"hi"}]}`, nil,
			400, "invalid_request_error", "", "stream"},
		{"body over the limit", gw + "/v1/chat/completions", `{"model":"mock-1","messages":[{"role":"user","content":"` + strings.Repeat("x", 70<<10) + `"}]}`, nil,
			413, "invalid_request_error", "request_too_large", ""},
		{"upstream unreachable", gwDown + "/v1/chat/completions", chat, nil,
			502, "upstream_error", "upstream_unreachable", ""},
		{"upstream timeout before first byte", gwSlow + "/v1/chat/completions", chat, []string{"X-Mock-TTFT", "3s"},
			504, "upstream_error", "upstream_timeout", ""},
		{"unknown route", gw + "/v1/nothing", chat, nil,
			404, "invalid_request_error", "unknown_url", "/v1/nothing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			status, hdr, body := post(t, tt.url, tt.body, tt.hdr...)
			if status != tt.status {
				t.Fatalf("status %d, want %d: %s", status, tt.status, body)
			}
			if ct := hdr.Get("Content-Type"); ct != "application/json" {
				t.Errorf("content-type %q", ct)
			}
			e := decodeError(t, body)
			if e.Error.Type != tt.typ {
				t.Errorf("type %q, want %q", e.Error.Type, tt.typ)
			}
			if tt.code != "" && (e.Error.Code == nil || *e.Error.Code != tt.code) {
				t.Errorf("code %v, want %q", e.Error.Code, tt.code)
			}
			if !strings.Contains(strings.ToLower(e.Error.Message), strings.ToLower(tt.contains)) {
				t.Errorf("message %q does not mention %q", e.Error.Message, tt.contains)
			}
			if tt.status == 504 && time.Since(start) > 2*time.Second {
				t.Errorf("timeout took %v, want about 300ms", time.Since(start))
			}
		})
	}
}

func TestMethodNotAllowed(t *testing.T) {
	_, mockURL := startMock(t, mockllm.Config{})
	_, gw := startGateway(t, policy(mockURL, ""), nil)
	resp, err := http.Get(gw + "/v1/chat/completions")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 405 || resp.Header.Get("Allow") != "POST" {
		t.Errorf("GET chat completions: %d Allow=%q", resp.StatusCode, resp.Header.Get("Allow"))
	}
}

func TestUpstreamErrorsPassThrough(t *testing.T) {
	_, mockURL := startMock(t, mockllm.Config{})
	_, gw := startGateway(t, policy(mockURL, ""), nil)
	for _, status := range []int{400, 401, 429, 500, 503} {
		for _, stream := range []bool{false, true} {
			body := `{"model":"mock-1","messages":[{"role":"user","content":"hi"}]}`
			if stream {
				body = `{"model":"mock-1","stream":true,"messages":[{"role":"user","content":"hi"}]}`
			}
			// The mock's own reply, fetched directly, is what the client must get.
			wantStatus, _, want := post(t, mockURL+"/v1/chat/completions", body, "X-Mock-Fail-Status", itoa(status))
			got, _, gotBody := post(t, gw+"/v1/chat/completions", body, "X-Mock-Fail-Status", itoa(status))
			if got != status || wantStatus != status {
				t.Errorf("fail %d stream=%v: gateway %d, mock %d", status, stream, got, wantStatus)
			}
			if string(gotBody) != string(want) {
				t.Errorf("fail %d stream=%v: body %q, want the upstream's %q", status, stream, gotBody, want)
			}
		}
	}
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

func TestStreamCutMidwayEndsWithErrorEvent(t *testing.T) {
	_, mockURL := startMock(t, mockllm.Config{Tokens: 20})
	_, gw := startGateway(t, policy(mockURL, ""), nil)
	status, _, body := post(t, gw+"/v1/chat/completions", `{"model":"mock-1","stream":true,"messages":[{"role":"user","content":"hi"}]}`,
		"X-Mock-Cut-After", "4")
	if status != 200 {
		t.Fatalf("status %d", status)
	}
	s := string(body)
	if strings.Count(s, "chat.completion.chunk") != 4 {
		t.Errorf("want the 4 events the upstream sent, got:\n%s", s)
	}
	if strings.Contains(s, "[DONE]") {
		t.Errorf("a cut stream must not claim [DONE]")
	}
	last := strings.TrimSpace(s[strings.LastIndex(strings.TrimSpace(s), "\n\n")+1:])
	var e apiError
	if err := json.Unmarshal([]byte(strings.TrimPrefix(last, "data: ")), &e); err != nil || e.Error.Type != "upstream_error" {
		t.Errorf("last event %q is not an upstream_error event (%v)", last, err)
	}
}
