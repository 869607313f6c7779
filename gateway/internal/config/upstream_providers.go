package config

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Azure is an azure upstream's settings (validated by azure.go).
type Azure struct {
	// APIVersion is the api-version query parameter of deployment paths
	// (default DefaultAzureAPIVersion), or "v1" for Azure's v1 API
	// (/openai/v1/..., the deployment named by the body's model).
	APIVersion string `yaml:"api_version"`
	// Auth is how requests authenticate: api_key (the default: the key
	// from api_key_env in an api-key header) or entra (a Microsoft Entra
	// ID token from the environment's default Azure credential).
	Auth string `yaml:"auth"`
}

// Bedrock is a bedrock upstream's settings (validated by bedrock.go).
type Bedrock struct {
	// Region is the AWS region (us-east-1); base_url defaults to its
	// bedrock-runtime endpoint.
	Region string `yaml:"region"`
}

// Vertex is a vertex upstream's settings (validated by vertex.go).
type Vertex struct {
	// Project and Location name the Google Cloud project and region
	// ("global" or e.g. us-central1) the model is served from.
	Project  string `yaml:"project"`
	Location string `yaml:"location"`
	// CredentialsFile is a credentials JSON file (service account or
	// workload identity federation); empty: Application Default
	// Credentials.
	CredentialsFile string `yaml:"credentials_file"`
}

// ProviderCheck validates the settings of one provider's upstream u at
// YAML path at, adding each problem to ps. It may fill defaults (base_url
// included: base_url is checked after it runs).
type ProviderCheck func(u *Upstream, at string, ps *Problems)

// providerChecks holds the check of each provider beyond openai, by name.
// A name in knownProviders without one is refused as not supported by
// this build.
var providerChecks = map[string]ProviderCheck{
	ProviderAnthropic: (*Upstream).validateAnthropic,
}

// RegisterProvider makes name a provider a policy may use, validated by
// check (nil: nothing beyond the common fields). A provider's own file
// calls it from an init function (config/azure.go, config/bedrock.go,
// ...). Registering a name twice panics.
func RegisterProvider(name string, check ProviderCheck) {
	if _, dup := providerChecks[name]; dup || name == ProviderOpenAI {
		panic("config: provider " + name + " registered twice")
	}
	if check == nil {
		check = func(*Upstream, string, *Problems) {}
	}
	providerChecks[name] = check
}

// knownProviders are the provider names a policy may use.
var knownProviders = []string{ProviderOpenAI, ProviderAnthropic, ProviderAzure, ProviderBedrock, ProviderGemini, ProviderVertex}

// ProviderNames are the provider names a policy may use, openai first.
func ProviderNames() []string { return slices.Clone(knownProviders) }

// validateProvider checks the provider name, that provider-specific
// settings appear only on their provider, and runs the provider's own
// check.
func (u *Upstream) validateProvider(at string, ps *Problems) {
	for _, s := range []struct {
		key, provider string
		set           bool
	}{
		{"anthropic_version", ProviderAnthropic, u.AnthropicVersion != ""},
		{"azure", ProviderAzure, u.Azure != nil},
		{"bedrock", ProviderBedrock, u.Bedrock != nil},
		{"vertex", ProviderVertex, u.Vertex != nil},
	} {
		if s.set && u.Provider != s.provider {
			ps.add(at+"."+s.key, "is only for provider %s", s.provider)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(u.ModelIDs)) {
		if v := u.ModelIDs[k]; k == "" || v == "" || strings.ContainsAny(v, "\r\n\x00") {
			ps.add(fmt.Sprintf("%s.model_ids[%q]", at, k), "model names must be non-empty, without CR, LF or NUL")
		}
	}
	check, ok := providerChecks[u.Provider]
	switch {
	case u.Provider == ProviderOpenAI:
	case ok:
		check(u, at, ps)
	case slices.Contains(knownProviders, u.Provider):
		ps.add(at+".provider", "provider %q is not yet supported by this build", u.Provider)
	default:
		ps.add(at+".provider", "unknown provider %q (supported: %s)", u.Provider, strings.Join(knownProviders, ", "))
	}
}
