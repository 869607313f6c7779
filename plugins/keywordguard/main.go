// Command keywordguard is a Tollgate plugin that rejects requests whose
// prompt text matches any of a list of regular expressions, with an
// OpenAI-style error (code content_policy_violation), and marks the
// requests it passes with a response header. See README.md.
//
// Build:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o keywordguard.wasm ./plugins/keywordguard
package main

import (
	"strconv"

	"github.com/tollgate/tollgate/sdk"
)

// main is required of a main package but is not run: a c-shared module's
// _initialize runs the init functions only.
func main() {}

// g is the instance's configuration, set once by on_configure before any
// request.
var g *guard

func init() {
	sdk.OnConfigure(func(cfg []byte) error {
		parsed, err := parseConfig(cfg)
		if err != nil {
			return err
		}
		g = parsed
		return nil
	})
	sdk.OnRequest(onRequest)
}

func onRequest(r *sdk.Request) sdk.Verdict {
	g.parts = r.Messages(g.parts[:0])
	if rule, message := g.check(g.parts); rule >= 0 {
		// The log names the rule and the message, never the user's text.
		sdk.Log(sdk.LevelInfo, "keywordguard: request "+r.RequestID()+" blocked: deny["+strconv.Itoa(rule)+"] matched in message "+strconv.Itoa(message))
		_ = sdk.MetricAdd("blocked", 1)
		return r.Reject(g.status, "invalid_request_error", "content_policy_violation", g.message)
	}
	if g.headerName != "" {
		if err := r.SetResponseHeader(g.headerName, g.headerValue); err != nil {
			sdk.Log(sdk.LevelWarn, "keywordguard: setting "+g.headerName+": "+err.Error())
		}
	}
	return sdk.Continue
}
