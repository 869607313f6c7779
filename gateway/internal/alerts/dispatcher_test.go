package alerts

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/budget"
)

// Every crossing is delivered once, signed, with its body; Fired counts
// them by threshold.
func TestDeliverCrossings(t *testing.T) {
	r := newReceiver(t, nil)
	d := newDispatcher(t, testOptions(t, r, NewMemory(0, nil)))
	at := time.Now().UTC().Truncate(time.Millisecond)
	d.Crossed(t.Context(), crossings(5, 80, at))
	d.Crossed(t.Context(), crossings(3, 100, at))
	r.waitDelivered(8, 5*time.Second)
	waitCounted(t, d, 8)
	time.Sleep(100 * time.Millisecond) // room for a wrong second delivery
	_, delivered, _ := r.snapshot()
	for id, n := range delivered {
		if n != 1 {
			t.Errorf("%s delivered %d times", id, n)
		}
	}
	c := crossings(1, 100, at)[0]
	p := r.bodies[FromCrossing(c).ID]
	if p.Tenant != "t000" || p.Threshold != 100 || p.SpentMicros != 100_000_000 || p.LimitMicros != 100_000_000 ||
		string(p.SpentUSD) != "100" || p.Scope.Period != c.Scope.Period || !p.At.Equal(at) || p.Reason != ReasonCrossed {
		t.Errorf("payload %+v", p)
	}
	st := d.Stats()
	if st.Fired[80] != 5 || st.Fired[100] != 3 || st.Delivered != 8 || st.Failed != 0 {
		t.Errorf("stats %+v", st)
	}
}

// Failed attempts (500s, timeouts, redirects) are retried until a 2xx.
func TestRetries(t *testing.T) {
	tests := []struct {
		name    string
		replies []int // by attempt; 0 hangs past the timeout; the last repeats
		want    int   // attempts until delivered
	}{
		{"500 then ok", []int{500, 500, 200}, 3},
		{"timeout then ok", []int{0, 204}, 2},
		{"mixed", []int{503, 0, 429, 302, 200}, 5},
		{"ok at once", []int{200}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newReceiver(t, func(_ string, n int) int { return tt.replies[min(n, len(tt.replies))-1] })
			d := newDispatcher(t, testOptions(t, r, NewMemory(0, nil)))
			d.Crossed(t.Context(), crossings(1, 80, time.Now()))
			r.waitDelivered(1, 10*time.Second)
			waitCounted(t, d, 1)
			attempts, delivered, _ := r.snapshot()
			id := FromCrossing(crossings(1, 80, time.Now())[0]).ID
			if attempts[id] != tt.want || delivered[id] != 1 {
				t.Errorf("attempts %d delivered %d, want %d and 1", attempts[id], delivered[id], tt.want)
			}
			if st := d.Stats(); st.Failed != int64(tt.want-1) || st.Delivered != 1 {
				t.Errorf("stats failed %d delivered %d, want %d and 1", st.Failed, st.Delivered, tt.want-1)
			}
		})
	}
}

// An alert failing past its max age is given up, and counted.
func TestGiveUp(t *testing.T) {
	r := newReceiver(t, func(string, int) int { return http.StatusInternalServerError })
	o := testOptions(t, r, NewMemory(0, nil))
	o.MaxAge = 150 * time.Millisecond
	d := newDispatcher(t, o)
	d.Crossed(t.Context(), crossings(1, 80, time.Now()))
	deadline := time.Now().Add(5 * time.Second)
	for d.Stats().GaveUp == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	attempts, delivered, _ := r.snapshot()
	n := 0
	for _, a := range attempts {
		n = a
	}
	st := d.Stats()
	if st.GaveUp != 1 || len(delivered) != 0 || n < 3 || st.Failed != int64(n-1) {
		t.Errorf("gave up %d, delivered %v, attempts %d, failed %d", st.GaveUp, delivered, n, st.Failed)
	}
	time.Sleep(100 * time.Millisecond)
	if a2, _, _ := r.snapshot(); len(a2) != 1 || a2[FromCrossing(crossings(1, 80, time.Now())[0]).ID] != n {
		t.Errorf("attempts after giving up: %v, want %d", a2, n)
	}
}

