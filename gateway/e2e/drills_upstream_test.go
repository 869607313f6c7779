package e2e

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/testkit/mockllm"
)

// upstreamDrill is one kind of upstream misbehaviour, injected through
// the mock's X-Mock-* headers.
type upstreamDrill struct {
	id      string
	fault   string               // what is injected
	hdr     func(n int) []string // the fault's headers for request n
	stream  bool                 // faulted requests are streams (else 1 in 2)
	spare   bool                 // the route has a second upstream the fault does not reach
	promise string               // what docs/ promise, for the report
	// want is the outcome the client must get; row checks the request's
	// call_log row (status, completion tokens, cost).
	want func(o *drillOutcome) bool
	row  func(o *drillOutcome, status, completion, cost int64) error
	// attempts bounds the upstream attempts of a faulted request
	// (healthy ones make exactly one). A fault after the upstream's first
	// byte is never retried (docs/POLICY.md, Retries).
	attempts [2]int
	// cancelAfter, when set, is the timeout after which the gateway must
	// cancel the faulted upstream request: the mock must see it closed
	// that long after it arrived, give or take upstreamCancelSlack, and
	// not after the fault's own delay, when the mock would have answered.
	cancelAfter time.Duration
}

// upstreamCancelSlack is how far from its timeout the mock may see a
// timed-out upstream request closed: the gateway starts its timer before
// the request reaches the mock (the lower side) and closes the connection
// when the timer fires (the upper side: 268-322 ms at worst in short runs
// on a 2-core machine at load average 24). An upstream request that was
// not cancelled is never seen closed: the fault holds it 2 s past the
// timeout, then the mock answers it.
const upstreamCancelSlack = time.Second

// noCost is the row of a request the upstream generated nothing for.
func noCost(o *drillOutcome, status, completion, cost int64) error {
	if status != int64(o.status) || cost != 0 || completion != 0 {
		return fmt.Errorf("row status %d, %d completion tokens, %d µ$; the client got %d and nothing was generated", status, completion, cost, o.status)
	}
	return nil
}

// partCost is the row of a stream cut after some of its text: charged
// for what was received, less than the whole reply.
func partCost(o *drillOutcome, status, completion, cost int64) error {
	if completion < int64(o.events) || completion >= drillTokens || cost <= 0 || cost >= drillCost {
		return fmt.Errorf("row: %d completion tokens, %d µ$ for a stream cut after %d of %d tokens", completion, cost, o.events, drillTokens)
	}
	return nil
}

// fullCost is the row of a reply served whole.
func fullCost(o *drillOutcome, status, completion, cost int64) error {
	if status != 200 || completion != drillTokens || cost != drillCost {
		return fmt.Errorf("row status %d, %d completion tokens, %d µ$; want 200, %d, %d", status, completion, cost, drillTokens, drillCost)
	}
	return nil
}

// fiveXX cycles the mock's failure status.
func fiveXX(n int) []string {
	return []string{mockllm.HeaderFailStatus, strconv.Itoa([]int{500, 502, 503}[n/3%3])}
}

// servedWhole: the fault did not reach the client.
func servedWhole(o *drillOutcome) bool { return o.kind == served }

// The drills' timeouts: a faulted request's wait is short, a healthy
// stream (tokens 10 ms apart) is far from them.
const upstreamTimeouts = "{connect: 1s, first_byte: 2s, idle: 2s, total: 1m}"

