package alerts

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/budget"
)

// Options configure a Dispatcher. Zero values mean the defaults.
type Options struct {
	// URL is the webhook every alert is POSTed to (required).
	URL string
	// Secret signs every delivery (required; never logged).
	Secret []byte
	// Timeout bounds one delivery attempt (default 5s).
	Timeout time.Duration
	// MaxAge is how long an alert is retried before it is given up
	// (default 24h).
	MaxAge time.Duration
	// QueueSize bounds the alerts waiting to be stored in the outbox
	// (default 1024); a report that finds it full waits for room.
	QueueSize int
	// Outbox stores the alerts (required): Postgres, or Memory.
	Outbox Outbox
	// Logger receives the dispatcher's messages; nil: slog.Default().
	Logger *slog.Logger
	// Client sends the deliveries; nil: one with Timeout that follows no
	// redirects (a signed body goes only to URL).
	Client *http.Client
	// NoWorker stores alerts without delivering them here (the gateways
	// sharing the outbox deliver them).
	NoWorker bool

	// Poll is how often the worker looks for due alerts when none was
	// reported here meanwhile (default 1s).
	Poll time.Duration
	// Lease is how long a claimed alert is kept from other workers
	// (default Timeout + 30s).
	Lease time.Duration
	// Batch bounds the alerts claimed, and delivered concurrently, at once
	// (default 8).
	Batch int
	// RetryMin and RetryMax bound the backoff between attempts (default
	// 1s and 5m): attempt n waits between half and all of
	// min(RetryMin·2ⁿ⁻¹, RetryMax).
	RetryMin, RetryMax time.Duration
}

// Defaults.
const (
	DefaultTimeout   = 5 * time.Second
	DefaultMaxAge    = 24 * time.Hour
	DefaultQueueSize = 1024
)

func (o Options) withDefaults() (Options, error) {
	if o.Outbox == nil {
		return o, errors.New("alerts: no outbox")
	}
	if len(o.Secret) == 0 {
		return o, errors.New("alerts: no webhook secret")
	}
	if u, err := url.Parse(o.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return o, errors.New("alerts: the webhook URL must be an absolute http or https URL")
	}
	def := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.Timeout, DefaultTimeout)
	def(&o.MaxAge, DefaultMaxAge)
	def(&o.Poll, time.Second)
	def(&o.Lease, o.Timeout+30*time.Second)
	def(&o.RetryMin, time.Second)
	def(&o.RetryMax, 5*time.Minute)
	if o.QueueSize <= 0 {
		o.QueueSize = DefaultQueueSize
	}
	if o.Batch <= 0 {
		o.Batch = 8
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Client == nil {
		o.Client = &http.Client{Timeout: o.Timeout, CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		}}
	}
	return o, nil
}

// Dispatcher is the budget host's alert sink: it queues what Crossed and
// Exhausted report, stores it in the outbox and, unless NoWorker, runs
// this gateway's delivery worker. Its methods are safe for concurrent use.
type Dispatcher struct {
	o   Options
	log *slog.Logger

	// closing guards queue: reports send under the read lock, Close
	// closes it under the write lock; after Close, reports store inline.
	closing   sync.RWMutex
	closed    bool
	queue     chan Alert
	hurry     chan struct{} // closed when Close's context ends, or Close ends
	hurryOnce sync.Once
	wake      chan struct{} // an alert was stored: look for due ones now
	stop      chan struct{} // the worker stops claiming
	stopped   sync.WaitGroup
	cancel    context.CancelFunc // ends deliveries in flight

	recent recentSet
	stats  counters
}

// New starts a dispatcher.
func New(opts Options) (*Dispatcher, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	d := &Dispatcher{
		o: o, log: o.Logger.With("component", "alerts"),
		queue: make(chan Alert, o.QueueSize), hurry: make(chan struct{}),
		wake: make(chan struct{}, 1), stop: make(chan struct{}),
	}
	d.recent.init(4096)
	ctx, cancel := context.WithCancel(context.Background())
	d.cancel = cancel
	d.stopped.Add(1)
	go d.store()
	if !o.NoWorker {
		d.stopped.Add(1)
		go d.work(ctx)
	}
	return d, nil
}

// Crossed queues an alert for each crossing. It waits only when the queue
// is full (until the outbox takes some); ctx is not consulted, since an
// alert is never dropped.
func (d *Dispatcher) Crossed(_ context.Context, crossings []budget.Crossing) {
	for _, c := range crossings {
		d.report(FromCrossing(c))
	}
}

// Exhausted reports that a request was refused because scope s of tenant
// has no room for it (spent: its spend then, USD micros): that counts as
// reaching 100%, so a 100% threshold of s fires (once per period, however
// many refusals follow) even while holds keep the settled spend under the
// limit. Lower thresholds fire only when a settle crosses them: a refusal
// while holds fill the budget says nothing about what was spent.
func (d *Dispatcher) Exhausted(_ context.Context, tenant string, s budget.Scope, spent int64) {
	if !slices.Contains(s.Alerts, 100) {
		return
	}
	a := newAlert(tenant, s, 100, ReasonRefused, spent, time.Now())
	// Refusals repeat for every request until the period ends; the
	// outbox would skip them, but each would cost it a write.
	if d.recent.addNew(a.ID) {
		d.report(a)
	}
}

func (d *Dispatcher) report(a Alert) {
	d.closing.RLock()
	if !d.closed {
		select {
		case d.queue <- a:
		default:
			d.stats.enqueueWaits.Add(1)
			d.queue <- a // back-pressure: the outbox is behind
		}
		d.closing.RUnlock()
		return
	}
	d.closing.RUnlock()
	// Closed: store it here, as the queue's goroutine would have.
	d.add([]Alert{a})
}