// A refusal of an exhausted budget fires its 100% threshold once, however
// often it repeats, and a later crossing of 100 is the same alert; lower
// thresholds wait for a settle to cross them.
func TestExhausted(t *testing.T) {
	tests := []struct {
		name   string
		alerts []int
		want   []int // thresholds delivered
	}{
		{"100 among others", []int{50, 100}, []int{100}},
		{"100 alone", []int{100}, []int{100}},
		{"no 100", []int{50, 90}, nil},
		{"none", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newReceiver(t, nil)
			d := newDispatcher(t, testOptions(t, r, NewMemory(0, nil)))
			s := budget.Scope{Kind: budget.ScopeKey, ID: "k1", Window: budget.Day, Period: "2026-12-01",
				Limit: 5_000_000, Alerts: tt.alerts}
			var wg sync.WaitGroup
			for range 50 {
				wg.Go(func() { d.Exhausted(t.Context(), "acme", s, 4_990_000) })
			}
			wg.Wait()
			// The settle that then crosses 100% repeats the refusal's alert.
			d.Crossed(t.Context(), []budget.Crossing{{Tenant: "acme", Scope: s, Threshold: 100, Before: 4_990_000, After: 5_010_000, At: time.Now()}})
			want := map[string]int{}
			for _, th := range tt.want {
				want[newAlert("acme", s, th, "", 0, time.Time{}).ID] = 1
			}
			// The crossing above is delivered when nothing was before.
			if len(want) == 0 {
				want[newAlert("acme", s, 100, "", 0, time.Time{}).ID] = 1
			}
			r.waitDelivered(len(want), 5*time.Second)
			waitCounted(t, d, int64(len(want)))
			time.Sleep(100 * time.Millisecond)
			_, delivered, _ := r.snapshot()
			if len(delivered) != len(want) {
				t.Fatalf("delivered %v, want %v", delivered, want)
			}
			for id, n := range want {
				if delivered[id] != n {
					t.Errorf("%s delivered %d times, want %d", id, delivered[id], n)
				}
			}
			p := r.bodies[newAlert("acme", s, 100, "", 0, time.Time{}).ID]
			wantReason, wantSpent := ReasonCrossed, int64(5_010_000)
			if len(tt.want) > 0 {
				wantReason, wantSpent = ReasonRefused, 4_990_000
			}
			if p.Reason != wantReason || p.SpentMicros != wantSpent {
				t.Errorf("100%% alert %+v, want reason %s and spent %d", p, wantReason, wantSpent)
			}
			if st := d.Stats(); st.Fired[100] != 1 || st.Fired[50] != 0 {
				t.Errorf("fired %v", st.Fired)
			}
		})
	}
}

// gatedOutbox holds every Add until its gate opens.
type gatedOutbox struct {
	*Memory
	gate  chan struct{}
	adds  atomic.Int64
	alert atomic.Int64
}

func (g *gatedOutbox) Add(ctx context.Context, as []Alert) ([]Alert, error) {
	<-g.gate
	g.adds.Add(1)
	g.alert.Add(int64(len(as)))
	return g.Memory.Add(ctx, as)
}

// With the outbox behind, reports wait for room in the queue instead of
// dropping alerts; all are stored once it catches up.
func TestBackPressure(t *testing.T) {
	r := newReceiver(t, nil)
	ob := &gatedOutbox{Memory: NewMemory(0, nil), gate: make(chan struct{})}
	o := testOptions(t, r, ob)
	o.QueueSize = 2
	d := newDispatcher(t, o)
	cs := crossings(10, 80, time.Now())
	done := make(chan struct{})
	go func() { d.Crossed(context.Background(), cs); close(done) }()
	select {
	case <-done:
		t.Fatal("10 alerts reported into a queue of 2 with the outbox stuck, without waiting")
	case <-time.After(200 * time.Millisecond):
	}
	// The queue's goroutine holds one batch (1 or 2, by timing) in the
	// stuck Add; the queue is full and a report waits.
	if st := d.Stats(); st.EnqueueWaits < 1 || st.Queued != 2 {
		t.Errorf("waits %d queued %d, want ≥ 1 and 2", st.EnqueueWaits, st.Queued)
	}
	close(ob.gate)
	<-done
	r.waitDelivered(10, 5*time.Second)
	if ob.alert.Load() != 10 {
		t.Errorf("outbox took %d alerts, want 10", ob.alert.Load())
	}
	if st := d.Stats(); st.Lost != 0 || st.Fired[80] != 10 {
		t.Errorf("stats %+v", st)
	}
}

func TestBackoff(t *testing.T) {
	d := &Dispatcher{o: Options{RetryMin: time.Second, RetryMax: time.Minute}}
	tests := []struct {
		attempt  int
		min, max time.Duration
	}{
		{1, 500 * time.Millisecond, time.Second},
		{2, time.Second, 2 * time.Second},
		{4, 4 * time.Second, 8 * time.Second},
		{7, 30 * time.Second, time.Minute},
		{100, 30 * time.Second, time.Minute},
	}
	for _, tt := range tests {
		seen := map[time.Duration]bool{}
		for range 200 {
			w := d.backoff(tt.attempt)
			if w < tt.min || w > tt.max {
				t.Fatalf("attempt %d waits %v, want within [%v, %v]", tt.attempt, w, tt.min, tt.max)
			}
			seen[w] = true
		}
		if len(seen) < 50 {
			t.Errorf("attempt %d: %d distinct waits in 200, want jitter", tt.attempt, len(seen))
		}
	}
}

func TestOptionsRequired(t *testing.T) {
	ob := NewMemory(0, nil)
	tests := []struct {
		name string
		o    Options
	}{
		{"no outbox", Options{URL: "https://h/x", Secret: testSecret}},
		{"no secret", Options{URL: "https://h/x", Outbox: ob}},
		{"relative url", Options{URL: "/x", Secret: testSecret, Outbox: ob}},
		{"ftp url", Options{URL: "ftp://h/x", Secret: testSecret, Outbox: ob}},
	}
	for _, tt := range tests {
		if _, err := New(tt.o); err == nil {
			t.Errorf("%s: New accepted it", tt.name)
		}
	}
}

// waitCounted waits until d counts n deliveries (a receiver sees one
// before the gateway has read the answer).
func waitCounted(t *testing.T, d *Dispatcher, n int64) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); d.Stats().Delivered < n; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d deliveries counted, want %d", d.Stats().Delivered, n)
		}
	}
}

// Dispatcher has the shape of the budget host's alert sink.
var _ interface {
	Crossed(context.Context, []budget.Crossing)
	Exhausted(ctx context.Context, tenant string, s budget.Scope, spent int64)
} = (*Dispatcher)(nil)
