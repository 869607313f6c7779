package proxy

import (
	"bytes"
	"net/url"
	"testing"

	"github.com/tollgate/tollgate/gateway/internal/config"
	"github.com/tollgate/tollgate/gateway/internal/openai"
	"github.com/tollgate/tollgate/gateway/internal/provider"
	"github.com/tollgate/tollgate/gateway/internal/upstream"
)

// Building an attempt's request does not allocate once the exchange's
// buffers are warm: for an OpenAI upstream, with or without model_ids, and
// for an adapter's (Azure: a path per deployment).
func TestUpstreamRequestAllocs(t *testing.T) {
	u, _ := url.Parse("https://res.openai.azure.com")
	body := []byte(`{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`)
	for _, tc := range []struct {
		name string
		up   config.Upstream
		path string // the request's path
		sent string // the body's model sent
	}{
		{"openai", config.Upstream{Name: "o", Provider: config.ProviderOpenAI, URL: u}, "/chat/completions", "gpt-4o"},
		{"openai with model_ids", config.Upstream{Name: "o", Provider: config.ProviderOpenAI, URL: u, ModelIDs: map[string]string{"gpt-4o": "served"}},
			"/chat/completions", "served"},
		{"azure", config.Upstream{Name: "a", Provider: config.ProviderAzure, URL: u, Azure: &config.Azure{APIVersion: "2024-10-21"},
			ModelIDs: map[string]string{"gpt-4o": "dep"}}, "/openai/deployments/dep/chat/completions?api-version=2024-10-21", "dep"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := provider.Bind(&tc.up)
			if err != nil {
				t.Fatal(err)
			}
			c := upstream.New(&tc.up, b.Options...)
			t.Cleanup(c.Close)
			tg := &target{client: c, bind: newBinding(&tc.up, b)}
			x := &exchange{ep: openai.ChatCompletions}
			x.req.Model = []byte("gpt-4o")
			req, err := x.upstreamRequest(tg, "/chat/completions", body, x.req.Model)
			if err != nil {
				t.Fatal(err)
			}
			want := `"model":"` + tc.sent + `"`
			if req.Path != tc.path || !bytes.Contains(req.Body, []byte(want)) {
				t.Fatalf("path %q body %s, want %q with %s", req.Path, req.Body, tc.path, want)
			}
			if n := testing.AllocsPerRun(100, func() {
				if _, err := x.upstreamRequest(tg, "/chat/completions", body, x.req.Model); err != nil {
					t.Fatal(err)
				}
			}); n != 0 {
				t.Errorf("%v allocations per request", n)
			}
		})
	}
}
