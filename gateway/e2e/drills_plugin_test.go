package e2e

import (
	"fmt"
	"testing"
	"time"
)

// pluginDrills are the hostile plugin's misdeeds (gateway/e2e/testdata/faultplugin).
var pluginDrills = []struct {
	id, name string
	actions  []string // alternated
	fault    string
}{
	{"plugin-trap", "trap", []string{"trap"}, "the plugin traps (a Go panic in the guest)"},
	{"plugin-loop", "loop", []string{"loop"}, "the plugin spins forever (deadline 200 ms)"},
	{"plugin-membomb", "membomb", []string{"membomb"}, "the plugin allocates 1 MiB blocks without bound (memory limit 32 MiB)"},
	{"plugin-wildptr", "wildptr", []string{"wildptr", "wildbuf"}, "the plugin passes the host pointers outside its memory (a log message, an output buffer)"},
}

// pluginTargets are where a fault strikes: which plugin (one fail_closed,
// one fail_open) and in which phase.
var pluginTargets = []string{"closed:request", "closed:chunk", "open:request", "open:chunk"}

// TestDrillHostilePlugin runs a streaming load through a gateway with two
// copies of a hostile plugin, one fail_closed and one fail_open; every
// fourth request makes one of them misbehave, in the request phase or on
// the reply's second chunk. Promised (docs/PLUGINS.md, Sandbox and
// limits): the instance is discarded and the failure mode applied —
// fail_closed: a 500 plugin_failed, or a final error event mid-stream;
// fail_open: the callback is skipped and the reply served whole — while
// the gateway goes on serving everyone else.
func TestDrillHostilePlugin(t *testing.T) {
	w := newDrillWorld(t)
	fp := faultPluginPath(t)
	plugins := fmt.Sprintf(`  - name: closed
    path: %[1]s
    on_error: fail_closed
    limits: {deadline: 200ms, memory: 32MiB}
    config: {name: closed}
  - name: open
    path: %[1]s
    on_error: fail_open
    limits: {deadline: 200ms, memory: 32MiB}
    config: {name: open}
`, fp)
	srv, gw := w.gateway(t, w.policy(t, drillPolicy{plugins: plugins}))
	metrics := srv.MetricsHandler()
	failures := func(plugin string) float64 {
		return metric(t, metrics, "tollgate_plugin_traps_total", `plugin="`+plugin+`"`) +
			metric(t, metrics, "tollgate_plugin_timeouts_total", `plugin="`+plugin+`"`)
	}
	for _, d := range pluginDrills {
		t.Run(d.name, func(t *testing.T) {
			tenantID := "drill-plugin-" + d.name
			key := w.tenant(t, tenantID)
			load := newDrillLoad(t, tenantID, gw, key, scaled(8, 24), func(n int) drillReq {
				if n%4 != 0 {
					return healthyStreams(n)
				}
				target := pluginTargets[n/8%len(pluginTargets)]
				action := d.actions[n/32%len(d.actions)]
				// Faulted requests alternate streamed and not: a reply
				// checked whole is the chunk phase too.
				return drillReq{stream: n%8 == 4, fault: target, hdr: []string{"X-Drill-Fault", target + ":" + action}}
			})
			closedBefore, openBefore := failures("closed"), failures("open")
			load.run(8)
			load.start()
			time.Sleep(scaled(2*time.Second, 8*time.Second))
			load.stopLoad()
			outs := load.outcomes()

			byTarget := map[string]int{}
			expectOutcomes(t, outs, func(o *drillOutcome) bool {
				byTarget[o.fault]++
				switch o.fault {
				case "closed:request":
					return o.kind == refused && o.status == 500 && o.code == "plugin_failed"
				case "closed:chunk":
					if o.events == 0 && o.kind == refused { // a reply checked whole
						return o.status == 500 && o.code == "plugin_failed"
					}
					return o.kind == ended && o.code == "plugin_failed"
				}
				return o.kind == served // fail_open, and everyone else
			})
			closed := failures("closed") - closedBefore
			open := failures("open") - openBefore
			wantClosed := byTarget["closed:request"] + byTarget["closed:chunk"]
			wantOpen := byTarget["open:request"] + byTarget["open:chunk"]
			if int(closed) != wantClosed || int(open) != wantOpen || wantClosed == 0 || wantOpen == 0 {
				t.Errorf("plugin failures counted: closed %v, open %v; faulted requests: closed %d, open %d", closed, open, wantClosed, wantOpen)
			}
			c := w.checkLedger(t, tenantID, outs, nil)
			expectNothingLost(t, c)
			if held := w.waitReleased(t, tenantID, 5*time.Second); held != 0 {
				t.Errorf("%d µ$ still held after the load", held)
			}
			report(t, drillResult{
				id:    d.id,
				fault: d.fault + ", on every 4th request: fail_closed and fail_open copies, request phase and mid-reply",
				load:  fmt.Sprintf("%d clients, %d requests (%d faulted) in %s", load.workers, len(outs), wantClosed+wantOpen, dur(load.took)),
				happened: fmt.Sprintf("each misdeed stopped and its instance discarded (%v failures counted for %d faulted requests); faulted requests: %s; "+
					"the %d healthy requests beside them served whole, in %s (a whole stream takes ~0.25 s unloaded)",
					closed+open, wantClosed+wantOpen, tallyString(onlyFaulted(outs)),
					countOf(outs, healthyServed), latency(outs, healthyServed)),
				lost:   c.lost(),
				ledger: c.evidence(),
				run:    "^TestDrillHostilePlugin$/^" + d.name + "$",
			})
		})
	}
}