var upstreamDrills = []upstreamDrill{
	{
		id:      "upstream-5xx",
		fault:   "the upstream answers 500, 502 or 503 with an OpenAI-style error",
		hdr:     fiveXX,
		promise: "retried once (retry.attempts 2) on the route's only upstream, then the upstream's status and error body reach the client; nothing charged",
		want: func(o *drillOutcome) bool {
			return o.kind == refused && (o.status == 500 || o.status == 502 || o.status == 503) && o.code == "server_error"
		},
		row:      noCost,
		attempts: [2]int{2, 2},
	},
	{
		id:      "upstream-timeout",
		fault:   "the upstream sends nothing for 4 s (first_byte timeout 2 s)",
		hdr:     func(int) []string { return []string{mockllm.HeaderFailDelay, "4s"} },
		promise: "504 upstream_timeout after one first_byte timeout (an upstream that timed out is not tried again); the upstream request is cancelled; nothing charged",
		want: func(o *drillOutcome) bool {
			return o.kind == refused && o.status == 504 && o.code == "upstream_timeout"
		},
		row:         noCost,
		attempts:    [2]int{1, 1},
		cancelAfter: 2 * time.Second, // first_byte
	},
	{
		id:       "upstream-slow-first-byte",
		fault:    "the upstream's headers come after 500 ms and its first token 500 ms later (timeouts 2 s)",
		hdr:      func(int) []string { return []string{mockllm.HeaderFailDelay, "500ms", mockllm.HeaderTTFT, "500ms"} },
		promise:  "served whole, late: slowness within the timeouts is not a failure",
		want:     servedWhole,
		row:      fullCost,
		attempts: [2]int{1, 1},
	},
	{
		id:       "upstream-stall",
		fault:    "the upstream stalls for 5 s after its first token (idle timeout 2 s)",
		hdr:      func(int) []string { return []string{mockllm.HeaderInterToken, "5s"} },
		stream:   true,
		promise:  "the stream ends with a final upstream_timeout error event (no [DONE]); the text received is charged",
		want:     func(o *drillOutcome) bool { return o.kind == ended && o.code == "upstream_timeout" && o.events == 1 },
		row:      partCost,
		attempts: [2]int{1, 1},
	},
	{
		id:      "upstream-stream-cut",
		fault:   "the upstream's connection breaks after 5 of 20 tokens",
		hdr:     func(int) []string { return []string{mockllm.HeaderCutAfter, "6"} }, // the role event and 5 tokens
		stream:  true,
		promise: "the stream ends with a final upstream_stream_error event (no [DONE]); the text received is charged",
		want: func(o *drillOutcome) bool {
			return o.kind == ended && o.code == "upstream_stream_error" && o.events == 5
		},
		row:      partCost,
		attempts: [2]int{1, 1},
	},
	{
		id:       "upstream-garbage-sse",
		fault:    "the upstream sends malformed SSE mid-stream (truncated JSON, non-JSON, invalid UTF-8, wrong shapes, stray fields)",
		hdr:      func(int) []string { return []string{mockllm.HeaderGarbageAfter, "4"} },
		stream:   true,
		promise:  "what the gateway cannot parse it forwards as sent; the stream goes on to [DONE] with its whole text, and its usage is counted",
		want:     servedWhole,
		row:      fullCost,
		attempts: [2]int{1, 1},
	},
	{
		id:       "upstream-5xx-failover",
		fault:    "the upstream answers 500, 502 or 503; the route has a healthy second upstream",
		hdr:      fiveXX,
		spare:    true,
		promise:  "retried on the route's other upstream before any byte reached the client: served whole",
		want:     servedWhole,
		row:      fullCost,
		attempts: [2]int{1, 2},
	},
	{
		id:          "upstream-timeout-failover",
		fault:       "the upstream sends nothing for 4 s (first_byte timeout 2 s); the route has a healthy second upstream",
		hdr:         func(int) []string { return []string{mockllm.HeaderFailDelay, "4s"} },
		spare:       true,
		promise:     "after the first_byte timeout, retried on the other upstream: served whole, late",
		want:        servedWhole,
		row:         fullCost,
		attempts:    [2]int{1, 2},
		cancelAfter: 2 * time.Second, // first_byte
	},
}

