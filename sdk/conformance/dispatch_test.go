package conformance

import (
	"os"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/sdk/wasmhost"
)

// A module that dispatches calls passes the suite: its http call gets a
// 200 with {}, and its response handler decides.
func TestDispatchingPluginConforms(t *testing.T) {
	rep, err := Check(build(t, "../plugintest/testdata/dispatchplugin"),
		Options{Config: []byte(`{"url":"https://classifier.test/v1/classify"}`), Quick: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Results {
		if !r.OK || r.Skipped {
			t.Errorf("%s: not passed: %s", r.Name, r.Detail)
		}
	}
}

// The request battery takes FAIL, after a dispatched host service, as a
// verdict the plugin may give (on_error decides), not a problem. (The
// battery alone: a whole Check compiles the module cold, which the test
// above already pays for.)
func TestFailVerdictAccepted(t *testing.T) {
	module, err := os.ReadFile(build(t, "../wasmhost/testdata/testplugin"))
	if err != nil {
		t.Fatal(err)
	}
	c := &checker{opts: Options{Deadline: wasmhost.DefaultDeadline, MemoryBytes: wasmhost.DefaultMemoryBytes},
		module: module, report: &Report{}, baseline: map[string]string{}, overran: map[string]bool{}}
	defer func() {
		for _, f := range c.closers {
			f()
		}
	}()
	l, err := c.load(1, []byte(`{"request":["dispatch:ratelimit.admit=fail_open 1 0","pause"],"call_response":"fail"}`))
	if err != nil {
		t.Fatal(err)
	}
	req, _ := c.requestBattery(l.pipe)
	if !req.OK || !strings.Contains(req.Detail, "failed by the plugin (FAIL)") || len(c.overran) != 0 {
		t.Fatalf("%+v, overran %v", req, c.overran)
	}
}
