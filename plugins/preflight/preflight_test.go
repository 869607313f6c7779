package main

import (
	"testing"

	"github.com/tollgate/tollgate/sdk/plugintest"
	"github.com/tollgate/tollgate/sdk/wasmhost"
)

const chat = `{"model":"mock-1","messages":[{"role":"user","content":"hi"}]}`

func load(t testing.TB, config string) *plugintest.Plugin {
	p := plugintest.Load(t, plugintest.Build(t, "."), config)
	p.Services.Handle("tenant.resolve", func(key []byte) ([]byte, error) {
		switch string(key) {
		case "tg_good":
			return []byte("ok\nmock-*"), nil
		case "tg_suspended":
			return []byte("suspended"), nil
		}
		return []byte("invalid"), nil
	})
	return p
}

func TestPreflight(t *testing.T) {
	p := load(t, `{"max_messages": 2}`)
	tests := []struct {
		name    string
		headers map[string]string
		model   string
		msgs    int64
		status  int
		code    string
	}{
		{"bearer key", map[string]string{"Authorization": "Bearer tg_good"}, "mock-1", 1, 0, ""},
		{"x-api-key", map[string]string{"X-Api-Key": "tg_good"}, "mock-1", 1, 0, ""},
		{"no key", nil, "mock-1", 1, 401, "missing_api_key"},
		{"not a bearer", map[string]string{"Authorization": "Basic abc"}, "mock-1", 1, 401, "missing_api_key"},
		{"wrong key", map[string]string{"Authorization": "Bearer tg_bad"}, "mock-1", 1, 401, "invalid_api_key"},
		{"suspended", map[string]string{"Authorization": "Bearer tg_suspended"}, "mock-1", 1, 403, "account_suspended"},
		{"model not allowed", map[string]string{"Authorization": "Bearer tg_good"}, "gpt-4o", 1, 403, "model_not_allowed"},
		{"too many messages", map[string]string{"Authorization": "Bearer tg_good"}, "mock-1", 3, 400, "too_many_messages"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := p.Request(plugintest.Request{Model: tt.model, Body: chat, Headers: tt.headers, Messages: tt.msgs})
			if res.Err != nil {
				t.Fatal(res.Err)
			}
			if tt.status == 0 && res.Rejected || tt.status != 0 && (res.Status != tt.status || res.Code != tt.code) {
				t.Errorf("got %+v, want %d %s", res, tt.status, tt.code)
			}
		})
	}
	// The Files and Batch APIs name no model: the gateway admits them by
	// plan, and the plan's models do not apply.
	for _, tt := range []struct {
		headers map[string]string
		status  int
	}{{map[string]string{"Authorization": "Bearer tg_good"}, 0}, {nil, 401}} {
		res := p.Request(plugintest.Request{Endpoint: "files", Explicit: plugintest.FieldModel, Headers: tt.headers})
		if res.Err != nil || res.Status != tt.status || res.Rejected != (tt.status != 0) {
			t.Errorf("no model, headers %v: %+v; want status %d", tt.headers, res, tt.status)
		}
	}
	if _, err := plugintest.LoadErr(t, plugintest.Build(t, "."), `{"max_mesages": 2}`); err == nil {
		t.Error("a misspelled config key was accepted")
	}
}

// BenchmarkPreflight is one request-phase callback with a valid key.
func BenchmarkPreflight(b *testing.B) {
	p := load(b, "")
	req := plugintest.Request{Model: "mock-1", Body: chat, Headers: map[string]string{"Authorization": "Bearer tg_good"}, Messages: 1,
		Tenant: &wasmhost.Tenant{ID: "t", MaxTokens: -1}}
	b.ReportAllocs()
	for b.Loop() {
		if res := p.Request(req); res.Rejected || res.Err != nil {
			b.Fatal(res)
		}
	}
}