// TestDrillUpstream runs streaming loads through two gateways — one whose
// route has one upstream, one whose route has a healthy spare besides —
// while every fourth request makes the upstream misbehave, each fault in
// turn. Healthy requests beside the faulted ones must be served whole,
// each faulted one must get what docs/ promise for its fault, and the
// ledger must account for every request. One report row per fault.
func TestDrillUpstream(t *testing.T) {
	w := newDrillWorld(t)
	_, gw := w.gateway(t, w.policy(t, drillPolicy{timeouts: upstreamTimeouts}))
	// The spare upstream is another mock that gets none of the client's
	// X-Mock-* headers: the fault never reaches it.
	spare, spareURL := startMock(t, drillMockConfig)
	_, gwSpare := w.gateway(t, w.policy(t, drillPolicy{timeouts: upstreamTimeouts,
		upstreams: fmt.Sprintf("  - name: spare\n    base_url: %s/v1\n    timeouts: %s\n", spareURL, upstreamTimeouts),
		route:     "upstreams: [{name: up}, {name: spare}]"}))

	var mu sync.Mutex
	attempts := map[string]int{}
	// When each request reached the faulted upstream, and when the mock
	// saw it closed before its reply was complete.
	arrived, closedAt := map[string]time.Time{}, map[string]time.Time{}
	for _, m := range []*mockllm.Server{w.mock, spare} {
		m.SetOnRequest(func(h http.Header, _ []byte) {
			now := time.Now()
			mu.Lock()
			id := h.Get("X-Request-Id")
			attempts[id]++
			if m == w.mock {
				arrived[id] = now
			}
			mu.Unlock()
		})
		defer m.SetOnRequest(nil)
	}
	w.mock.SetOnClose(func(id string, at time.Time) { mu.Lock(); closedAt[id] = at; mu.Unlock() })
	defer w.mock.SetOnClose(nil)
	var single, failover []upstreamDrill
	for _, d := range upstreamDrills {
		if d.spare {
			failover = append(failover, d)
		} else {
			single = append(single, d)
		}
	}
	for _, run := range []struct {
		name   string
		url    string
		drills []upstreamDrill
	}{{"one-upstream", gw, single}, {"failover", gwSpare, failover}} {
		t.Run(run.name, func(t *testing.T) {
			tenantID := "drill-up-" + run.name
			key := w.tenant(t, tenantID)
			closedBefore := w.mock.Stats().ClientClosed
			load := newDrillLoad(t, tenantID, run.url, key, scaled(12, 32), func(n int) drillReq {
				if n%4 != 0 {
					return healthyStreams(n)
				}
				k := n / 4
				d := run.drills[k%len(run.drills)]
				return drillReq{stream: d.stream || k/len(run.drills)%2 == 0, fault: d.id, hdr: d.hdr(k / len(run.drills))}
			})
			load.run(12) // warm
			load.start()
			time.Sleep(scaled(2*time.Second, 10*time.Second))
			load.stopLoad()
			outs := load.outcomes()

			byID := map[string]*upstreamDrill{}
			for i := range run.drills {
				byID[run.drills[i].id] = &run.drills[i]
			}
			expectOutcomes(t, outs, func(o *drillOutcome) bool {
				if o.fault == "" {
					return o.kind == served
				}
				return byID[o.fault].want(o)
			})
			c := w.checkLedger(t, tenantID, outs, nil)
			expectNothingLost(t, c)
			if held := w.waitReleased(t, tenantID, 5*time.Second); held != 0 {
				t.Errorf("%d µ$ still held after the load", held)
			}
			var ids []string
			for i := range outs {
				ids = append(ids, outs[i].id)
			}
			rows := w.rowsOf(t, ids)
			mu.Lock()
			defer mu.Unlock()
			badHealthy := 0
			for i := range outs {
				o := &outs[i]
				if o.fault != "" {
					continue
				}
				if r := rows[o.id]; attempts[o.id] != 1 || fullCost(o, r[0], r[1], r[2]) != nil {
					if badHealthy++; badHealthy <= 3 {
						t.Errorf("healthy request %s: sent upstream %d times, row %v", o.id, attempts[o.id], r)
					}
				}
			}
			closed := w.mock.Stats().ClientClosed - closedBefore
			healthy := countOf(outs, func(o *drillOutcome) bool { return o.fault == "" })
			for _, d := range run.drills {
				mine := slices.DeleteFunc(slices.Clone(outs), func(o drillOutcome) bool { return o.fault != d.id })
				if len(mine) < 2 {
					t.Errorf("%s: only %d faulted requests", d.id, len(mine))
					continue
				}
				lo, hi, bad := 1<<30, 0, 0
				for i := range mine {
					o := &mine[i]
					n := attempts[o.id]
					lo, hi = min(lo, n), max(hi, n)
					if r, ok := rows[o.id]; ok {
						if err := d.row(o, r[0], r[1], r[2]); err != nil {
							if bad++; bad <= 3 {
								t.Errorf("%s: %v", o.id, err)
							}
						}
					}
				}
				if lo < d.attempts[0] || hi > d.attempts[1] {
					t.Errorf("%s: faulted requests were sent upstream %d to %d times, want %d to %d", d.id, lo, hi, d.attempts[0], d.attempts[1])
				}
				cancelled := ""
				if d.cancelAfter > 0 {
					cancelled = "; " + checkCancelled(t, d, mine, arrived, closedAt)
				}
				report(t, drillResult{
					id:    d.id,
					fault: d.fault,
					load: fmt.Sprintf("%d clients, %d requests in %s, every 4th faulted with one of %d faults in turn: %d with this one",
						load.workers, len(outs), dur(load.took), len(run.drills), len(mine)),
					happened: fmt.Sprintf("%s. Measured: %s; upstream attempts per faulted request: %d–%d%s; "+
						"the %d healthy requests of the load: %d served whole (upstream requests the gateway hung up on, whole load: %d)",
						d.promise, tallyString(onlyFaulted(mine)), lo, hi, cancelled, healthy,
						countOf(outs, func(o *drillOutcome) bool { return o.fault == "" && o.kind == served }), closed),
					lost:   c.lost(),
					ledger: c.evidence(),
					run:    "^TestDrillUpstream$/^" + run.name + "$",
				})
			}
		})
	}
}

