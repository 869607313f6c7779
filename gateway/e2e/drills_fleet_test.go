package e2e

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/config"
	"github.com/tollgate/tollgate/gateway/internal/fleet"
	"github.com/tollgate/tollgate/gateway/internal/proxy"
	"github.com/tollgate/tollgate/gateway/internal/testkit/mockllm"
	"github.com/tollgate/tollgate/gateway/internal/testkit/redistest"
)

// netLink is a TCP relay between the gateways and Redis that the drill
// cuts and restores: the gateways lose Redis (connections reset, new ones
// refused) while Redis keeps its data, as in a network partition.
type netLink struct {
	target, addr string

	mu    sync.Mutex
	ln    net.Listener // nil while cut
	conns map[net.Conn]struct{}
}

func newNetLink(t *testing.T, target string) *netLink {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &netLink{target: target, addr: ln.Addr().String(), conns: map[net.Conn]struct{}{}}
	l.serve(ln)
	t.Cleanup(l.cut)
	return l
}

func (l *netLink) serve(ln net.Listener) {
	l.ln = ln
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go l.relay(c)
		}
	}()
}

func (l *netLink) relay(c net.Conn) {
	up, err := net.Dial("tcp", l.target)
	if err != nil {
		c.Close()
		return
	}
	l.mu.Lock()
	if l.ln == nil { // cut meanwhile
		l.mu.Unlock()
		c.Close()
		up.Close()
		return
	}
	l.conns[c], l.conns[up] = struct{}{}, struct{}{}
	l.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { io.Copy(up, c); done <- struct{}{} }()
	go func() { io.Copy(c, up); done <- struct{}{} }()
	<-done
	c.Close()
	up.Close()
	l.mu.Lock()
	delete(l.conns, c)
	delete(l.conns, up)
	l.mu.Unlock()
}

// cut closes the listener and every relayed connection.
func (l *netLink) cut() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ln != nil {
		l.ln.Close()
		l.ln = nil
	}
	for c := range l.conns {
		c.Close()
	}
	clear(l.conns)
}

