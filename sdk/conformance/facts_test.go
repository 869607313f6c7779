package conformance

import (
	"testing"

	"github.com/tollgate/tollgate/sdk/wasmhost"
)

// TestRequestFactsFromTheBody checks that a case's request shows the
// plugin what its body says, as the gateway would (not a fixed model and
// the body's length as the prompt).
func TestRequestFactsFromTheBody(t *testing.T) {
	tests := []struct {
		name string
		p    probe
		want wasmhost.RequestFacts
	}{
		{"chat", probe{endpoint: "chat/completions", body: `{"model":"gpt-4o","stream":true,"max_tokens":5,"messages":[{"role":"user","content":"hello there"}]}`},
			wasmhost.RequestFacts{Model: []byte("gpt-4o"), Stream: true, MaxTokens: 5, Messages: 1, PromptChars: 11, PromptTokens: 6}},
		{"messages API", probe{endpoint: "messages", body: `{"model":"claude","max_tokens":9,"system":"sys","messages":[{"role":"user","content":"hi"}]}`},
			wasmhost.RequestFacts{Model: []byte("claude"), MaxTokens: 9, Messages: 1, PromptChars: 5, PromptTokens: 5}},
		{"a probe without a model", probe{endpoint: "chat/completions", body: `{"messages":[]}`, stream: true},
			wasmhost.RequestFacts{Model: []byte("conformance-model"), Stream: true, MaxTokens: -1, PromptTokens: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRequest(tt.p)
			defer wasmhost.ReleaseRequest(r)
			got := wasmhost.RequestFacts{Model: r.Model, Stream: r.Stream, MaxTokens: r.MaxTokens, Messages: r.Messages, PromptChars: r.PromptChars, PromptTokens: r.PromptTokens}
			if string(got.Model) != string(tt.want.Model) || got.Stream != tt.want.Stream || got.MaxTokens != tt.want.MaxTokens ||
				got.Messages != tt.want.Messages || got.PromptChars != tt.want.PromptChars || got.PromptTokens != tt.want.PromptTokens {
				t.Errorf("got %+v (model %q), want %+v (model %q)", got, got.Model, tt.want, tt.want.Model)
			}
		})
	}
}
