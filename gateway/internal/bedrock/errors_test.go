package bedrock

import "testing"

func TestTranslateError(t *testing.T) {
	tests := []struct {
		name               string
		status             int
		errType, body      string
		wantStatus         int
		wantType, wantCode string
		wantMessage        string
	}{
		{"validation", 400, "ValidationException:http://internal.amazon.com/coral/com.amazon.bedrock/", `{"message":"Malformed input request"}`,
			400, "invalid_request_error", "", "Malformed input request"},
		{"quota", 400, "ServiceQuotaExceededException", `{"message":"quota"}`, 429, "rate_limit_error", "rate_limit_exceeded", "quota"},
		{"throttling", 429, "ThrottlingException", `{"message":"Too many requests"}`, 429, "rate_limit_error", "rate_limit_exceeded", "Too many requests"},
		{"model not ready", 429, "ModelNotReadyException", `{"message":"warming"}`, 503, "server_error", "overloaded", "warming"},
		{"access denied", 403, "AccessDeniedException", `{"Message":"no access to model"}`, 403, "permission_error", "permission_denied", "no access to model"},
		{"bad signature", 403, "InvalidSignatureException", `{"message":"sig"}`, 401, "invalid_request_error", "invalid_api_key", "sig"},
		{"type in body", 403, "", `{"__type":"com.amazon.coral.service#UnrecognizedClientException","message":"bad token"}`, 401, "invalid_request_error", "invalid_api_key", "bad token"},
		{"not found", 404, "ResourceNotFoundException", `{"message":"no model"}`, 404, "not_found_error", "not_found", "no model"},
		{"model timeout", 408, "ModelTimeoutException", `{"message":"slow"}`, 504, "upstream_error", "upstream_timeout", "slow"},
		{"model error", 424, "ModelErrorException", `{"message":"oops"}`, 502, "upstream_error", "model_error", "oops"},
		{"internal", 500, "InternalServerException", `{}`, 500, "server_error", "", "The Bedrock upstream answered HTTP 500 (internalserver)."},
		{"unavailable", 503, "ServiceUnavailableException", `{"message":"busy"}`, 503, "server_error", "overloaded", "busy"},
		{"status only", 429, "", `not json`, 429, "rate_limit_error", "rate_limit_exceeded", "The Bedrock upstream answered HTTP 429."},
		{"unknown 4xx", 418, "TeapotException", `{"message":"x"}`, 418, "invalid_request_error", "", "x"},
		{"unknown 5xx", 502, "", `<html>`, 502, "server_error", "", "The Bedrock upstream answered HTTP 502."},
		{"stream exception", 0, "modelStreamErrorException", `{"message":"broke","originalStatusCode":500}`, 502, "upstream_error", "model_error", "broke"},
		{"unknown stream exception", 0, "newException", `{"message":"n"}`, 500, "server_error", "", "n"},
		{"nothing", 0, "", ``, 502, "upstream_error", "upstream_bad_response", "The Bedrock upstream reported an error."},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := TranslateError(tc.status, []byte(tc.errType), []byte(tc.body))
			if e.Status != tc.wantStatus || e.Type != tc.wantType || e.Code != tc.wantCode || e.Message != tc.wantMessage {
				t.Fatalf("got %d %q %q %q, want %d %q %q %q", e.Status, e.Type, e.Code, e.Message, tc.wantStatus, tc.wantType, tc.wantCode, tc.wantMessage)
			}
		})
	}
}