// restore listens again on the same address.
func (l *netLink) restore(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp", l.addr)
	if err != nil {
		t.Fatal(err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.serve(ln)
}

// fleetReplica is an in-process gateway the drill can stop (gracefully)
// while the others serve.
type fleetReplica struct {
	name string
	srv  *proxy.Server
	url  string
	stop func()
}

func startFleetReplica(t *testing.T, name, pol string) *fleetReplica {
	t.Helper()
	p, err := config.Parse([]byte(pol), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatalf("policy: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := proxy.New(p, slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelError})))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { srv.Serve(ln); close(done) }()
	var once sync.Once
	r := &fleetReplica{name: name, srv: srv, url: "http://" + ln.Addr().String()}
	r.stop = func() { once.Do(func() { srv.Shutdown(0, 5*time.Second); <-done }) }
	t.Cleanup(r.stop)
	return r
}

func (r *fleetReplica) live(t *testing.T) int {
	return int(metric(t, r.srv.MetricsHandler(), "tollgate_replicas_live", ""))
}

// burstResult is what one burst of requests to one replica got.
type burstResult struct {
	admitted, limited int
	limits            map[string]int // x-ratelimit-limit-requests → responses
	took              time.Duration
}

// burst sends n requests of the limited tenant to r, 8 at a time.
func burst(t *testing.T, client *http.Client, r *fleetReplica, n int) burstResult {
	t.Helper()
	res := burstResult{limits: map[string]int{}}
	var mu sync.Mutex
	jobs := make(chan struct{})
	var wg sync.WaitGroup
	start := time.Now()
	for range 8 {
		wg.Go(func() {
			for range jobs {
				req, _ := http.NewRequest("POST", r.url+"/v1/chat/completions", strings.NewReader(chatOnce))
				req.Header.Set("Authorization", "Bearer tg_rl_1")
				resp, err := client.Do(req)
				if err != nil {
					t.Errorf("%s: %v", r.name, err)
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				mu.Lock()
				switch resp.StatusCode {
				case 200:
					res.admitted++
				case 429:
					res.limited++
				default:
					t.Errorf("%s: status %d", r.name, resp.StatusCode)
				}
				res.limits[resp.Header.Get("x-ratelimit-limit-requests")]++
				mu.Unlock()
			}
		})
	}
	for range n {
		jobs <- struct{}{}
	}
	close(jobs)
	wg.Wait()
	res.took = time.Since(start)
	return res
}

// gcraMost is the most a GCRA cell of rate per minute, full at the start,
// admits in a window of length w: its burst, then one per emission
// interval ⌈60 s ÷ rate⌉.
func gcraMost(rate int64, w time.Duration) int64 {
	interval := (time.Minute + time.Duration(rate) - 1) / time.Duration(rate)
	return rate + int64(w/interval)
}

func members(t *testing.T, rds *redistest.Server) []string {
	t.Helper()
	out, err := rds.Do("ZRANGE", fleet.DefaultKey, "0", "-1")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(out)
}

func waitUntil(t *testing.T, what string, within time.Duration, cond func() bool) time.Time {
	t.Helper()
	for end := time.Now().Add(within); ; time.Sleep(20 * time.Millisecond) {
		if cond() {
			return time.Now()
		}
		if time.Now().After(end) {
			t.Fatalf("waited %s for %s", within, what)
		}
	}
}

// TestDrillFleetOutage: replicas that share a Redis count each other by
// heartbeats; Redis goes away (the network between them is cut, Redis
// keeps its data) while replicas join and leave. Promised
// (docs/adr/0024-live-replica-count.md): under fail_open each replica
// that counted n replicas before the outage admits limit ÷ n, frozen for
// the outage (a replica leaving does not raise the others' share); one
// that starts during the outage has seen no count and admits limit ÷ the
// floor (here none: the whole limit); so the admissions across replicas
// stay within Σ per replica of its share's GCRA bound. When Redis returns
// the replica that left is no longer counted, and Redis decides again.
func TestDrillFleetOutage(t *testing.T) {
	const id = "fleet-outage"
	const limit = 60 // the plan's RPM
	rds := redistest.Start(t)
	link := newNetLink(t, rds.Addr())
	_, mockURL := startMock(t, mockllm.Config{Tokens: 1})
	pol := limitedPolicy(t, mockURL, link.addr, limit, 0, `{on_redis_error: fail_open}`)
	n := scaled(2, 3) // replicas before the outage
	perBurst := scaled(100, 400)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}

	first := startFleetReplica(t, "r1", pol)
	waitUntil(t, "r1 to count itself", 10*time.Second, func() bool { return len(members(t, rds)) == 1 })
	firstID := members(t, rds)[0]
	reps := []*fleetReplica{first}
	for i := 2; i <= n; i++ {
		reps = append(reps, startFleetReplica(t, fmt.Sprint("r", i), pol))
	}
	waitUntil(t, fmt.Sprintf("every replica to count %d", n), 10*time.Second, func() bool {
		for _, r := range reps {
			if r.live(t) != n {
				return false
			}
		}
		return true
	})

	cut := time.Now()
	link.cut()
	// A replica joins during the outage (its start waits up to 3 s for
	// Redis), while the others take a burst each.
	joined := make(chan *fleetReplica, 1)
	go func() { joined <- startFleetReplica(t, "joiner", pol) }()
	share := (limit + int64(n) - 1) / int64(n)
	sum := 0
	before := make([]burstResult, n)
	var wg sync.WaitGroup
	for i, r := range reps {
		wg.Go(func() { before[i] = burst(t, client, r, perBurst) })
	}
	wg.Wait()
	for i, r := range reps {
		b := before[i]
		sum += b.admitted
		if b.limits[strconv.FormatInt(share, 10)] != perBurst {
			t.Errorf("%s during the outage: limits %v; want every response to carry its share %d (limit %d ÷ %d counted)", r.name, b.limits, share, limit, n)
		}
		if most := gcraMost(share, time.Since(cut)); int64(b.admitted) < share || int64(b.admitted) > most {
			t.Errorf("%s admitted %d in its burst; want its share %d, at most %d with the refill", r.name, b.admitted, share, most)
		}
	}
	joiner := <-joined
	if live := joiner.live(t); live != 0 {
		t.Errorf("the joiner counts %d replicas without having reached Redis; want 0", live)
	}
	jb := burst(t, client, joiner, perBurst)
	sum += jb.admitted
	if jb.limits[strconv.Itoa(limit)] != perBurst || int64(jb.admitted) < limit || int64(jb.admitted) > gcraMost(limit, time.Since(cut)) {
		t.Errorf("joiner: admitted %d, limits %v; want the whole limit %d (no count seen, no floor)", jb.admitted, jb.limits, limit)
	}

	// A replica leaves during the outage: it cannot remove itself, and the
	// others' counts stay frozen (each keeps admitting its share, less
	// than the fleet's now fewer replicas could).
	leaver := reps[n-1]
	leaver.stop()
	reps = reps[:n-1]
	time.Sleep(scaled(0, 5*time.Second)) // the long form keeps Redis away longer
	after := burst(t, client, first, perBurst)
	sum += after.admitted
	if first.live(t) != n || after.limits[strconv.FormatInt(share, 10)] != perBurst {
		t.Errorf("r1 after a replica left: counts %d, limits %v; want the frozen %d and share %d", first.live(t), after.limits, n, share)
	}
	outage := time.Since(cut)
	// The bound: every replica that served during the outage, its share's
	// GCRA over the whole outage.
	bound := int64(n)*gcraMost(share, outage) + gcraMost(limit, outage)
	if int64(sum) > bound {
		t.Errorf("%d admitted across the replicas during the outage; the bound is %d", sum, bound)
	}

	link.restore(t)
	back := time.Now()
	// The leaver's registration lapsed during the outage (its deadline is
	// 3 s after its last heartbeat); the first heartbeats after Redis
	// returns drop it and count the joiner.
	want := len(reps) + 1
	settled := waitUntil(t, fmt.Sprintf("the replicas to count %d", want), 10*time.Second, func() bool {
		if joiner.live(t) != want {
			return false
		}
		for _, r := range reps {
			if r.live(t) != want {
				return false
			}
		}
		return true
	})
	m := members(t, rds)
	if len(m) != want || !strings.Contains(strings.Join(m, " "), firstID) {
		t.Errorf("fleet after the outage: %v; want %d members, r1 (%s) among them", m, want, firstID)
	}
	// Redis decides again: the plan's whole limit, shared.
	_, hdr, _ := post(t, first.url+"/v1/chat/completions", chatOnce, "Authorization", "Bearer tg_rl_1")
	if got := hdr.Get("x-ratelimit-limit-requests"); got != strconv.Itoa(limit) {
		t.Errorf("after the outage r1 answered with limit %q; want Redis's %d", got, limit)
	}

	report(t, drillResult{
		id: id,
		fault: fmt.Sprintf("the network to Redis cut for %s (Redis keeps its data) with %d replicas counting each other; a replica joins during the cut, another leaves",
			dur(time.Since(cut)-time.Since(back)), n),
		load: fmt.Sprintf("bursts of %d requests (8 at a time) to each replica on a %d RPM plan: %d before the leave, then %d more to r1",
			perBurst, limit, n+1, perBurst),
		happened: fmt.Sprintf("ratelimit (fail_open) decided in each process: the %d replicas that counted %d admitted their share of %d each (%s), the joiner, which had seen no count, the whole %d (%d), r1 after the leave still its share (%d more; its count frozen at %d); "+
			"%d admitted in all against a bound of %d (every replica's share over the %s outage); %s after Redis returned every replica counted %d (the leaver dropped), and Redis decided again",
			n, n, share, admittedList(before), limit, jb.admitted, after.admitted, n, sum, bound, dur(outage), dur(settled.Sub(back)), want),
		lost:   "no admission above the bound",
		ledger: fmt.Sprintf("%d admitted ≤ %d", sum, bound),
		run:    "^TestDrillFleetOutage$",
	})
}

func admittedList(bs []burstResult) string {
	s := make([]string, len(bs))
	for i, b := range bs {
		s[i] = strconv.Itoa(b.admitted)
	}
	return strings.Join(s, ", ")
}
