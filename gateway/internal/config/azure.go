package config

import (
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// Azure OpenAI defaults and values.
const (
	// DefaultAzureAPIVersion is the api-version of deployment paths unless
	// azure.api_version says otherwise: the latest GA data-plane version.
	DefaultAzureAPIVersion = "2024-10-21"
	// AzureAPIV1 selects Azure's v1 API (/openai/v1/..., no api-version).
	AzureAPIV1 = "v1"
	// AzureAuthAPIKey sends api_key_env's key as api-key.
	AzureAuthAPIKey = "api_key"
	// AzureAuthEntra sends a Microsoft Entra ID token as Authorization:
	// Bearer, from the environment's default Azure credential.
	AzureAuthEntra = "entra"
)

var azureAPIVersion = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}(-preview)?$`)

func init() { RegisterProvider(ProviderAzure, (*Upstream).validateAzure) }

// validateAzure checks an azure upstream: its api_version and auth, that
// api_key auth has a key and entra none, and that the headers the gateway
// writes for Azure are not set by hand.
func (u *Upstream) validateAzure(at string, ps *Problems) {
	if u.Azure == nil {
		u.Azure = &Azure{}
	}
	a := u.Azure
	switch {
	case a.APIVersion == "":
		a.APIVersion = DefaultAzureAPIVersion
	case a.APIVersion != AzureAPIV1 && !azureAPIVersion.MatchString(a.APIVersion):
		ps.add(at+".azure.api_version", "%q is neither a version date (%s, or YYYY-MM-DD-preview) nor %q", a.APIVersion, DefaultAzureAPIVersion, AzureAPIV1)
	}
	switch a.Auth {
	case "":
		a.Auth = AzureAuthAPIKey
		fallthrough
	case AzureAuthAPIKey:
		if u.APIKeyEnv == "" {
			ps.add(at+".api_key_env", "is required for azure.auth %s (or set azure.auth: %s)", AzureAuthAPIKey, AzureAuthEntra)
		}
	case AzureAuthEntra:
		if u.APIKeyEnv != "" {
			ps.add(at+".api_key_env", "is not used with azure.auth %s (the token comes from the Azure credential chain)", AzureAuthEntra)
		}
	default:
		ps.add(at+".azure.auth", "unknown auth %q (supported: %s, %s)", a.Auth, AzureAuthAPIKey, AzureAuthEntra)
	}
	if pu, err := url.Parse(u.BaseURL); err == nil && slices.Contains(strings.Split(pu.Path, "/"), "openai") {
		ps.add(at+".base_url", "is the resource's root (https://NAME.openai.azure.com); the gateway appends /openai/...")
	}
	for k := range u.Headers {
		switch strings.ToLower(k) {
		case "api-key", "authorization":
			ps.add(at+".headers."+k, "is set by the gateway for provider %s (azure.auth)", ProviderAzure)
		}
	}
}