// Close stops the worker, stores every queued alert, and waits for both
// (within ctx: at its end deliveries in flight are cancelled, and alerts
// the outbox has not taken by then are lost and counted). A report after
// Close stores its alert itself, with one attempt.
func (d *Dispatcher) Close(ctx context.Context) error {
	// Reports waiting for room hold the read lock until the queue's
	// goroutine makes some, which a failing outbox delays: hurry it
	// along at ctx's end, since taking the lock waits for them.
	finished := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			d.hurryOnce.Do(func() { close(d.hurry) })
			d.cancel()
		case <-finished:
		}
	}()
	d.closing.Lock()
	if d.closed {
		d.closing.Unlock()
		close(finished)
		return nil
	}
	d.closed = true
	close(d.queue)
	d.closing.Unlock()
	close(d.stop)
	d.stopped.Wait()
	close(finished)
	d.cancel()
	d.hurryOnce.Do(func() { close(d.hurry) })
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("alerts: closing: %w", err)
	}
	return nil
}

// store moves queued alerts into the outbox, in batches.
func (d *Dispatcher) store() {
	defer d.stopped.Done()
	batch := make([]Alert, 0, 64)
	for a := range d.queue {
		batch = append(batch[:0], a)
	more:
		for len(batch) < cap(batch) {
			select {
			case a, ok := <-d.queue:
				if !ok {
					break more
				}
				batch = append(batch, a)
			default:
				break more
			}
		}
		d.add(batch)
	}
}

// add stores alerts, retrying until the outbox takes them (or Close's
// context ends), and nudges the worker.
func (d *Dispatcher) add(alerts []Alert) {
	wait := 50 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		added, err := d.o.Outbox.Add(ctx, alerts)
		cancel()
		if err == nil {
			d.stats.fired(added)
			select {
			case d.wake <- struct{}{}:
			default:
			}
			return
		}
		if errors.Is(err, ErrRejected) {
			d.reject(alerts, err)
			return
		}
		d.log.Warn("storing alerts; retrying", "alerts", len(alerts), "err", err)
		select {
		case <-d.hurry:
			d.stats.lost.Add(int64(len(alerts)))
			d.log.Error("alerts not stored before shutdown", "alerts", len(alerts))
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Second)
	}
}

// reject stores what it can of a batch the outbox rejected: each alert on
// its own, so one bad alert does not take the others with it (a bad one is
// logged and counted as lost; retrying it would stall the queue, and the
// settles behind it, for good).
func (d *Dispatcher) reject(alerts []Alert, err error) {
	if len(alerts) > 1 {
		for _, a := range alerts {
			d.add([]Alert{a})
		}
		return
	}
	a := alerts[0]
	d.stats.lost.Add(1)
	d.log.Error("alert rejected by the outbox; dropped", "alert", a.ID, "tenant", a.Tenant, "scope", a.Kind,
		"period", a.Period, "threshold", a.Threshold, "err", err)
}

// recentSet remembers up to n ids; when full it starts over (a repeat
// then costs one outbox write, which skips it).
type recentSet struct {
	mu  sync.Mutex
	n   int
	ids map[string]struct{}
}

func (r *recentSet) init(n int) { r.n, r.ids = n, make(map[string]struct{}, n) }

// addNew adds id and reports whether it was new.
func (r *recentSet) addNew(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.ids[id]; ok {
		return false
	}
	if len(r.ids) >= r.n {
		clear(r.ids)
	}
	r.ids[id] = struct{}{}
	return true
}

// counters are the dispatcher's metrics.
type counters struct {
	mu         sync.Mutex
	byThreshld map[int]int64

	delivered, failed, gaveUp, enqueueWaits, lost, pending atomic.Int64
}

func (c *counters) fired(added []Alert) {
	if len(added) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byThreshld == nil {
		c.byThreshld = make(map[int]int64)
	}
	for _, a := range added {
		c.byThreshld[a.Threshold]++
	}
}

// Stats are a dispatcher's counters.
type Stats struct {
	// Fired counts the alerts this gateway stored in the outbox (repeats
	// skipped), by threshold.
	Fired map[int]int64
	// Delivered, Failed and GaveUp count delivery attempts by outcome: a
	// 2xx, a failure to be retried, and the last failure of an alert
	// older than the max age.
	Delivered, Failed, GaveUp int64
	// EnqueueWaits counts reports that waited for room in the queue.
	EnqueueWaits int64
	// Lost counts alerts not stored: the gateway shut down while the
	// outbox refused them, or the outbox rejected them as bad data (each
	// logged).
	Lost int64
	// Queued is the alerts waiting for the outbox; Pending the outbox's
	// alerts neither delivered nor given up, as the worker last counted.
	Queued, Pending int64
}

// Stats returns the dispatcher's counters.
func (d *Dispatcher) Stats() Stats {
	s := &d.stats
	st := Stats{Fired: map[int]int64{}, Delivered: s.delivered.Load(), Failed: s.failed.Load(),
		GaveUp: s.gaveUp.Load(), EnqueueWaits: s.enqueueWaits.Load(), Lost: s.lost.Load(),
		Queued: int64(len(d.queue)), Pending: s.pending.Load()}
	s.mu.Lock()
	for t, n := range s.byThreshld {
		st.Fired[t] = n
	}
	s.mu.Unlock()
	return st
}
