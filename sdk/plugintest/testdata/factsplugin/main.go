// Command factsplugin answers every request with an X-Facts response
// header listing what the host told it about the request, for the tests
// of plugintest's Request.
package main

import (
	"fmt"

	"github.com/tollgate/tollgate/sdk"
)

func main() {}

func init() {
	sdk.OnRequest(func(r *sdk.Request) sdk.Verdict {
		mt, ok := r.MaxTokens()
		if !ok {
			mt = -1
		}
		facts := fmt.Sprintf("model=%s endpoint=%s stream=%v max_tokens=%d messages=%d prompt_chars=%d prompt_tokens=%d body_bytes=%d",
			r.Model(), r.Endpoint(), r.Stream(), mt, r.MessageCount(), r.PromptChars(), r.PromptTokensEstimate(), r.BodyBytes())
		if server, tool, ok := r.ToolCall(); ok {
			facts += " tool=" + server + "/" + tool
		}
		if err := r.SetResponseHeader("X-Facts", facts); err != nil {
			panic(err)
		}
		return sdk.Continue
	})
}
