package anthropic

import (
	"errors"
	"testing"

	"github.com/tollgate/tollgate/gateway/internal/openai"
)

// TestRequestParserRefusesAmbiguousMembers: fastjson's Get reads a
// member's first occurrence, Anthropic's API may read the last (or match
// another case); a body that the gateway and the upstream could read as
// different models or max_tokens is refused.
func TestRequestParserRefusesAmbiguousMembers(t *testing.T) {
	const msgs = `"messages":[{"role":"user","content":"hi"}]`
	for _, body := range []string{
		`{"model":"claude-haiku","model":"claude-opus","max_tokens":10,` + msgs + `}`,
		`{"model":"claude-haiku","Model":"claude-opus","max_tokens":10,` + msgs + `}`,
		`{"model":"claude-haiku","max_tokens":10,"max_tokens":100000,` + msgs + `}`,
		`{"model":"claude-haiku","max_tokens":10,"max_to\u212aens":100000,` + msgs + `}`,
		`{"model":"claude-haiku","stream":false,"stream":true,"max_tokens":10,` + msgs + `}`,
		`{"model":"claude-haiku","max_tokens":10,` + msgs + `,` + msgs + `}`,
	} {
		var p RequestParser
		var r openai.Request
		var e *openai.Error
		if err := p.Parse([]byte(body), &r); !errors.As(err, &e) || e.Status != 400 || e.Param == "" {
			t.Errorf("%s: %v (model %q, max_tokens %d), want a 400", body, err, r.Model, r.MaxTokens)
		}
	}
}
