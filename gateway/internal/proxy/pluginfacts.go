package proxy

import (
	"github.com/tollgate/tollgate/gateway/internal/openai"
	"github.com/tollgate/tollgate/sdk/wasmhost"
)

// pluginFacts is what plugins are told about a parsed request. The plugin
// test harness reads the same from a body with wasmhost.ReadRequestFacts;
// TestPluginFactsAgree keeps the two in step. Model is borrowed from r.
func pluginFacts(r *openai.Request) wasmhost.RequestFacts {
	f := wasmhost.RequestFacts{
		Model:        r.Model,
		Stream:       r.Stream,
		MaxTokens:    -1,
		Messages:     int64(r.Messages),
		PromptChars:  int64(r.PromptChars),
		PromptTokens: int64(r.EstimatedPromptTokens),
		Bound: wasmhost.BoundFacts{
			PromptBytes: int64(max(r.Bound.Bytes, 0)), Images: int64(r.Bound.Images), Unbounded: int64(r.Bound.Unbounded),
			Tools: int64(r.Bound.Tools), BuiltinTools: int64(r.Bound.BuiltinTools), Choices: int64(max(r.Bound.Choices, 1)),
		},
	}
	if r.HasMaxTokens {
		f.MaxTokens = r.MaxTokens
	}
	return f
}
