// Command usageprobe is a test plugin for the holdback end-to-end tests:
// in the end phase it logs, at warn level, what the gateway counted as
// sent and the guard_action fact, so a test can compare them with what
// its client received:
//
//	usageprobe: request <id> text_bytes_sent=<n> guard_action=<fact> end_flags=<flags>
package main

import (
	"strconv"

	"github.com/tollgate/tollgate/sdk"
)

func main() {}

func init() {
	sdk.OnEnd(func(e *sdk.End) {
		action, _ := e.Fact("guard_action")
		sdk.Log(sdk.LevelWarn, "usageprobe: request "+e.RequestID()+
			" text_bytes_sent="+strconv.FormatInt(e.Usage().TextBytes, 10)+
			" guard_action="+action+
			" end_flags="+strconv.FormatUint(uint64(e.Flags()), 10))
	})
}
