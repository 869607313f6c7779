package e2e

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/testkit/mockllm"
)

// TestDrillClientDisconnect: under streaming load, one client in three
// hangs up — mid-stream after 5 of 20 tokens, or while the upstream has
// not answered yet. Promised (DESIGN §6, TestClientDisconnectCancelsUpstream):
// the upstream request is cancelled, the usage so far is settled and
// logged, holds are released, and the other clients do not notice.
func TestDrillClientDisconnect(t *testing.T) {
	const id = "client-disconnect"
	w := newDrillWorld(t)
	key := w.tenant(t, "drill-hangup")
	srv, gw := w.gateway(t, w.policy(t, drillPolicy{}))
	load := newDrillLoad(t, "drill-hangup", gw, key, scaled(8, 32), func(n int) drillReq {
		switch n % 6 {
		case 0: // tokens 100 ms apart: the upstream is still sending when the client leaves
			return drillReq{stream: true, fault: "mid-stream", hangUpAfter: 5, hdr: []string{mockllm.HeaderInterToken, "100ms"}}
		case 3:
			return drillReq{stream: n%12 == 3, fault: "before-first-byte", hangUpWait: 150 * time.Millisecond,
				hdr: []string{mockllm.HeaderFailDelay, "3s"}}
		}
		return healthyStreams(n)
	})
	// The upstream's view of each request: received, and closed before
	// its reply was complete.
	var mu sync.Mutex
	received, closedEarly := map[string]bool{}, map[string]bool{}
	w.mock.SetOnRequest(func(h http.Header, _ []byte) { mu.Lock(); received[h.Get("X-Request-Id")] = true; mu.Unlock() })
	w.mock.SetOnClose(func(id string, _ time.Time) { mu.Lock(); closedEarly[id] = true; mu.Unlock() })
	load.run(8)
	load.start()
	time.Sleep(scaled(2*time.Second, 10*time.Second))
	load.stopLoad()
	outs := load.outcomes()

	var mid, early []string
	expectOutcomes(t, outs, func(o *drillOutcome) bool {
		switch o.fault {
		case "":
			return o.kind == served
		case "mid-stream":
			mid = append(mid, o.id)
		default:
			early = append(early, o.id)
		}
		return o.kind == hungUp
	})
	if len(mid) == 0 || len(early) == 0 {
		t.Fatalf("no hang-ups: %s", tallyString(tally(outs)))
	}
	// Every hang-up whose request had reached the upstream reached it as
	// a closed connection (one that left before the gateway sent it on was
	// never sent).
	reached, notCancelled := 0, 0
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		mu.Lock()
		reached, notCancelled = 0, 0
		for _, id := range append(append([]string(nil), mid...), early...) {
			if received[id] {
				reached++
				if !closedEarly[id] {
					notCancelled++
				}
			}
		}
		for i := range outs {
			if outs[i].fault == "" && closedEarly[outs[i].id] {
				notCancelled = -1 << 20 // a healthy request's upstream was closed: fails below
			}
		}
		mu.Unlock()
		if notCancelled == 0 || time.Now().After(end) {
			break
		}
	}
	if notCancelled != 0 || reached < len(mid) {
		t.Errorf("of %d hang-ups that reached the upstream, %d were not cancelled there (negative: a healthy request's was)", reached, notCancelled)
	}
	waitFor(t, func() bool { return srv.InFlight() == 0 })
	c := w.checkLedger(t, "drill-hangup", outs, nil)
	expectNothingLost(t, c)
	rows := w.rowsOf(t, append(append([]string(nil), mid...), early...))
	var midCost int64
	bad := 0
	for _, id := range mid {
		r := rows[id]
		midCost += r[2]
		if r[1] < 5 || r[1] >= drillTokens || r[2] <= 0 || r[2] >= drillCost {
			if bad++; bad <= 3 {
				t.Errorf("%s: hung up after 5 of %d tokens, logged %d tokens, %d µ$", id, drillTokens, r[1], r[2])
			}
		}
	}
	for _, id := range early {
		// 499: the client closed first (nginx's code, as the gateway logs it).
		if r := rows[id]; r[0] != 499 || r[1] != 0 || r[2] != 0 {
			if bad++; bad <= 6 {
				t.Errorf("%s: hung up before any reply, logged status %d, %d tokens, %d µ$", id, r[0], r[1], r[2])
			}
		}
	}
	if held := w.waitReleased(t, "drill-hangup", 5*time.Second); held != 0 {
		t.Errorf("%d µ$ still held after the load", held)
	}
	report(t, drillResult{
		id:    id,
		fault: "1 client in 3 hangs up: mid-stream after 5 of 20 tokens, or 150 ms into waiting for an upstream that has not answered",
		load:  fmt.Sprintf("%d clients, %d requests in %s", load.workers, len(outs), dur(load.took)),
		happened: fmt.Sprintf("%d mid-stream and %d early hang-ups; the upstream saw each of the %d that had reached it closed; mid-stream ones logged and charged for "+
			"the tokens sent so far (%.0f µ$ on average of %d for a whole reply), early ones logged as 499 with no charge; holds released; "+
			"the %d other requests served whole", len(mid), len(early), reached, float64(midCost)/float64(max(len(mid), 1)), drillCost,
			countOf(outs, func(o *drillOutcome) bool { return o.fault == "" })),
		lost:   c.lost(),
		ledger: c.evidence(),
		run:    "^TestDrillClientDisconnect$",
	})
}
