// Command leak keeps 16 KiB of every request in a global it never
// trims, so its memory grows until the instance runs out. The conformance
// suite's limits.growth check must catch it.
package main

import "github.com/tollgate/tollgate/sdk"

func main() {}

var kept [][]byte

func init() {
	sdk.OnRequest(func(r *sdk.Request) sdk.Verdict {
		kept = append(kept, make([]byte, 16<<10))
		return sdk.Continue
	})
}
