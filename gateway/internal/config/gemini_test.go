package config

import (
	"strings"
	"testing"
)

func TestGoogleUpstreams(t *testing.T) {
	const base = `
version: 1
upstreams:
  - name: g
%s
routes: [{models: ["gemini-*"], upstream: g}]
`
	key := map[string]string{"GEMINI_API_KEY": "AIza-k"}
	tests := []struct {
		name, upstream string
		env            map[string]string
		baseURL        string   // the resolved base_url; "" when an error is wanted
		want           []string // error fragments
	}{
		{"gemini defaults", "    provider: gemini\n    api_key_env: GEMINI_API_KEY", key, DefaultGeminiBaseURL, nil},
		{"gemini base_url set", "    provider: gemini\n    base_url: http://127.0.0.1:9090/v1beta", nil, "http://127.0.0.1:9090/v1beta", nil},
		{"gemini key in headers", "    provider: gemini\n    headers: {X-Goog-Api-Key: k}", nil, "",
			[]string{"upstreams[0].headers.X-Goog-Api-Key: is set from api_key_env for provider gemini"}},
		{"gemini key forwarded", "    provider: gemini\n    forward_headers: [\"x-goog-*\"]", nil, "",
			[]string{`upstreams[0].forward_headers[0]: "x-goog-*" matches x-goog-api-key`}},
		{"gemini with vertex settings", "    provider: gemini\n    vertex: {project: p, location: l}", nil, "",
			[]string{"upstreams[0].vertex: is only for provider vertex"}},
		{"vertex regional", "    provider: vertex\n    vertex: {project: my-proj-1, location: us-central1}", nil,
			"https://us-central1-aiplatform.googleapis.com/v1", nil},
		{"vertex global", "    provider: vertex\n    vertex: {project: example.com:proj, location: global, credentials_file: /etc/sa.json}", nil,
			"https://aiplatform.googleapis.com/v1", nil},
		{"vertex base_url set", "    provider: vertex\n    base_url: http://127.0.0.1:9090/v1\n    vertex: {project: p, location: europe-west4}", nil,
			"http://127.0.0.1:9090/v1", nil},
		{"vertex without settings", "    provider: vertex", nil, "",
			[]string{"upstreams[0].vertex: is required for provider vertex"}},
		{"vertex bad project and location", "    provider: vertex\n    vertex: {project: \"a/b\", location: \"us central\"}", nil, "",
			[]string{"upstreams[0].vertex.project: must be a Google Cloud project id", "upstreams[0].vertex.location: must be a Vertex AI location"}},
		{"vertex empty project", "    provider: vertex\n    vertex: {location: us-east1}", nil, "",
			[]string{"upstreams[0].vertex.project: must be a Google Cloud project id"}},
		{"vertex with a key", "    provider: vertex\n    api_key_env: GEMINI_API_KEY\n    vertex: {project: p, location: l}", key, "",
			[]string{"upstreams[0].api_key_env: is not used by provider vertex"}},
		{"vertex authorization header", "    provider: vertex\n    headers: {Authorization: Bearer x}\n    vertex: {project: p, location: l}", nil, "",
			[]string{"upstreams[0].headers.Authorization: is set from the OAuth token for provider vertex"}},
		{"vertex unknown member", "    provider: vertex\n    vertex: {project: p, location: l, region: x}", nil, "",
			[]string{"region"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Parse([]byte(strings.Replace(base, "%s", tt.upstream, 1)), env(tt.env))
			if tt.want != nil {
				if err == nil {
					t.Fatal("want an error")
				}
				for _, w := range tt.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q lacks %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if u := p.Upstreams[0]; u.BaseURL != tt.baseURL || u.URL == nil || u.URL.String() != tt.baseURL {
				t.Errorf("base_url %q (%v), want %q", u.BaseURL, u.URL, tt.baseURL)
			}
		})
	}
}
