// Command globalstate is a guard that breaks the state rule: it stops a
// reply containing "secret" even when the word is split across events, but
// keeps the tail of the previous event in a global instead of the host's
// per-request state. On one instance and one request at a time it works;
// with callbacks spread over instances, or two requests interleaved, it
// misses the word. The conformance suite's state checks must catch it.
package main

import (
	"bytes"

	"github.com/tollgate/tollgate/sdk"
)

func main() {}

var tail []byte // wrong: per-request data in a global

func init() {
	sdk.OnChunk(func(c *sdk.Chunk) sdk.Verdict {
		if c.IsDone() {
			tail = tail[:0]
			return sdk.Continue
		}
		seen := append(append([]byte(nil), tail...), c.Bytes()...)
		if bytes.Contains(seen, []byte("secret")) {
			tail = tail[:0]
			return c.Stop("[blocked]", "content_filter")
		}
		if len(seen) > 5 {
			seen = seen[len(seen)-5:]
		}
		tail = append(tail[:0], seen...)
		return sdk.Continue
	})
}
