// Command spin scans the request body with a quadratic loop: fine for
// small requests, far past the callback deadline for a large one. The
// conformance suite's limits.deadline check must catch it.
package main

import "github.com/tollgate/tollgate/sdk"

func main() {}

var sink int

func init() {
	sdk.OnRequest(func(r *sdk.Request) sdk.Verdict {
		b := r.Body()
		n := 0
		for i := range b {
			for j := i; j < len(b); j++ {
				if b[i] == b[j] {
					n++
				}
			}
		}
		sink = n
		return sdk.Continue
	})
}
