package pg

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// EvictChannel is the channel of the eviction notifications; see the
// package documentation for the payloads.
const EvictChannel = "tollgate_evict"

// Kinds of eviction payloads, the part before the first colon.
const (
	EvictKey    = "key"    // value: lowercase hex SHA-256 of the key
	EvictTenant = "tenant" // value: tenant id
	EvictPlan   = "plan"   // value: plan id
	EvictPrice  = "price"  // value: model
	// PayloadAll is the whole payload that means "evict everything".
	PayloadAll = "all"
)

// ParseEviction splits an eviction payload into its kind and value. "all",
// and anything without a colon, gives kind PayloadAll and an empty value.
// Callers must treat a kind they do not know as PayloadAll.
func ParseEviction(payload string) (kind, value string) {
	kind, value, ok := strings.Cut(payload, ":")
	if !ok {
		return PayloadAll, ""
	}
	return kind, value
}

// Timing of Listen.
const (
	// listenIdle is how long Listen waits for a notification before it
	// checks that the connection is alive: a peer that vanished without
	// closing the connection (a partition) is found within
	// listenIdle+listenPing.
	listenIdle = 30 * time.Second
	listenPing = 5 * time.Second
	// listenSetup bounds connecting and LISTEN, for a server that accepts
	// no packets.
	listenSetup = 10 * time.Second
	// Reconnection delays double from listenBackoffMin to listenBackoffMax.
	listenBackoffMin = 100 * time.Millisecond
	listenBackoffMax = 5 * time.Second
)

// Listen runs LISTEN on EvictChannel on a connection of its own and calls fn
// with each notification's payload, in order, until ctx is done; then it
// returns ctx.Err(). When the connection fails it logs the error and
// reconnects with a backoff of 100 ms doubling to 5 s; after each
// (re)connection, once LISTEN is in effect, it calls fn(PayloadAll), since
// notifications sent while it was disconnected are lost. That first call
// also tells the caller that later writes will be seen.
//
// fn runs on Listen's goroutine, one call at a time, and holds up the
// following notifications (Postgres queues them meanwhile): it must be
// quick, e.g. delete from a cache, and must not call Listen.
func (s *Store) Listen(ctx context.Context, fn func(payload string)) error {
	log := s.log.With("channel", EvictChannel, "server", where(s.listenConfig))
	delay := listenBackoffMin
	for {
		listened, err := s.listenOnce(ctx, fn)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if listened {
			delay = listenBackoffMin
		}
		log.Warn("eviction listener disconnected; reconnecting", "err", err, "retry_in", delay)
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		delay = min(2*delay, listenBackoffMax)
	}
}

// listenOnce connects, listens and delivers notifications until the
// connection fails or ctx is done. listened reports whether LISTEN took
// effect, i.e. whether the backoff should start over.
func (s *Store) listenOnce(ctx context.Context, fn func(string)) (listened bool, err error) {
	setupCtx, cancel := context.WithTimeout(ctx, listenSetup)
	defer cancel()
	conn, err := pgx.ConnectConfig(setupCtx, s.listenConfig)
	if err != nil {
		return false, fmt.Errorf("connecting: %w", err)
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = conn.Close(closeCtx)
	}()
	if _, err := conn.Exec(setupCtx, "LISTEN "+EvictChannel); err != nil {
		return false, fmt.Errorf("LISTEN: %w", err)
	}
	s.log.Debug("listening for evictions", "channel", EvictChannel)
	fn(PayloadAll)
	for {
		waitCtx, cancel := context.WithTimeout(ctx, listenIdle)
		n, err := conn.WaitForNotification(waitCtx)
		cancel()
		switch {
		case err == nil:
			fn(n.Payload)
		case ctx.Err() != nil:
			return true, ctx.Err()
		case errors.Is(err, context.DeadlineExceeded) && !conn.IsClosed():
			// Idle: make sure the server is still there.
			pingCtx, cancel := context.WithTimeout(ctx, listenPing)
			err := conn.Ping(pingCtx)
			cancel()
			if err != nil {
				return true, fmt.Errorf("pinging an idle connection: %w", err)
			}
		default:
			return true, fmt.Errorf("waiting for notifications: %w", err)
		}
	}
}
