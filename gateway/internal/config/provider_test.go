package config

import (
	"fmt"
	"strings"
	"testing"
)

func TestAnthropicUpstream(t *testing.T) {
	const base = `
version: 1
upstreams:
  - name: claude
    provider: anthropic
    base_url: https://api.anthropic.com/v1
    api_key_env: ANTHROPIC_API_KEY
%s
routes: [{models: ["claude-*"], upstream: claude}]
`
	tests := []struct {
		name, extra string
		env         map[string]string
		version     string // the resolved anthropic_version; "" when an error is wanted
		want        []string
	}{
		{"defaults", "", map[string]string{"ANTHROPIC_API_KEY": "sk-ant"}, DefaultAnthropicVersion, nil},
		{"version set", "    anthropic_version: 2024-01-01", map[string]string{"ANTHROPIC_API_KEY": "sk-ant"}, "2024-01-01", nil},
		{"beta header allowed", "    headers: {anthropic-beta: tools-2024-04-04}", map[string]string{"ANTHROPIC_API_KEY": "k"}, DefaultAnthropicVersion, nil},
		{"bad version", "    anthropic_version: \"a\\tb\"", map[string]string{"ANTHROPIC_API_KEY": "k"}, "",
			[]string{"upstreams[0].anthropic_version: \"a\\tb\" is not a valid header value"}},
		{"key in headers", "    headers: {X-Api-Key: k}", map[string]string{"ANTHROPIC_API_KEY": "k"}, "",
			[]string{"upstreams[0].headers.X-Api-Key: is set from api_key_env for provider anthropic"}},
		{"version in headers", "    headers: {anthropic-version: x}", map[string]string{"ANTHROPIC_API_KEY": "k"}, "",
			[]string{"upstreams[0].headers.anthropic-version: is set from anthropic_version"}},
		{"version forwarded by a glob", "    forward_headers: [\"x-mock-*\", \"Anthropic-*\"]", map[string]string{"ANTHROPIC_API_KEY": "k"}, "",
			[]string{"upstreams[0].forward_headers[1]: \"Anthropic-*\" matches anthropic-version, which the gateway sends itself"}},
		{"key with a newline", "", map[string]string{"ANTHROPIC_API_KEY": "k\nx-evil: 1"}, "",
			[]string{"upstreams[0].api_key_env: the value of ANTHROPIC_API_KEY contains CR, LF or NUL"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Parse([]byte(strings.Replace(base, "%s", tt.extra, 1)), env(tt.env))
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
			u := p.Upstreams[0]
			if u.Provider != ProviderAnthropic || u.AnthropicVersion != tt.version || u.APIKey != tt.env["ANTHROPIC_API_KEY"] {
				t.Errorf("upstream %+v", u)
			}
		})
	}
}

func TestProviderSettings(t *testing.T) {
	tests := []struct {
		name, upstream string
		want           string // "" for no error
	}{
		{"anthropic_version on openai", `{name: a, base_url: "http://x", anthropic_version: "2023-06-01"}`,
			"upstreams[0].anthropic_version: is only for provider anthropic"},
		{"bedrock settings on openai", `{name: a, base_url: "http://x", bedrock: {region: us-east-1}}`,
			"upstreams[0].bedrock: is only for provider bedrock"},
		{"vertex settings on azure", `{name: a, base_url: "http://x", provider: azure, vertex: {project: p}}`,
			"upstreams[0].vertex: is only for provider vertex"},
		{"unknown provider", `{name: a, base_url: "http://x", provider: cohere}`,
			`unknown provider "cohere" (supported: openai, anthropic, azure, bedrock, gemini, vertex)`},
		{"model_ids", `{name: a, base_url: "http://x", model_ids: {gpt-4o: my-deployment}}`, ""},
		{"empty model id", `{name: a, base_url: "http://x", model_ids: {gpt-4o: ""}}`,
			`upstreams[0].model_ids["gpt-4o"]: model names must be non-empty`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Parse([]byte("version: 1\nupstreams: ["+tt.upstream+"]\nroutes: [{models: [m], upstream: a}]\n"), env(nil))
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if got := p.Upstreams[0].ModelIDs["gpt-4o"]; got != "my-deployment" {
					t.Errorf("model_ids[gpt-4o] = %q", got)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want %q", err, tt.want)
			}
		})
	}
}

