// Command holdrequest answers the request phase with HOLD, a verdict
// allowed only in the chunk phase. The conformance suite's phases.request
// check must catch it.
package main

import "github.com/tollgate/tollgate/sdk"

func main() {}

func init() {
	sdk.OnRequest(func(r *sdk.Request) sdk.Verdict { return sdk.Hold })
}
