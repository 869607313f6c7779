package config

import (
	"strings"
	"testing"
)

func TestBedrockUpstream(t *testing.T) {
	const base = `
version: 1
upstreams:
  - name: aws
    provider: bedrock
%s
routes: [{models: ["claude-*"], upstream: aws}]
`
	tests := []struct {
		name, extra string
		baseURL     string // the resolved base_url; "" when an error is wanted
		want        []string
	}{
		{"region only", "    bedrock: {region: eu-central-1}", "https://bedrock-runtime.eu-central-1.amazonaws.com", nil},
		{"base_url kept", "    bedrock: {region: us-gov-west-1}\n    base_url: https://vpce-1.bedrock-runtime.us-gov-west-1.vpce.amazonaws.com",
			"https://vpce-1.bedrock-runtime.us-gov-west-1.vpce.amazonaws.com", nil},
		{"model ids", "    bedrock: {region: us-east-1}\n    model_ids: {claude-sonnet: \"anthropic.claude-3-5-sonnet-20240620-v1:0\"}",
			"https://bedrock-runtime.us-east-1.amazonaws.com", nil},
		{"no bedrock settings", "", "", []string{"upstreams[0].bedrock.region: is required for provider bedrock"}},
		{"no region", "    bedrock: {}", "", []string{"upstreams[0].bedrock.region: is required for provider bedrock"}},
		{"bad region", "    bedrock: {region: \"us east\"}", "", []string{`upstreams[0].bedrock.region: "us east" is not an AWS region name`}},
		{"signature header set", "    bedrock: {region: us-east-1}\n    headers: {X-Amz-Date: x}", "",
			[]string{"upstreams[0].headers.X-Amz-Date: is written by the gateway for provider bedrock"}},
		{"signature header forwarded", "    bedrock: {region: us-east-1}\n    forward_headers: [\"x-mock-*\", \"x-amz-*\"]", "",
			[]string{`upstreams[0].forward_headers[1]: "x-amz-*" matches x-amz-date, which the gateway writes itself for provider bedrock`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Parse([]byte(strings.Replace(base, "%s", tt.extra, 1)), env(nil))
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
				t.Errorf("base_url %q (parsed %v), want %q", u.BaseURL, u.URL, tt.baseURL)
			}
		})
	}
}