// checkCancelled checks that the mock saw each of the faulted requests
// mine closed d.cancelAfter after it arrived (within upstreamCancelSlack),
// and says how long after the timeout the last one was closed.
func checkCancelled(t *testing.T, d upstreamDrill, mine []drillOutcome, arrived, closed map[string]time.Time) string {
	t.Helper()
	bad, latest := 0, time.Duration(-1<<62)
	for i := range mine {
		id := mine[i].id
		a, sent := arrived[id]
		c, ok := closed[id]
		if !sent {
			continue // the client left before the gateway sent it (none do here)
		}
		after := c.Sub(a) - d.cancelAfter
		if !ok || after < -upstreamCancelSlack || after > upstreamCancelSlack {
			if bad++; bad <= 3 {
				if !ok {
					t.Errorf("%s: %s: the upstream never saw its request closed (its timeout: %s)", d.id, id, d.cancelAfter)
				} else {
					t.Errorf("%s: %s: the upstream saw its request closed %s after it arrived; want %s ± %s (its timeout)",
						d.id, id, dur(c.Sub(a)), d.cancelAfter, upstreamCancelSlack)
				}
			}
			continue
		}
		latest = max(latest, after)
	}
	if bad > 0 {
		return fmt.Sprintf("%d of %d upstream requests not cancelled at their timeout", bad, len(mine))
	}
	return fmt.Sprintf("the upstream saw every one closed at its timeout (%s after it at the latest)", dur(max(latest, 0)))
}

// onlyFaulted tallies the faulted requests' outcomes, without the fault's name.
func onlyFaulted(outs []drillOutcome) map[string]int {
	m := map[string]int{}
	for i := range outs {
		if outs[i].fault != "" {
			m[outs[i].label()]++
		}
	}
	return m
}

func countOf(outs []drillOutcome, f func(o *drillOutcome) bool) int {
	n := 0
	for i := range outs {
		if f(&outs[i]) {
			n++
		}
	}
	return n
}
