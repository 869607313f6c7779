package provider

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/gateway/internal/config"
	"github.com/tollgate/tollgate/gateway/internal/openai"
)

func TestBedrockBinding(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDTEST")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", t.TempDir()+"/none")
	tests := []struct {
		name    string
		up      config.Upstream
		options int
	}{
		{"signed", config.Upstream{Name: "b", Provider: config.ProviderBedrock, Bedrock: &config.Bedrock{Region: "us-east-1"}}, 1},
		{"API key", config.Upstream{Name: "b", Provider: config.ProviderBedrock, Bedrock: &config.Bedrock{Region: "us-east-1"}, APIKeyEnv: "BEDROCK_KEY"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := Bind(&tt.up)
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := b.Adapter.(*Bedrock); !ok || len(b.Options) != tt.options {
				t.Fatalf("adapter %T, %d options; want *Bedrock, %d", b.Adapter, len(b.Options), tt.options)
			}
		})
	}
}

func TestBedrockAdapter(t *testing.T) {
	a := &Bedrock{}
	if !a.Serves(openai.ChatCompletions) || a.Serves(openai.Embeddings) || a.Serves(openai.Completions) {
		t.Error("Serves")
	}
	var out Outbound
	chat := []byte(`{"model":"claude","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`)
	if err := a.Request(&out, openai.ChatCompletions, "anthropic.claude-v2:1", true, chat); err != nil {
		t.Fatal(err)
	}
	if string(out.Path) != "/model/anthropic.claude-v2%3A1/converse-stream" || string(out.Header) != "Content-Type: application/json\r\n" ||
		string(out.Body) != `{"messages":[{"role":"user","content":[{"text":"hi"}]}]}` {
		t.Errorf("outbound path %q header %q body %s", out.Path, out.Header, out.Body)
	}
	out.Reset()
	err := a.Request(&out, openai.ChatCompletions, "m", false, []byte(`{"model":"m","top_k":3,"messages":[{"role":"user","content":"hi"}]}`))
	if e, ok := err.(*openai.Error); !ok || e.Status != 400 || e.Param != "top_k" {
		t.Errorf("refusal %v", err)
	}
	body, status, err := a.Reply(nil, 429, replyHeader{}, []byte(`{"message":"Too many requests, please wait before trying again."}`), "claude", 1)
	if err != nil || status != 429 || !strings.Contains(string(body), `"code":"rate_limit_exceeded"`) {
		t.Errorf("error reply %d %s %v", status, body, err)
	}
	body, status, err = a.Reply(nil, 200, replyHeader{}, []byte(`{"output":{"message":{"role":"assistant","content":[{"text":"Hi"}]}},"stopReason":"end_turn","usage":{"inputTokens":3,"outputTokens":1,"totalTokens":4}}`), "claude", 1)
	if err != nil || status != 200 || !strings.Contains(string(body), `"model":"claude"`) || !strings.Contains(string(body), `"content":"Hi"`) {
		t.Errorf("reply %d %s %v", status, body, err)
	}
	for _, tc := range []struct {
		status int
		ct     string
		want   bool
	}{{200, "application/vnd.amazon.eventstream", true}, {200, "text/event-stream", false}, {200, "application/json", false}, {400, "application/vnd.amazon.eventstream", false}} {
		if got := a.IsStream(tc.status, []byte(tc.ct)); got != tc.want {
			t.Errorf("IsStream(%d, %q) = %v", tc.status, tc.ct, got)
		}
	}
}

// TestBedrockReplyErrorType: a whole error reply is mapped by the
// exception its X-Amzn-Errortype header names, which Bedrock's bodies do
// not carry; without the header, by the status.
func TestBedrockReplyErrorType(t *testing.T) {
	a := &Bedrock{}
	const suffix = ":http://internal.amazon.com/coral/com.amazon.bedrock/"
	for _, tc := range []struct {
		status     int
		errorType  string
		wantStatus int
		wantCode   string
		wantType   string
	}{
		{403, "AccessDeniedException", 403, "permission_denied", "permission_error"},
		{403, "UnrecognizedClientException", 401, "invalid_api_key", "invalid_request_error"},
		{403, "InvalidSignatureException" + suffix, 401, "invalid_api_key", "invalid_request_error"},
		{403, "ExpiredTokenException", 401, "invalid_api_key", "invalid_request_error"},
		{429, "ThrottlingException" + suffix, 429, "rate_limit_exceeded", "rate_limit_error"},
		{400, "ServiceQuotaExceededException", 429, "rate_limit_exceeded", "rate_limit_error"},
		{400, "ValidationException" + suffix, 400, "", "invalid_request_error"},
		{429, "ModelNotReadyException", 503, "overloaded", "server_error"},
		{503, "ServiceUnavailableException", 503, "overloaded", "server_error"},
		{408, "ModelTimeoutException", 504, "upstream_timeout", "upstream_error"},
		{424, "ModelErrorException", 502, "model_error", "upstream_error"},
		{404, "ResourceNotFoundException", 404, "not_found", "not_found_error"},
		{500, "InternalServerException", 500, "", "server_error"},
		// No header: the status alone.
		{429, "", 429, "rate_limit_exceeded", "rate_limit_error"},
		{403, "", 403, "permission_denied", "permission_error"},
	} {
		h := replyHeader{}
		if tc.errorType != "" {
			h["X-Amzn-Errortype"] = tc.errorType
		}
		body, status, err := a.Reply(nil, tc.status, h, []byte(`{"message":"bedrock says no"}`), "claude", 1)
		var got struct {
			Error struct{ Message, Type, Code string }
		}
		if err != nil || json.Unmarshal(body, &got) != nil {
			t.Fatalf("%d %s: %v %s", tc.status, tc.errorType, err, body)
		}
		if status != tc.wantStatus || got.Error.Code != tc.wantCode || got.Error.Type != tc.wantType || got.Error.Message != "bedrock says no" {
			t.Errorf("%d %s: %d %+v, want %d %s %s", tc.status, tc.errorType, status, got.Error, tc.wantStatus, tc.wantType, tc.wantCode)
		}
	}
}
