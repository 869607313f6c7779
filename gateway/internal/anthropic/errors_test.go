package anthropic

import (
	"testing"

	"github.com/tollgate/tollgate/gateway/internal/openai"
)

func TestTranslateError(t *testing.T) {
	body := func(typ, msg string) string {
		return `{"type":"error","error":{"type":"` + typ + `","message":"` + msg + `"},"request_id":"req_1"}`
	}
	tests := []struct {
		name   string
		status int
		body   string
		want   openai.Error
	}{
		{"invalid request", 400, body("invalid_request_error", "messages: field required"),
			openai.Error{Status: 400, Type: "invalid_request_error", Message: "messages: field required"}},
		{"authentication", 401, body("authentication_error", "invalid x-api-key"),
			openai.Error{Status: 401, Type: "invalid_request_error", Code: "invalid_api_key", Message: "invalid x-api-key"}},
		{"billing", 402, body("billing_error", "credit balance too low"),
			openai.Error{Status: 402, Type: "insufficient_quota", Code: "insufficient_quota", Message: "credit balance too low"}},
		{"permission", 403, body("permission_error", "no access"),
			openai.Error{Status: 403, Type: "permission_error", Code: "permission_denied", Message: "no access"}},
		{"not found", 404, body("not_found_error", "model: claude-nope"),
			openai.Error{Status: 404, Type: "not_found_error", Code: "not_found", Message: "model: claude-nope"}},
		{"too large", 413, body("request_too_large", "Request exceeds the maximum allowed number of bytes."),
			openai.Error{Status: 413, Type: "invalid_request_error", Code: "request_too_large", Message: "Request exceeds the maximum allowed number of bytes."}},
		{"rate limit", 429, body("rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit"),
			openai.Error{Status: 429, Type: "rate_limit_error", Code: "rate_limit_exceeded", Message: "Number of request tokens has exceeded your per-minute rate limit"}},
		{"api error", 500, body("api_error", "Internal server error"),
			openai.Error{Status: 500, Type: "server_error", Message: "Internal server error"}},
		{"timeout", 504, body("timeout_error", "Request timed out"),
			openai.Error{Status: 504, Type: "upstream_error", Code: "upstream_timeout", Message: "Request timed out"}},
		{"overloaded", 529, body("overloaded_error", "Overloaded"),
			openai.Error{Status: 503, Type: "server_error", Code: "overloaded", Message: "Overloaded"}},
		{"type wins over status", 500, body("overloaded_error", "Overloaded"),
			openai.Error{Status: 503, Type: "server_error", Code: "overloaded", Message: "Overloaded"}},
		{"529 with an HTML body", 529, `<html>busy</html>`,
			openai.Error{Status: 503, Type: "server_error", Code: "overloaded", Message: "The Anthropic upstream answered HTTP 529."}},
		{"429 with an empty body", 429, ``,
			openai.Error{Status: 429, Type: "rate_limit_error", Code: "rate_limit_exceeded", Message: "The Anthropic upstream answered HTTP 429."}},
		{"unknown type, 503", 503, body("brand_new_error", "hm"),
			openai.Error{Status: 503, Type: "server_error", Message: "hm"}},
		{"unknown type, 418", 418, body("teapot_error", ""),
			openai.Error{Status: 418, Type: "invalid_request_error", Message: "The Anthropic upstream answered HTTP 418 (teapot_error)."}},
		{"unknown type in a stream", 0, body("brand_new_error", "x"),
			openai.Error{Status: 500, Type: "server_error", Message: "x"}},
		{"nothing usable", 0, `{}`,
			openai.Error{Status: 502, Type: "upstream_error", Code: "upstream_bad_response", Message: "The Anthropic upstream reported an error."}},
		{"error message escaping kept as text", 400, `{"type":"error","error":{"type":"invalid_request_error","message":"bad \"x\"\n"}}`,
			openai.Error{Status: 400, Type: "invalid_request_error", Message: "bad \"x\"\n"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := TranslateError(tc.status, []byte(tc.body))
			if got == nil || *got != tc.want {
				t.Fatalf("got  %+v\nwant %+v", got, tc.want)
			}
			// The rendered body is what OpenAI clients parse.
			var e oaErrorBody
			decodeStrict(t, got.AppendJSON(nil), &e)
			if e.Error.Message != tc.want.Message || e.Error.Type != tc.want.Type || (tc.want.Code == "") != (e.Error.Code == nil) {
				t.Errorf("rendered %+v", e)
			}
		})
	}
}
