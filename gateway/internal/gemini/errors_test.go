package gemini

import (
	"testing"

	"github.com/tollgate/tollgate/gateway/internal/openai"
)

func TestTranslateError(t *testing.T) {
	tests := []struct {
		name   string
		status int
		body   string
		want   openai.Error
	}{
		{"invalid argument", 400, `{"error":{"code":400,"message":"Invalid JSON payload","status":"INVALID_ARGUMENT"}}`,
			openai.Error{Status: 400, Type: openai.TypeInvalidRequest, Message: "Invalid JSON payload"}},
		{"bad API key", 400, `{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT",
			"details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID","domain":"googleapis.com"}]}}`,
			openai.Error{Status: 400, Type: openai.TypeInvalidRequest, Code: "invalid_api_key", Message: "API key not valid. Please pass a valid API key."}},
		{"unauthenticated", 401, `{"error":{"code":401,"message":"Request had invalid authentication credentials.","status":"UNAUTHENTICATED"}}`,
			openai.Error{Status: 401, Type: openai.TypeInvalidRequest, Code: "invalid_api_key", Message: "Request had invalid authentication credentials."}},
		{"permission", 403, `{"error":{"code":403,"message":"denied","status":"PERMISSION_DENIED"}}`,
			openai.Error{Status: 403, Type: "permission_error", Code: "permission_denied", Message: "denied"}},
		{"not found", 404, `{"error":{"code":404,"message":"models/x is not found","status":"NOT_FOUND"}}`,
			openai.Error{Status: 404, Type: "not_found_error", Code: "not_found", Message: "models/x is not found"}},
		{"quota", 429, `[{"error":{"code":429,"message":"Resource exhausted","status":"RESOURCE_EXHAUSTED"}}]`,
			openai.Error{Status: 429, Type: "rate_limit_error", Code: "rate_limit_exceeded", Message: "Resource exhausted"}},
		{"internal", 500, `{"error":{"code":500,"message":"oops","status":"INTERNAL"}}`,
			openai.Error{Status: 500, Type: openai.TypeServer, Message: "oops"}},
		{"overloaded", 503, `{"error":{"code":503,"message":"The model is overloaded.","status":"UNAVAILABLE"}}`,
			openai.Error{Status: 503, Type: openai.TypeServer, Code: "unavailable", Message: "The model is overloaded."}},
		{"deadline", 504, `{"error":{"code":504,"message":"late","status":"DEADLINE_EXCEEDED"}}`,
			openai.Error{Status: 504, Type: openai.TypeUpstream, Code: "upstream_timeout", Message: "late"}},
		{"cancelled", 499, `{"error":{"code":499,"message":"cancelled","status":"CANCELLED"}}`,
			openai.Error{Status: 502, Type: openai.TypeUpstream, Code: "upstream_cancelled", Message: "cancelled"}},
		{"in a stream, status from the body", 0, `{"error":{"code":503,"message":"busy","status":"UNAVAILABLE"}}`,
			openai.Error{Status: 503, Type: openai.TypeServer, Code: "unavailable", Message: "busy"}},
		{"HTML from a proxy, 502", 502, `<html>bad gateway</html>`,
			openai.Error{Status: 502, Type: openai.TypeServer, Message: "The Gemini upstream answered HTTP 502."}},
		{"HTML, 413", 413, `<html/>`,
			openai.Error{Status: 413, Type: openai.TypeInvalidRequest, Message: "The Gemini upstream answered HTTP 413."}},
		{"status only, known", 429, ``,
			openai.Error{Status: 429, Type: "rate_limit_error", Code: "rate_limit_exceeded", Message: "The Gemini upstream answered HTTP 429."}},
		{"nothing usable", 0, `{}`,
			openai.Error{Status: 502, Type: openai.TypeUpstream, Code: "upstream_bad_response", Message: "The Gemini upstream reported an error."}},
		{"unknown status name", 418, `{"error":{"code":418,"message":"teapot","status":"TEAPOT"}}`,
			openai.Error{Status: 418, Type: openai.TypeInvalidRequest, Message: "teapot"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := TranslateError(tc.status, []byte(tc.body))
			if *got != tc.want {
				t.Fatalf("got %+v\nwant %+v", *got, tc.want)
			}
		})
	}
}

func TestRetryDelay(t *testing.T) {
	const pre = `{"error":{"code":429,"message":"Resource has been exhausted","status":"RESOURCE_EXHAUSTED","details":[`
	for _, tc := range []struct {
		body string
		want int
		ok   bool
	}{
		{pre + `{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"37s"}]}}`, 37, true},
		{pre + `{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[]},{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"1.25s"}]}}`, 2, true},
		{pre + `{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"0.000000001s"}]}}`, 1, true},
		{pre + `{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"3.000s"}]}}`, 3, true},
		{`[` + pre + `{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"5s"}]}}]`, 5, true},
		{pre + `{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"999999s"}]}}`, maxRetryDelay, true},
		{pre + `{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"0s"}]}}`, 0, false},
		{pre + `{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"-3s"}]}}`, 0, false},
		{pre + `{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"+3s"}]}}`, 0, false},
		{pre + `{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"3"}]}}`, 0, false},
		{pre + `{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"3.s"}]}}`, 0, false},
		{pre + `{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"1.5e3s"}]}}`, 0, false},
		{pre + `{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":37}]}}`, 0, false},
		{pre + `{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"RATE_LIMIT_EXCEEDED"}]}}`, 0, false},
		{`{"error":{"code":429}}`, 0, false},
		{`<html>Too Many Requests</html>`, 0, false},
	} {
		if got, ok := RetryDelay([]byte(tc.body)); got != tc.want || ok != tc.ok {
			t.Errorf("RetryDelay(%s) = %d, %v; want %d, %v", tc.body, got, ok, tc.want, tc.ok)
		}
	}
}
