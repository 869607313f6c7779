package policies

import _ "embed"

// Schema is policies/policy.schema.json, the JSON Schema of the policy file
// that editors validate policies against (see docs/POLICY.md, "Editor
// support"). It is generated from the config types; a test fails when it is
// stale.
//
//go:generate go run ../gateway/cmd/policyschema -o policy.schema.json
//go:embed policy.schema.json
var Schema []byte
