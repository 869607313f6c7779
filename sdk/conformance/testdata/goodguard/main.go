// Command goodguard is the conformance suite's well-behaved guest: it
// rejects a request whose body contains a configured word and stops a
// reply that contains it, even split across events, keeping the tail of
// the text seen so far in the host's per-request state.
package main

import (
	"bytes"
	"encoding/json"
	"errors"

	"github.com/tollgate/tollgate/sdk"
)

func main() {}

var word []byte

func init() {
	sdk.OnConfigure(func(cfg []byte) error {
		var c struct {
			Word string `json:"word"`
		}
		if err := json.Unmarshal(cfg, &c); err != nil {
			return errors.New("goodguard: the config must be a JSON object like {\"word\": \"secret\"}")
		}
		if c.Word == "" {
			return errors.New("goodguard: word is required")
		}
		word = []byte(c.Word)
		return nil
	})
	sdk.OnRequest(func(r *sdk.Request) sdk.Verdict {
		if bytes.Contains(r.Body(), word) {
			return r.Reject(400, "invalid_request_error", "content_blocked", "The request contains a blocked term.")
		}
		return sdk.Continue
	})
	sdk.OnChunk(func(c *sdk.Chunk) sdk.Verdict {
		if c.IsDone() {
			return sdk.Continue
		}
		seen := append(append([]byte(nil), c.State()...), c.Bytes()...)
		if bytes.Contains(seen, word) {
			return c.Stop("[blocked]", "content_filter")
		}
		if keep := len(word) - 1; len(seen) > keep {
			seen = seen[len(seen)-keep:]
		}
		if err := c.SetState(seen); err != nil {
			sdk.Log(sdk.LevelError, "goodguard: state: "+err.Error())
		}
		return sdk.Continue
	})
}
