package config

import (
	"fmt"
	"strings"
)

// Passthrough configures OpenAI's endpoints the gateway passes through
// without reading their replies as chat: images, audio, moderations (routed
// by their model, like chat; nothing to configure) and the Files and Batch
// APIs (no model to route by: configured here, and off unless they are).
type Passthrough struct {
	// Files, when set, serves /v1/files and /v1/batches from one upstream.
	// Objects there are stored under the upstream's key, which every
	// tenant shares: a tenant that may use these endpoints can list,
	// read and delete every other such tenant's files and batches. Allow
	// them only to plans that may see each other's files (docs/POLICY.md,
	// "Files and batches").
	Files *FilesPassthrough `yaml:"files"`
}

// FilesPassthrough is where /v1/files and /v1/batches go, and who may use
// them.
type FilesPassthrough struct {
	// Upstream names the upstream that keeps the files and runs the
	// batches: an openai or azure upstream. Default: the policy's only
	// openai upstream (with several, or for azure, name one).
	Upstream string `yaml:"upstream"`
	// Plans are the plans whose tenants may use the endpoints (a tenant
	// of another plan gets 403); "*" allows every tenant, and requests
	// no plugin resolved a tenant for. At least one is required.
	Plans []string `yaml:"plans"`
}

// AllowsPlan reports whether a tenant of plan ("" when none was resolved)
// may use the Files and Batch APIs.
func (f *FilesPassthrough) AllowsPlan(plan string) bool {
	if f == nil {
		return false
	}
	for _, p := range f.Plans {
		if p == "*" || (p == plan && plan != "") {
			return true
		}
	}
	return false
}

func (p *Policy) validatePassthrough(ps *Problems) {
	f := p.Passthrough.Files
	if f == nil {
		return
	}
	const at = "passthrough.files"
	if len(f.Plans) == 0 {
		ps.add(at+".plans", `at least one plan is required ("*" for every tenant): these endpoints share the upstream's key among tenants`)
	}
	for i, pl := range f.Plans {
		if strings.TrimSpace(pl) == "" {
			ps.add(fmt.Sprintf("%s.plans[%d]", at, i), "must not be empty")
		}
	}
	if f.Upstream == "" {
		var openai []string
		for _, u := range p.Upstreams {
			if u.Provider == ProviderOpenAI {
				openai = append(openai, u.Name)
			}
		}
		if len(openai) != 1 {
			ps.add(at+".upstream", "required: the policy has %d openai upstreams %v, so none is the default", len(openai), openai)
			return
		}
		f.Upstream = openai[0]
	}
	for _, u := range p.Upstreams {
		if u.Name != f.Upstream {
			continue
		}
		if u.Provider != ProviderOpenAI && u.Provider != ProviderAzure {
			ps.add(at+".upstream", "%q speaks %s, which has no Files or Batch API; name an openai or azure upstream", u.Name, u.Provider)
		}
		return
	}
	ps.add(at+".upstream", "no upstream is named %q", f.Upstream)
}
