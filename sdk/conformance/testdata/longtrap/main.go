// Command longtrap copies each event's text into a fixed 4 KiB buffer and
// panics (traps) on a longer one. The conformance suite's phases.chunk
// check must catch it.
package main

import "github.com/tollgate/tollgate/sdk"

func main() {}

var buf [4096]byte

func init() {
	sdk.OnChunk(func(c *sdk.Chunk) sdk.Verdict {
		b := c.Bytes()
		if len(b) > len(buf) {
			panic("text longer than the buffer")
		}
		copy(buf[:], b)
		return sdk.Continue
	})
}
