package obs

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// Only the exact bearer token reaches the handler; every refusal is a 401
// with the OpenAI-style body and a challenge. No token: no check.
func TestRequireBearer(t *testing.T) {
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("metrics\n")) })
	tests := []struct {
		name, token, header string
		status              int
		body                string
	}{
		{"right token", "s3cret", "Bearer s3cret", 200, "metrics\n"},
		{"no header", "s3cret", "", 401, `{"error":{"message":"missing or wrong metrics token (Authorization: Bearer <token>)","type":"invalid_request_error","param":null,"code":"invalid_metrics_token"}}`},
		{"wrong token", "s3cret", "Bearer s3cres", 401, ""},
		{"token as a prefix", "s3cret", "Bearer s3cret2", 401, ""},
		{"not a bearer", "s3cret", "Basic s3cret", 401, ""},
		{"bare token", "s3cret", "s3cret", 401, ""},
		{"scheme case", "s3cret", "bearer s3cret", 401, ""},
		{"no token configured", "", "", 200, "metrics\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			req := httptest.NewRequest("GET", "/metrics", nil)
			if tt.header != "" {
				req.Header.Set("Authorization", tt.header)
			}
			RequireBearer(tt.token, inner).ServeHTTP(rec, req)
			if rec.Code != tt.status {
				t.Fatalf("status %d, want %d", rec.Code, tt.status)
			}
			if tt.body != "" && rec.Body.String() != tt.body {
				t.Errorf("body %q, want %q", rec.Body.String(), tt.body)
			}
			if tt.status == 401 {
				if rec.Body.String() == "metrics\n" {
					t.Error("the handler ran")
				}
				if got := rec.Header().Get("WWW-Authenticate"); got != `Bearer realm="tollgate-metrics"` {
					t.Errorf("WWW-Authenticate %q", got)
				}
			}
		})
	}
}
