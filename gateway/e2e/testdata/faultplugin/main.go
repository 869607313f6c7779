// Command faultplugin is the hostile plugin of the reliability drills
// (gateway/e2e/drills_plugin_test.go). A request whose X-Drill-Fault
// header names this plugin makes it trap, spin forever, allocate without
// bound or pass a wild pointer to the host — in the request phase, or on
// the reply's second chunk (a non-streamed reply: its one chunk) — while
// every other request passes untouched, so a drill can run hostile and
// healthy requests through one gateway at once.
//
// Build (from the repository root):
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o faultplugin.wasm ./gateway/e2e/testdata/faultplugin
//
// Config (unknown keys are refused):
//
//	{
//	  "name": "closed",   // the name X-Drill-Fault selects this plugin by
//	  "gen": "3"          // if set, every response carries X-Drill-Gen: 3
//	}
//
// Header: X-Drill-Fault: NAME:PHASE:ACTION, PHASE request or chunk, ACTION
// one of trap, loop, membomb, wildptr, wildbuf.
package main

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/tollgate/tollgate/sdk"
)

func main() {} // not run in a c-shared build; init registers the handlers

func init() {
	sdk.OnConfigure(configure)
	sdk.OnRequest(onRequest)
	sdk.OnChunk(onChunk)
}

var cfg struct {
	Name string `json:"name"`
	Gen  string `json:"gen"`
}

func configure(raw []byte) error {
	d := json.NewDecoder(strings.NewReader(string(raw)))
	d.DisallowUnknownFields()
	if err := d.Decode(&cfg); err != nil {
		return fmt.Errorf("faultplugin config: %v", err)
	}
	if cfg.Name == "" {
		return fmt.Errorf("faultplugin config: name is required")
	}
	return nil
}

func onRequest(r *sdk.Request) sdk.Verdict {
	if cfg.Gen != "" {
		r.SetResponseHeader("X-Drill-Gen", cfg.Gen)
	}
	h, ok := r.Header("X-Drill-Fault")
	if !ok {
		return sdk.Continue
	}
	name, rest, _ := strings.Cut(h, ":")
	phase, action, _ := strings.Cut(rest, ":")
	if name != cfg.Name {
		return sdk.Continue
	}
	switch phase {
	case "request":
		disaster(action)
	case "chunk":
		// The chunk phase counts its calls in the state and strikes on
		// the second: a stream has started by then.
		r.SetState([]byte(action + " 0"))
	}
	return sdk.Continue
}

func onChunk(c *sdk.Chunk) sdk.Verdict {
	st := c.State()
	if st == nil {
		return sdk.Continue
	}
	action, count, _ := strings.Cut(string(st), " ")
	n, _ := strconv.Atoi(count)
	n++
	// Saved before the strike: under fail_open the stream goes on, and
	// the later chunks pass.
	c.SetState([]byte(action + " " + strconv.Itoa(n)))
	if n == 2 || c.IsWhole() { // a reply checked whole has one chunk
		disaster(action)
	}
	return sdk.Continue
}

var sink [][]byte // keeps membomb's blocks alive

// disaster never returns.
func disaster(action string) {
	switch action {
	case "trap":
		panic("faultplugin: trap")
	case "loop":
		for {
		}
	case "membomb":
		for {
			b := make([]byte, 1<<20)
			b[0], b[len(b)-1] = 1, 1
			sink = append(sink, b)
		}
	case "wildptr":
		wildLog()
	case "wildbuf":
		wildRequestField()
	}
	panic("faultplugin: " + action + " returned")
}
