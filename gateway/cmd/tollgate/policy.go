package main

import (
	"fmt"
	"io"

	"github.com/tollgate/tollgate/policies"
)

const policyUsage = `usage:
  tollgate policy schema   print the policy file's JSON Schema (for editors; see docs/POLICY.md, "Editor support")
`

// policy runs `tollgate policy schema`. The schema printed is the one
// embedded in this build (policies/policy.schema.json, generated from the
// config types this build decodes policies into), so it matches what
// `tollgate validate` of the same build reads.
func policy(args []string, stdout, stderr io.Writer) int {
	if len(args) == 1 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
		fmt.Fprint(stdout, policyUsage)
		return 0
	}
	if len(args) != 1 || args[0] != "schema" {
		fmt.Fprint(stderr, policyUsage)
		return 2
	}
	if _, err := stdout.Write(policies.Schema); err != nil {
		fmt.Fprintf(stderr, "tollgate policy schema: %v\n", err)
		return 1
	}
	return 0
}
