package balance

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// clock is a settable time source for breakers.
type clock struct{ ns atomic.Int64 }

func (c *clock) now() int64              { return c.ns.Load() }
func (c *clock) advance(d time.Duration) { c.ns.Add(int64(d)) }
func withClock(c *clock, us ...*Upstream) {
	for _, u := range us {
		u.br.now = c.now
	}
}

func breakerUpstream(name string, failures int, openFor time.Duration) *Upstream {
	return NewUpstream(name, Config{BreakerFailures: failures, BreakerOpenFor: openFor})
}

// attempt picks from s, reports o and releases the slot; it returns the
// member picked (-1: none) and whether it was the probe.
func attempt(t *testing.T, s *Set, o Outcome) (int, bool) {
	t.Helper()
	tk, res := s.Pick(0, -1)
	if res != Picked {
		return -1, false
	}
	probe := tk.Probe()
	tk.Done(o, false)
	tk.Release()
	return tk.Index(), probe
}

func TestBreakerLifecycle(t *testing.T) {
	var c clock
	u := breakerUpstream("a", 3, time.Second)
	withClock(&c, u)
	s := NewSet([]*Upstream{u}, []int{1})

	// Successes and 4xx/429 never open it; a success resets the count.
	for _, o := range []Outcome{ServerError, Timeout, Success, Unreachable, ServerError, ClientError, RateLimited, ServerError, ServerError} {
		if i, _ := attempt(t, s, o); i < 0 {
			t.Fatalf("breaker refused a request while closed (at %v, state %v, failures %d)", o, u.State(), u.br.failures.Load())
		}
	}
	if st := u.State(); st != Closed {
		t.Fatalf("state %v after interrupted failure runs, want closed", st)
	}
	// The third consecutive failure opens it.
	if i, _ := attempt(t, s, Timeout); i < 0 {
		t.Fatal("refused before the threshold")
	}
	if st := u.State(); st != Open {
		t.Fatalf("state %v after 3 consecutive failures, want open", st)
	}
	// Open: requests fail fast, and are counted as skipped.
	for range 5 {
		if _, res := s.Pick(0, -1); res != Unavailable {
			t.Fatalf("open breaker let a request through (%v)", res)
		}
	}
	if got := s.RetryIn(); got != time.Second {
		t.Errorf("RetryIn %v, want 1s", got)
	}
	c.advance(999 * time.Millisecond)
	if _, res := s.Pick(0, -1); res != Unavailable {
		t.Fatal("breaker let a request through before open_for passed")
	}
	c.advance(time.Millisecond)
	// Exactly one probe; while it runs, others are refused.
	probe, res := s.Pick(0, -1)
	if res != Picked || !probe.Probe() {
		t.Fatalf("after open_for: %v probe=%v, want the probe", res, probe.Probe())
	}
	if st := u.State(); st != HalfOpen {
		t.Fatalf("state %v during the probe, want half_open", st)
	}
	for _, prefer := range []int{-1, 0} {
		if _, res := s.Pick(0, prefer); res != Unavailable {
			t.Fatalf("a second request (prefer %d) passed while the probe was out", prefer)
		}
	}
	// A failed probe re-opens it for another period.
	probe.Done(ServerError, false)
	probe.Release()
	if st := u.State(); st != Open {
		t.Fatalf("state %v after a failed probe, want open", st)
	}
	if _, res := s.Pick(0, -1); res != Unavailable {
		t.Fatal("re-opened breaker let a request through")
	}
	c.advance(time.Second)
	if _, isProbe := attempt(t, s, Success); !isProbe {
		t.Fatal("the request after the second period was not the probe")
	}
	if st := u.State(); st != Closed {
		t.Fatalf("state %v after a successful probe, want closed", st)
	}
	if _, isProbe := attempt(t, s, Success); isProbe {
		t.Fatal("closed breaker marked a request as probe")
	}
	st := u.Stats()
	want := [numStates]int64{Closed: 1, Open: 2, HalfOpen: 2}
	if st.Transitions != want {
		t.Errorf("transitions %v, want %v", st.Transitions, want)
	}
	if st.Skipped != 9 {
		t.Errorf("skipped %d, want 9 (5 + 1 + 2 + 1 refused picks)", st.Skipped)
	}
	if st.Attempts[ServerError] != 5 || st.Attempts[Success] != 3 || st.Attempts[Timeout] != 2 {
		t.Errorf("attempts %v", st.Attempts)
	}
	if st.InFlight != 0 {
		t.Errorf("in flight %d after every ticket was released", st.InFlight)
	}
}

