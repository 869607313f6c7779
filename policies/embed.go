// Package policies holds Tollgate's example policies. The default policy is
// embedded in the tollgate binary and used when no -policy flag is given.
package policies

import _ "embed"

// Default is policies/default.yaml.
//
//go:embed default.yaml
var Default []byte
