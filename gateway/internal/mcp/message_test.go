package mcp

import (
	"encoding/json"
	"testing"
)

func TestRead(t *testing.T) {
	tests := []struct {
		name, body       string
		kind             Kind
		id, method, tool string
		code             int
	}{
		{"request", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, Request, "1", "tools/list", "", 0},
		{"string id", `{"jsonrpc":"2.0","id":"a\"b","method":"ping"}`, Request, `"a\"b"`, "ping", "", 0},
		{"tools/call", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"search","arguments":{"q":"x"}}}`, Request, "7", "tools/call", "search", 0},
		{"notification", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, Notification, "", "notifications/initialized", "", 0},
		{"response", `{"jsonrpc":"2.0","id":3,"result":{}}`, Response, "3", "", "", 0},
		{"error response", `{"jsonrpc":"2.0","id":3,"error":{"code":1,"message":"x"}}`, Response, "3", "", "", 0},
		{"not json", `{"jsonrpc":`, 0, "", "", "", CodeParseError},
		{"batch", `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, 0, "", "", "", CodeInvalidRequest},
		{"scalar", `1`, 0, "", "", "", CodeInvalidRequest},
		{"no jsonrpc", `{"id":1,"method":"ping"}`, 0, "", "", "", CodeInvalidRequest},
		{"old jsonrpc", `{"jsonrpc":"1.0","id":1,"method":"ping"}`, 0, "", "", "", CodeInvalidRequest},
		{"null id", `{"jsonrpc":"2.0","id":null,"method":"ping"}`, 0, "", "", "", CodeInvalidRequest},
		{"object id", `{"jsonrpc":"2.0","id":{},"method":"ping"}`, 0, "", "", "", CodeInvalidRequest},
		{"method not string", `{"jsonrpc":"2.0","id":1,"method":5}`, 0, "", "", "", CodeInvalidRequest},
		{"empty method", `{"jsonrpc":"2.0","id":1,"method":""}`, 0, "", "", "", CodeInvalidRequest},
		{"id alone", `{"jsonrpc":"2.0","id":1}`, 0, "", "", "", CodeInvalidRequest},
		{"tools/call without name", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}`, Request, "1", "tools/call", "", CodeInvalidParams},
		{"method twice", `{"jsonrpc":"2.0","id":1,"method":"tools/list","method":"tools/call"}`, 0, "", "", "", CodeInvalidRequest},
		{"method in another case", `{"jsonrpc":"2.0","id":1,"method":"ping","Method":"tools/call"}`, 0, "", "", "", CodeInvalidRequest},
		{"tool named twice", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search","name":"delete"}}`, Request, "1", "tools/call", "", CodeInvalidRequest},
		{"tool name in another case", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search","NAME":"delete"}}`, Request, "1", "tools/call", "", CodeInvalidRequest},
		{"tool name with a newline", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a\nb"}}`, Request, "1", "tools/call", "", CodeInvalidParams},
	}
	var r Reader
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, e := r.Read([]byte(tc.body))
			if tc.code != 0 {
				if e == nil || e.Code != tc.code {
					t.Fatalf("error %v, want code %d", e, tc.code)
				}
				if tc.kind == Request && string(m.ID) != tc.id {
					t.Errorf("id %s with the error, want %s", m.ID, tc.id)
				}
				return
			}
			if e != nil {
				t.Fatalf("error %v", e)
			}
			if m.Kind != tc.kind || string(m.ID) != tc.id || string(m.Method) != tc.method || string(m.Tool) != tc.tool {
				t.Errorf("got kind %d id %s method %s tool %s", m.Kind, m.ID, m.Method, m.Tool)
			}
		})
	}
}

func TestAppendError(t *testing.T) {
	b := AppendError(nil, []byte(`"x"`), CodeRefused, `no "way"`, &Refusal{Status: 429, Type: "rate_limit_error", Code: "rate_limit_exceeded", RetryAfter: 3})
	var got struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
			Data    struct {
				Status     int    `json:"status"`
				Type       string `json:"type"`
				Code       string `json:"code"`
				RetryAfter int    `json:"retry_after"`
			} `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	if got.JSONRPC != "2.0" || string(got.ID) != `"x"` || got.Error.Code != -32000 || got.Error.Message != `no "way"` ||
		got.Error.Data.Status != 429 || got.Error.Data.Type != "rate_limit_error" || got.Error.Data.Code != "rate_limit_exceeded" || got.Error.Data.RetryAfter != 3 {
		t.Errorf("%s", b)
	}
	if b := AppendError(nil, nil, CodeParseError, "bad", nil); string(b) != `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"bad"}}` {
		t.Errorf("%s", b)
	}
}

func TestRefusalCode(t *testing.T) {
	for status, want := range map[int]int{401: CodeRefused, 403: CodeRefused, 409: CodeRefused, 429: CodeRefused, 400: CodeRefused, 500: CodeUnavailable, 502: CodeUnavailable, 503: CodeUnavailable, 504: CodeUnavailable} {
		if got := RefusalCode(status); got != want {
			t.Errorf("%d: %d, want %d", status, got, want)
		}
	}
}