func TestBreakerIgnoresOutcomesOfEarlierRequests(t *testing.T) {
	var c clock
	u := breakerUpstream("a", 2, time.Second)
	withClock(&c, u)
	s := NewSet([]*Upstream{u}, []int{1})
	// Three requests go out while closed; two fail and open the breaker.
	var tks [3]Ticket
	for i := range tks {
		tks[i], _ = s.Pick(0, -1)
	}
	tks[0].Done(ServerError, false)
	tks[1].Done(ServerError, false)
	if u.State() != Open {
		t.Fatal("not open after 2 failures")
	}
	// The straggler's success must not close it.
	tks[2].Done(Success, false)
	if u.State() != Open {
		t.Fatalf("a request sent before the breaker opened closed it (state %v)", u.State())
	}
	for i := range tks {
		tks[i].Release()
	}
	// A straggler's failure during the probe does not decide it either.
	c.advance(time.Second)
	probe, _ := s.Pick(0, -1)
	late := Ticket{u: u} // an attempt admitted before the breaker opened
	late.Done(Timeout, false)
	if u.State() != HalfOpen {
		t.Fatalf("a non-probe failure decided the half-open breaker (state %v)", u.State())
	}
	probe.Done(Success, false)
	probe.Release()
	if u.State() != Closed {
		t.Fatalf("state %v, want closed", u.State())
	}
}

func TestBreakerCancelledProbeLetsTheNextRequestProbe(t *testing.T) {
	var c clock
	u := breakerUpstream("a", 1, time.Second)
	withClock(&c, u)
	s := NewSet([]*Upstream{u}, []int{1})
	attempt(t, s, Unreachable)
	c.advance(time.Second)
	tk, _ := s.Pick(0, -1)
	if !tk.Probe() {
		t.Fatal("want the probe")
	}
	tk.Done(Cancelled, false) // the client went away: no verdict
	tk.Release()
	if u.State() != Open {
		t.Fatalf("state %v after a cancelled probe, want open", u.State())
	}
	if _, isProbe := attempt(t, s, Success); !isProbe {
		t.Fatal("the next request did not probe at once")
	}
	if u.State() != Closed {
		t.Fatalf("state %v, want closed", u.State())
	}
	// A probe claimed but never sent (Cancel) also gives it back.
	attempt(t, s, Unreachable)
	c.advance(time.Second)
	tk, _ = s.Pick(0, -1)
	tk.Cancel()
	if _, isProbe := attempt(t, s, Success); !isProbe {
		t.Fatal("a cancelled ticket kept the probe")
	}
}

func TestBreakerSingleProbeUnderRace(t *testing.T) {
	var c clock
	u := breakerUpstream("a", 1, time.Second)
	withClock(&c, u)
	s := NewSet([]*Upstream{u}, []int{1})
	attempt(t, s, ServerError)
	c.advance(time.Second)
	var probes, admitted atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			tk, res := s.Pick(0, -1)
			if res == Picked {
				admitted.Add(1)
				if tk.Probe() {
					probes.Add(1)
				}
			}
		}()
	}
	close(start)
	wg.Wait()
	if probes.Load() != 1 || admitted.Load() != 1 {
		t.Fatalf("%d requests admitted, %d probes; want exactly one probe", admitted.Load(), probes.Load())
	}
}

func TestWeightedDistribution(t *testing.T) {
	a, b, c := NewUpstream("a", Config{}), NewUpstream("b", Config{}), NewUpstream("c", Config{})
	s := NewSet([]*Upstream{a, b, c}, []int{6, 3, 1})
	const n = 30000
	var got [3]int
	for range n {
		i, _ := attempt(t, s, Success)
		got[i]++
	}
	for i, w := range []float64{0.6, 0.3, 0.1} {
		share := float64(got[i]) / n
		if share < w-0.02 || share > w+0.02 {
			t.Errorf("member %d got %.3f of the picks, want %.2f ± 0.02 (%v)", i, share, w, got)
		}
	}
	// Peek follows the same weights.
	var peeks [3]int
	for range n {
		peeks[s.Peek()]++
	}
	if share := float64(peeks[0]) / n; share < 0.58 || share > 0.62 {
		t.Errorf("Peek chose member 0 %.3f of the time, want 0.60 ± 0.02", share)
	}
}

