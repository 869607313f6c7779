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
	}
	if r.HasMaxTokens {
		f.MaxTokens = r.MaxTokens
	}
	return f
}
