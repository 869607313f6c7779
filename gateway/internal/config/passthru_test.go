package config

import (
	"strings"
	"testing"
)

func TestPassthroughFiles(t *testing.T) {
	const two = `
version: 1
upstreams:
  - {name: a, base_url: "http://a/v1"}
  - {name: b, base_url: "http://b/v1"}
  - {name: c, provider: anthropic, base_url: "http://c/v1"}
routes: [{models: [m], upstream: a}]
`
	const one = `
version: 1
upstreams:
  - {name: a, base_url: "http://a/v1"}
  - {name: c, provider: anthropic, base_url: "http://c/v1"}
routes: [{models: [m], upstream: a}]
`
	tests := []struct {
		name, yaml string
		upstream   string // the resolved upstream
		problem    string // "" for none
	}{
		{"off", one, "", ""},
		{"the only openai upstream", one + "passthrough: {files: {plans: [p]}}\n", "a", ""},
		{"named", two + "passthrough: {files: {upstream: b, plans: ['*']}}\n", "b", ""},
		{"several openai upstreams", two + "passthrough: {files: {plans: [p]}}\n", "", "passthrough.files.upstream: required: the policy has 2 openai upstreams [a b]"},
		{"not openai", two + "passthrough: {files: {upstream: c, plans: [p]}}\n", "", `passthrough.files.upstream: "c" speaks anthropic, which has no Files or Batch API; name an openai or azure upstream`},
		{"unknown upstream", two + "passthrough: {files: {upstream: z, plans: [p]}}\n", "", `passthrough.files.upstream: no upstream is named "z"`},
		{"no plans", one + "passthrough: {files: {}}\n", "", "passthrough.files.plans: at least one plan is required"},
		{"empty plan", one + "passthrough: {files: {plans: [' ']}}\n", "", "passthrough.files.plans[0]: must not be empty"},
		{"unknown field", one + "passthrough: {files: {plans: [p], tenants: [x]}}\n", "", "passthrough.files.tenants"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Parse([]byte(tt.yaml), func(string) (string, bool) { return "", false })
			if tt.problem != "" {
				if err == nil || !strings.Contains(err.Error(), tt.problem) {
					t.Fatalf("err = %v; want %q", err, tt.problem)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			if f := p.Passthrough.Files; f != nil {
				got = f.Upstream
			}
			if got != tt.upstream {
				t.Fatalf("files upstream %q; want %q", got, tt.upstream)
			}
		})
	}
}

func TestFilesAllowsPlan(t *testing.T) {
	var off *FilesPassthrough
	some := &FilesPassthrough{Plans: []string{"gold", "silver"}}
	every := &FilesPassthrough{Plans: []string{"*"}}
	tests := []struct {
		f    *FilesPassthrough
		plan string
		want bool
	}{
		{off, "gold", false},
		{some, "gold", true},
		{some, "silver", true},
		{some, "bronze", false},
		{some, "", false},
		{every, "bronze", true},
		{every, "", true},
	}
	for _, tt := range tests {
		if got := tt.f.AllowsPlan(tt.plan); got != tt.want {
			t.Errorf("%+v.AllowsPlan(%q) = %v", tt.f, tt.plan, got)
		}
	}
}
