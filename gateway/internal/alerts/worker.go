package alerts

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"
)

// pendingEvery is how often the worker recounts the outbox's pending
// alerts for the queue-depth gauge; pruneEvery how often it prunes a
// Pruner (each gateway: the deletes are idempotent).
const (
	pendingEvery = 5 * time.Second
	pruneEvery   = time.Hour
)

// work is the delivery worker: it claims due alerts and delivers them
// until Close.
func (d *Dispatcher) work(ctx context.Context) {
	defer d.stopped.Done()
	var counted, pruned time.Time
	failing := false
	for {
		claimed, err := d.o.Outbox.Claim(ctx, d.o.Batch, d.o.Lease)
		switch {
		case err != nil && !failing:
			d.log.Warn("claiming alerts", "err", err)
			failing = true
		case err == nil && failing:
			d.log.Info("claiming alerts again")
			failing = false
		}
		d.deliverAll(ctx, claimed)
		if time.Since(counted) >= pendingEvery {
			if n, err := d.o.Outbox.Pending(ctx); err == nil {
				d.stats.pending.Store(n)
				counted = time.Now()
			}
		}
		if time.Since(pruned) >= pruneEvery {
			pruned = time.Now()
			d.prune(ctx)
		}
		if err == nil && len(claimed) == d.o.Batch {
			select {
			case <-d.stop:
				return
			default:
				continue // more may be due
			}
		}
		select {
		case <-d.stop:
			return
		case <-d.wake:
		case <-time.After(d.o.Poll):
		}
	}
}

// prune forgets finished alerts older than Retention, where the outbox
// can.
func (d *Dispatcher) prune(ctx context.Context) {
	p, ok := d.o.Outbox.(Pruner)
	if !ok {
		return
	}
	n, err := p.Prune(ctx, Retention)
	if err != nil {
		d.log.Warn("pruning finished alerts", "err", err)
		return
	}
	if n > 0 {
		d.log.Info("pruned finished alerts", "alerts", n, "older_than", Retention)
	}
}

// deliverAll delivers claimed concurrently and records each outcome.
func (d *Dispatcher) deliverAll(ctx context.Context, claimed []Claimed) {
	var wg sync.WaitGroup
	for i := range claimed {
		wg.Go(func() { d.deliverOne(ctx, &claimed[i]) })
	}
	wg.Wait()
}

func (d *Dispatcher) deliverOne(ctx context.Context, c *Claimed) {
	err := d.post(ctx, c)
	// Record the outcome even when Close cancelled the attempt: the
	// lease would hold the alert back needlessly otherwise.
	rec, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err == nil {
		if err := d.o.Outbox.Delivered(rec, c.ID); err != nil {
			// Delivered, not marked: it will be delivered again once
			// the lease ends (receivers deduplicate by id).
			d.log.Warn("marking an alert delivered", "alert", c.ID, "err", err)
		}
		d.stats.delivered.Add(1) // after the mark, so a reader of both sees it
		return
	}
	retry := d.backoff(c.Attempt)
	gaveUp, ferr := d.o.Outbox.Failed(rec, c.ID, err.Error(), retry, d.o.MaxAge)
	if ferr != nil {
		d.log.Warn("recording a failed alert delivery", "alert", c.ID, "err", ferr)
	}
	if gaveUp {
		d.stats.gaveUp.Add(1)
		d.log.Error("alert given up after its max age", "alert", c.ID, "tenant", c.Tenant,
			"attempts", c.Attempt, "age", c.Age.Round(time.Second), "err", err)
		return
	}
	d.stats.failed.Add(1)
	d.log.Warn("alert delivery failed; retrying", "alert", c.ID, "attempt", c.Attempt, "retry_in", retry.Round(time.Millisecond), "err", err)
}

// Headers of a delivery besides SignatureHeader.
const (
	IDHeader      = "Tollgate-Alert-Id"
	AttemptHeader = "Tollgate-Alert-Attempt"
)

// errStatus is a reply that is not a 2xx.
type errStatus int

func (e errStatus) Error() string { return "webhook replied " + strconv.Itoa(int(e)) }

// post sends one attempt of c; nil means a 2xx.
func (d *Dispatcher) post(ctx context.Context, c *Claimed) error {
	ctx, cancel := context.WithTimeout(ctx, d.o.Timeout)
	defer cancel()
	body := c.Body()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.o.URL, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("building the request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "tollgate-alerts")
	req.Header.Set(IDHeader, c.ID)
	req.Header.Set(AttemptHeader, strconv.Itoa(c.Attempt))
	req.Header.Set(SignatureHeader, Sign(d.o.Secret, body, time.Now()))
	resp, err := d.o.Client.Do(req)
	if err != nil {
		// The URL may carry a token in its query: keep it out of logs
		// and of the outbox's last_error.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("posting to the webhook: %w", err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // reuse the connection
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return errStatus(resp.StatusCode)
	}
	return nil
}

// backoff is the wait after failed attempt n (1-based): exponential from
// RetryMin up to RetryMax, with jitter over its upper half so gateways
// retrying a webhook that was down do not return in step.
func (d *Dispatcher) backoff(attempt int) time.Duration {
	w := d.o.RetryMin
	for i := 1; i < attempt && w < d.o.RetryMax; i++ {
		w *= 2
	}
	w = min(w, d.o.RetryMax)
	half := w / 2
	return half + rand.N(w-half+1)
}