// A provider named by the policy format whose check is not in this build
// is refused by name, not as unknown.
func TestProviderNotInBuild(t *testing.T) {
	for _, name := range knownProviders {
		if _, ok := providerChecks[name]; ok || name == ProviderOpenAI {
			continue
		}
		_, err := Parse([]byte("version: 1\nupstreams: [{name: a, base_url: \"http://x\", provider: "+name+"}]\nroutes: [{models: [m], upstream: a}]\n"), env(nil))
		if err == nil || !strings.Contains(err.Error(), "provider \""+name+"\" is not yet supported by this build") {
			t.Errorf("%s: error %v", name, err)
		}
	}
}

func TestAzureUpstream(t *testing.T) {
	const base = `
version: 1
upstreams:
  - name: az
    provider: azure
    base_url: %s
%s
routes: [{models: ["gpt-*"], upstream: az}]
`
	keyEnv := map[string]string{"AZURE_OPENAI_API_KEY": "az-key"}
	tests := []struct {
		name, url, extra string
		version, auth    string // the resolved settings; "" when an error is wanted
		want             []string
	}{
		{"defaults", "https://res.openai.azure.com", "    api_key_env: AZURE_OPENAI_API_KEY", DefaultAzureAPIVersion, AzureAuthAPIKey, nil},
		{"behind a gateway", "https://openai.example.com/aoai", "    api_key_env: AZURE_OPENAI_API_KEY", DefaultAzureAPIVersion, AzureAuthAPIKey, nil},
		{"preview version", "https://res.openai.azure.com", "    api_key_env: AZURE_OPENAI_API_KEY\n    azure: {api_version: 2025-01-01-preview}", "2025-01-01-preview", AzureAuthAPIKey, nil},
		{"v1 with entra", "https://res.openai.azure.com", "    azure: {api_version: v1, auth: entra}", AzureAPIV1, AzureAuthEntra, nil},
		{"api key missing", "https://res.openai.azure.com", "", "", "",
			[]string{"upstreams[0].api_key_env: is required for azure.auth api_key (or set azure.auth: entra)"}},
		{"key with entra", "https://res.openai.azure.com", "    api_key_env: AZURE_OPENAI_API_KEY\n    azure: {auth: entra}", "", "",
			[]string{"upstreams[0].api_key_env: is not used with azure.auth entra"}},
		{"bad version", "https://res.openai.azure.com", "    api_key_env: AZURE_OPENAI_API_KEY\n    azure: {api_version: latest}", "", "",
			[]string{`upstreams[0].azure.api_version: "latest" is neither a version date`}},
		{"bad auth", "https://res.openai.azure.com", "    azure: {auth: cert}", "", "",
			[]string{`upstreams[0].azure.auth: unknown auth "cert" (supported: api_key, entra)`}},
		{"openai path in base_url", "https://res.openai.azure.com/openai/v1", "    api_key_env: AZURE_OPENAI_API_KEY", "", "",
			[]string{"upstreams[0].base_url: is the resource's root"}},
		{"key header by hand", "https://res.openai.azure.com", "    api_key_env: AZURE_OPENAI_API_KEY\n    headers: {Api-Key: x}", "", "",
			[]string{"upstreams[0].headers.Api-Key: is set by the gateway for provider azure"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Parse([]byte(fmt.Sprintf(base, tt.url, tt.extra)), env(keyEnv))
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
			a := p.Upstreams[0].Azure
			if a == nil || a.APIVersion != tt.version || a.Auth != tt.auth {
				t.Errorf("azure %+v", a)
			}
		})
	}
}