func TestPickSkipsExcludedAndOpenMembers(t *testing.T) {
	var c clock
	a, b, d := breakerUpstream("a", 1, time.Minute), breakerUpstream("b", 1, time.Minute), breakerUpstream("d", 1, time.Minute)
	withClock(&c, a, b, d)
	s := NewSet([]*Upstream{a, b, d}, []int{100, 1, 1})
	// Exclusion (members tried already) wins over weight.
	for range 200 {
		tk, res := s.Pick(1<<0, -1)
		if res != Picked || tk.Index() == 0 {
			t.Fatalf("picked excluded member (%v, %d)", res, tk.Index())
		}
		tk.Cancel()
	}
	// prefer is honoured while admissible.
	tk, _ := s.Pick(0, 2)
	if tk.Index() != 2 {
		t.Fatalf("prefer 2: picked %d", tk.Index())
	}
	tk.Cancel()
	// Open a's breaker: every pick goes to b or d, even preferring a.
	tk, _ = s.Pick(0, 0)
	tk.Done(ServerError, false)
	tk.Release()
	for range 200 {
		tk, res := s.Pick(0, 0)
		if res != Picked || tk.Index() == 0 {
			t.Fatalf("picked member with open breaker (%v, %d)", res, tk.Index())
		}
		tk.Cancel()
	}
	if sk := a.Stats().Skipped; sk != 200 {
		t.Errorf("a skipped %d times, want 200", sk)
	}
	if _, res := s.Pick(1<<1|1<<2, -1); res != Unavailable {
		t.Errorf("only the open member left: %v, want Unavailable", res)
	}
	if p := s.Peek(); p == 0 {
		t.Error("Peek chose the open member")
	}
}

func TestConcurrencyLimit(t *testing.T) {
	u := NewUpstream("a", Config{MaxConcurrent: 2})
	s := NewSet([]*Upstream{u}, []int{1})
	t1, r1 := s.Pick(0, -1)
	t2, r2 := s.Pick(0, -1)
	if r1 != Picked || r2 != Picked {
		t.Fatalf("first two picks: %v %v", r1, r2)
	}
	if _, res := s.Pick(0, -1); res != Saturated {
		t.Fatalf("third pick: %v, want Saturated", res)
	}
	// A wait ends when a slot is released.
	go func() {
		time.Sleep(20 * time.Millisecond)
		t1.Release()
	}()
	start := time.Now()
	t3, err := s.Wait(context.Background(), 0, 5*time.Second)
	if err != nil {
		t.Fatalf("wait: %v", err)
	}
	if d := time.Since(start); d < 15*time.Millisecond || d > 2*time.Second {
		t.Errorf("wait took %v, want about 20ms", d)
	}
	// A wait that outlasts its bound fails with ErrSaturated.
	start = time.Now()
	if _, err := s.Wait(context.Background(), 0, 30*time.Millisecond); !errors.Is(err, ErrSaturated) {
		t.Fatalf("bounded wait: %v, want ErrSaturated", err)
	}
	if d := time.Since(start); d < 25*time.Millisecond {
		t.Errorf("wait gave up after %v, want 30ms", d)
	}
	// A cancelled request stops waiting with its cause.
	cause := errors.New("client gone")
	ctx, cancel := context.WithCancelCause(context.Background())
	go func() { time.Sleep(10 * time.Millisecond); cancel(cause) }()
	if _, err := s.Wait(ctx, 0, 5*time.Second); err != cause {
		t.Fatalf("cancelled wait: %v, want the cause", err)
	}
	st := u.Stats()
	if st.InFlight != 2 || st.Waits != 3 || st.WaitTimeouts != 1 {
		t.Errorf("stats %+v: want 2 in flight, 3 waits, 1 timeout", st)
	}
	if u.nwait.Load() != 0 || len(u.waiters) != 0 {
		t.Errorf("%d waiters left registered", len(u.waiters))
	}
	t2.Release()
	t3.Release()
	t3.Release() // idempotent
	if n := u.Stats().InFlight; n != 0 {
		t.Errorf("in flight %d after all releases", n)
	}
}

