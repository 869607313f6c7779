package config

import (
	"fmt"
	"path"
	"regexp"
	"strings"
)

func init() { RegisterProvider(ProviderBedrock, (*Upstream).validateBedrock) }

// awsRegion is the shape of an AWS region name: us-east-1, eu-central-2,
// us-gov-west-1, ap-southeast-5.
var awsRegion = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-[0-9]+$`)

// bedrockSignedHeaders are the headers the SigV4 signature covers or
// carries; neither headers nor forward_headers may set them.
var bedrockSignedHeaders = []string{"authorization", "x-amz-date", "x-amz-security-token", "x-amz-content-sha256"}

// validateBedrock checks a bedrock upstream: bedrock.region is required
// (it names the signing scope and, by default, the endpoint), base_url
// defaults to the region's bedrock-runtime endpoint, and the signature's
// headers are the gateway's to write. api_key_env, if set, is a Bedrock
// API key sent as a bearer token instead of signing.
func (u *Upstream) validateBedrock(at string, ps *Problems) {
	switch {
	case u.Bedrock == nil || u.Bedrock.Region == "":
		ps.add(at+".bedrock.region", "is required for provider %s (the AWS region, e.g. us-east-1)", ProviderBedrock)
	case !awsRegion.MatchString(u.Bedrock.Region):
		ps.add(at+".bedrock.region", "%q is not an AWS region name (e.g. us-east-1)", u.Bedrock.Region)
	case u.BaseURL == "":
		u.BaseURL = "https://bedrock-runtime." + u.Bedrock.Region + ".amazonaws.com"
	}
	for i, h := range u.ForwardHeaders {
		for _, name := range bedrockSignedHeaders {
			if ok, _ := path.Match(strings.ToLower(h), name); ok {
				ps.add(fmt.Sprintf("%s.forward_headers[%d]", at, i), "%q matches %s, which the gateway writes itself for provider %s", h, name, ProviderBedrock)
			}
		}
	}
	for k := range u.Headers {
		for _, name := range bedrockSignedHeaders {
			if strings.EqualFold(k, name) {
				ps.add(at+".headers."+k, "is written by the gateway for provider %s (SigV4 signing, or api_key_env)", ProviderBedrock)
			}
		}
	}
}