func TestConcurrencyLimitUnderParallelLoad(t *testing.T) {
	a := NewUpstream("a", Config{MaxConcurrent: 3})
	b := NewUpstream("b", Config{MaxConcurrent: 2})
	s := NewSet([]*Upstream{a, b}, []int{1, 1})
	var cur [2]atomic.Int64
	var peak [2]atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				tk, res := s.Pick(0, -1)
				if res == Saturated {
					var err error
					if tk, err = s.Wait(context.Background(), 0, 10*time.Second); err != nil {
						t.Error(err)
						return
					}
				} else if res != Picked {
					t.Errorf("pick: %v", res)
					return
				}
				i := tk.Index()
				n := cur[i].Add(1)
				for {
					p := peak[i].Load()
					if n <= p || peak[i].CompareAndSwap(p, n) {
						break
					}
				}
				time.Sleep(50 * time.Microsecond)
				cur[i].Add(-1)
				tk.Done(Success, false)
				tk.Release()
			}
		}()
	}
	wg.Wait()
	if peak[0].Load() > 3 || peak[1].Load() > 2 {
		t.Fatalf("peak in flight a=%d (cap 3), b=%d (cap 2)", peak[0].Load(), peak[1].Load())
	}
	if peak[0].Load() < 3 || peak[1].Load() < 2 {
		t.Errorf("peak in flight a=%d b=%d: the load never reached the caps, the test proves nothing", peak[0].Load(), peak[1].Load())
	}
	total := a.Stats().Attempts[Success] + b.Stats().Attempts[Success]
	if total != 16*200 {
		t.Errorf("%d attempts completed, want %d (none dropped)", total, 16*200)
	}
	if a.Stats().Waits+b.Stats().Waits == 0 {
		t.Error("no request ever waited: the load did not saturate both upstreams")
	}
}

func TestWaitWakesOnAnyMember(t *testing.T) {
	a := NewUpstream("a", Config{MaxConcurrent: 1})
	b := NewUpstream("b", Config{MaxConcurrent: 1})
	s := NewSet([]*Upstream{a, b}, []int{1, 1})
	ta, _ := s.Pick(0, 0)
	tb, _ := s.Pick(0, 1)
	if ta.Index() != 0 || tb.Index() != 1 {
		t.Fatal("setup")
	}
	go func() { time.Sleep(20 * time.Millisecond); tb.Release() }()
	tk, err := s.Wait(context.Background(), 0, 5*time.Second)
	if err != nil || tk.Index() != 1 {
		t.Fatalf("wait: member %d, %v; want b's freed slot", tk.Index(), err)
	}
	tk.Release()
	ta.Release()
}

func TestPickAllocatesNothing(t *testing.T) {
	single := NewSet([]*Upstream{NewUpstream("a", Config{})}, []int{1})
	multi := NewSet([]*Upstream{
		NewUpstream("a", Config{MaxConcurrent: 100, BreakerFailures: 5, BreakerOpenFor: time.Second}),
		NewUpstream("b", Config{BreakerFailures: 5, BreakerOpenFor: time.Second}),
	}, []int{3, 1})
	for name, s := range map[string]*Set{"single": single, "multi": multi} {
		allocs := testing.AllocsPerRun(1000, func() {
			tk, _ := s.Pick(0, s.Peek())
			tk.Done(Success, false)
			tk.Release()
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocations per pick", name, allocs)
		}
	}
}

func TestStatusOutcome(t *testing.T) {
	tests := []struct {
		status    int
		want      Outcome
		retryable bool
	}{
		{200, Success, false}, {204, Success, false}, {302, Success, false},
		{400, ClientError, false}, {401, ClientError, false}, {404, ClientError, false}, {408, ClientError, false},
		{429, RateLimited, true}, {500, ServerError, true}, {502, ServerError, true}, {503, ServerError, true},
	}
	for _, tt := range tests {
		o := StatusOutcome(tt.status)
		if o != tt.want || o.Retryable() != tt.retryable {
			t.Errorf("%d: %v retryable=%v, want %v retryable=%v", tt.status, o, o.Retryable(), tt.want, tt.retryable)
		}
	}
	if Cancelled.Retryable() || !Timeout.Retryable() || !Unreachable.Retryable() {
		t.Error("Cancelled must not be retried; Timeout and Unreachable must")
	}
}
