package accounting

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate/tollgate/gateway/internal/alerts"
	"github.com/tollgate/tollgate/gateway/internal/budget"
	"github.com/tollgate/tollgate/gateway/internal/calllog"
	"github.com/tollgate/tollgate/gateway/internal/config"
	"github.com/tollgate/tollgate/gateway/internal/fleet"
	"github.com/tollgate/tollgate/gateway/internal/hostsvc"
	"github.com/tollgate/tollgate/gateway/internal/limiter"
	"github.com/tollgate/tollgate/gateway/internal/meterstore"
	"github.com/tollgate/tollgate/gateway/internal/redisx"
	"github.com/tollgate/tollgate/gateway/internal/store/pg"
	"github.com/tollgate/tollgate/gateway/internal/tlsconf"
)

// Accounting is built once from the first policy; a reload that changes
// the redis or call_log sections is reported and applies at the next
// restart. Its exported fields are set by New and not changed after.
type Accounting struct {
	log   *slog.Logger
	Redis *redisx.Client // nil without redis
	// Fleet is this process's heartbeat in the replicas' fleet (nil
	// without redis): the rate limiter's fail-open share reads its count.
	Fleet   *fleet.Heartbeat
	Limiter limiter.Limiter
	Budget  budget.Counter
	// Alerts receives the budget services' threshold crossings and
	// refusals; nil: none. It is AlertDispatcher when that is set.
	Alerts hostsvc.AlertSink
	// AlertDispatcher delivers budget alerts (nil: the policy has no
	// alerts webhook).
	AlertDispatcher *alerts.Dispatcher
	alertPool       *pgxpool.Pool   // the alert outbox's; nil without Postgres
	pool            *pgxpool.Pool   // the ledger's; nil without the Postgres store
	Ledger          *calllog.Writer // nil without the Postgres store
	recon           *calllog.Reconciler

	redisCfg  config.Redis
	redisTLS  *tlsconf.Client // nil without redis.tls
	logCfg    config.CallLog
	alertsCfg config.Alerts

	reconcileRuns  atomic.Int64
	reconcileDrift atomic.Int64 // absolute micros corrected, summed
	// states counts policy states not yet closed: the ledger is closed
	// after the last of them, once no request can write a row.
	states sync.WaitGroup
}

// New opens the accounting of policy p; pgTracer (nil: none) traces the
// ledger's Postgres pool.
func New(p *config.Policy, log *slog.Logger, pgTracer pgx.QueryTracer) (_ *Accounting, err error) {
	a := &Accounting{log: log, redisCfg: p.Redis, logCfg: p.CallLog, alertsCfg: p.Alerts}
	defer func() {
		if err != nil {
			a.Close(context.Background())
		}
	}()
	if p.Redis.Enabled() {
		rlog := log.With("component", "redis")
		a.redisTLS, err = tlsconf.NewClient(p.Redis.TLS, rlog)
		if err != nil {
			return nil, fmt.Errorf("redis.tls: %w", err)
		}
		opts := redisx.Options{
			Addrs: p.Redis.Addrs, Username: p.Redis.Username, Password: p.Redis.Password,
			DB: p.Redis.DB, Timeout: p.Redis.Timeout, FlushDelay: p.Redis.FlushDelay, Connections: p.Redis.Connections, Logger: rlog,
		}
		if a.redisTLS != nil {
			// A rotated client certificate or CA bundle is used by the
			// connections made after it is reloaded (ADR 0021).
			opts.TLSFor = a.redisTLS.Config
			a.redisTLS.Watch(tlsconf.DefaultReloadInterval)
		}
		a.Redis, err = redisx.New(opts)
		if err != nil {
			return nil, fmt.Errorf("redis: %w", err)
		}
		// Give Redis a moment, so the first requests do not meet a
		// connection still being made; a Redis that is down does not
		// stop the gateway (plugins apply on_redis_error meanwhile), but
		// one that refuses the password or whose certificate does not
		// verify does: waiting will not mend the configuration.
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		err = a.Redis.Connect(ctx)
		cancel()
		if errors.Is(err, redisx.ErrRejected) {
			return nil, err
		}
		if err != nil {
			log.Warn("redis not reachable at start; serving, and connecting in the background", "addrs", p.Redis.Addrs)
		} else if err := meterstore.Preload(context.Background(), a.Redis); err != nil {
			// Loaded at start (within the command timeout, Load's own) so
			// that the first requests do not each find it missing; if this
			// fails, the first calls load it themselves.
			log.Warn("redis: loading the counters' functions", "err", err)
		}
		// Registered in the fleet from now on: the heartbeat runs in its
		// own goroutine, off the request path, connected or not.
		if a.Fleet, err = fleet.Start(a.Redis, fleet.Options{Logger: log.With("component", "fleet")}); err != nil {
			return nil, err
		}
	}
	var seed budget.Seeder
	if p.Store.Kind == config.StorePostgres && *p.CallLog.Enabled {
		cfg, err := pgxpool.ParseConfig(p.Store.Postgres.DSN)
		if err != nil {
			return nil, fmt.Errorf("call log: %w", err)
		}
		// The writer holds one connection; reconcile, seeding and inline
		// writes take the others.
		cfg.MaxConns = 4
		pg.TunePool(cfg)
		if pgTracer != nil {
			cfg.ConnConfig.Tracer = pgTracer
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		a.pool, err = pgxpool.NewWithConfig(ctx, cfg)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("call log: %w", err)
		}
		a.Ledger, err = openLedger(a.pool, p.CallLog, log)
		if err != nil {
			return nil, fmt.Errorf("call log: %w", err)
		}
		seed = seeder(a.pool, log)
	}
	// Settle markers guard against a double settle, which the host never
	// retries late; five minutes keeps them to ~50 MB of Redis (~25 MB of
	// the process, in-process) at 1,000 requests a second.
	const settledTTL = 5 * time.Minute
	if a.Redis != nil {
		a.Limiter = limiter.NewRedis(a.Redis, limiter.RedisOptions{Fleet: a.Fleet})
		a.Budget = budget.NewRedis(a.Redis, seed, budget.RedisOptions{SettledTTL: settledTTL})
	} else {
		a.Limiter = limiter.NewMemory(nil)
		a.Budget = budget.NewMemory(seed, nil).WithSettledTTL(settledTTL)
	}
	if a.pool != nil && *p.CallLog.ReconcileInterval > 0 {
		counter := a.Budget
		a.recon = calllog.StartReconciler(a.pool, *p.CallLog.ReconcileInterval,
			func(tenant string, month time.Time, spent int64) {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				s := budget.Scope{Kind: budget.ScopeTenant, Window: budget.Month, Period: budget.Month.Period(month)}
				if err := counter.Correct(ctx, tenant, s, spent); err != nil {
					log.Warn("reconcile: correcting the budget counter", "tenant", tenant, "month", month.Format("2006-01"), "err", err)
				}
			}, log, func(res calllog.ReconcileResult) {
				if !res.Ran {
					return
				}
				a.reconcileRuns.Add(1)
				for _, d := range res.Drifts {
					a.reconcileDrift.Add(abs(d.Actual - d.Counter))
				}
				// The lock holder also checks the other budgets.
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				_, drift, err := reconcileScopes(ctx, a.pool, counter, time.Now(), log)
				if err != nil {
					log.Error("reconcile: listing the budgets of keys and end users", "err", err)
				}
				a.reconcileDrift.Add(drift)
			})
	}
	if p.Alerts.Enabled() {
		if err := a.openAlerts(p, pgTracer); err != nil {
			return nil, fmt.Errorf("alerts: %w", err)
		}
	}
	return a, nil
}

// openAlerts starts the alert dispatcher: on the Postgres store with the
// durable outbox in its own small pool (claims and marks are short and
// rare, and must not queue behind the ledger's batches), else with a
// memory outbox.
func (a *Accounting) openAlerts(p *config.Policy, pgTracer pgx.QueryTracer) error {
	var outbox alerts.Outbox
	if p.Store.Kind == config.StorePostgres {
		cfg, err := pgxpool.ParseConfig(p.Store.Postgres.DSN)
		if err != nil {
			return err
		}
		cfg.MaxConns = 2
		pg.TunePool(cfg)
		if pgTracer != nil {
			cfg.ConnConfig.Tracer = pgTracer
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		a.alertPool, err = pgxpool.NewWithConfig(ctx, cfg)
		cancel()
		if err != nil {
			return err
		}
		outbox = alerts.NewPostgres(a.alertPool)
	} else {
		a.log.Warn("alerts: with the memory store, alerts wait for delivery in memory and are lost if the gateway stops first")
		outbox = alerts.NewMemory(0, nil)
	}
	c := p.Alerts
	var err error
	a.AlertDispatcher, err = alerts.New(alerts.Options{URL: c.WebhookURL, Secret: []byte(c.Secret), Timeout: c.Timeout,
		MaxAge: c.MaxAge, QueueSize: c.QueueSize, Outbox: outbox, Logger: a.log})
	if err != nil {
		return err
	}
	// Only a live dispatcher becomes the sink: a nil *Dispatcher in the
	// interface would not compare equal to nil.
	a.Alerts = a.AlertDispatcher
	return nil
}

var _ hostsvc.AlertSink = (*alerts.Dispatcher)(nil)

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// Stats are counters of the ledger and the reconcile job.
type Stats struct {
	Ledger calllog.Stats // zero without the Postgres store
	// ReconcileRuns counts the reconcile runs this gateway made (others may
	// hold the lock); ReconcileDriftMicros sums the absolute corrections.
	ReconcileRuns, ReconcileDriftMicros int64
	// Alerts are the alert dispatcher's counters (zero without alerts).
	Alerts alerts.Stats
}

// Stats returns the ledger's and the reconcile job's counters.
func (a *Accounting) Stats() Stats {
	var st Stats
	if a.Ledger != nil {
		st.Ledger = a.Ledger.Stats()
	}
	st.ReconcileRuns, st.ReconcileDriftMicros = a.reconcileRuns.Load(), a.reconcileDrift.Load()
	if a.AlertDispatcher != nil {
		st.Alerts = a.AlertDispatcher.Stats()
	}
	return st
}

// maxSpoolSlots bounds the gateways of one host sharing a spool_dir.
const maxSpoolSlots = 64

// openLedger opens the call-log writer on the first free slot of the spool
// directory (spool_dir/0, /1, ...): each gateway process holds one slot
// (locked), so several on one host can share a spool_dir, and a restarted
// gateway replays the spool of the slot it takes.
func openLedger(pool *pgxpool.Pool, c config.CallLog, log *slog.Logger) (*calllog.Writer, error) {
	mode, err := calllog.ParseWALMode(c.WAL.Mode)
	if err != nil {
		return nil, err // validated: cannot happen
	}
	for i := 0; i < maxSpoolSlots; i++ {
		w, err := calllog.New(pool, calllog.Options{QueueSize: c.QueueSize, MaxBatch: c.MaxBatch,
			SpoolDir: filepath.Join(c.SpoolDir, strconv.Itoa(i)), Logger: log,
			WALMode: mode, WALMaxBytes: int64(c.WAL.MaxBytes), WALSegmentBytes: int64(c.WAL.SegmentBytes)})
		if errors.Is(err, calllog.ErrSpoolInUse) {
			continue
		}
		return w, err
	}
	return nil, fmt.Errorf("all %d spool slots of %s are in use by other gateways", maxSpoolSlots, c.SpoolDir)
}

// CheckReload warns about sections a reload of p cannot change.
func (a *Accounting) CheckReload(p *config.Policy) {
	if !equalRedis(a.redisCfg, p.Redis) {
		a.log.Warn("reload: the redis section changed; it applies at the next restart")
	}
	if !equalCallLog(a.logCfg, p.CallLog) {
		a.log.Warn("reload: the call_log section changed; it applies at the next restart")
	}
	if a.alertsCfg != p.Alerts {
		a.log.Warn("reload: the alerts section changed; it applies at the next restart")
	}
}

func equalRedis(a, b config.Redis) bool {
	return slices.Equal(a.Addrs, b.Addrs) && a.Username == b.Username && a.Password == b.Password && a.DB == b.DB && a.Timeout == b.Timeout &&
		a.FlushDelay == b.FlushDelay && a.Connections == b.Connections && a.SameTLS(&b)
}

func equalCallLog(a, b config.CallLog) bool {
	return *a.Enabled == *b.Enabled && a.SpoolDir == b.SpoolDir && a.QueueSize == b.QueueSize && a.MaxBatch == b.MaxBatch &&
		*a.ReconcileInterval == *b.ReconcileInterval && a.WAL == b.WAL
}

// OpenState counts a policy state that may still write call-log rows;
// CloseState ends it. Close waits for every open state.
func (a *Accounting) OpenState() { a.states.Add(1) }

// CloseState ends a state counted by OpenState.
func (a *Accounting) CloseState() { a.states.Done() }

// Close waits (within ctx) for the policy states still open, then drains
// the ledger and closes the connections.
func (a *Accounting) Close(ctx context.Context) error {
	done := make(chan struct{})
	go func() { a.states.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		a.log.Warn("closing the ledger while requests are still open; their rows are written inline or lost with the process")
	}
	if a.recon != nil {
		a.recon.Stop()
	}
	var err error
	if a.AlertDispatcher != nil {
		// Store the queued alerts before the pools close; deliveries in
		// flight end with ctx (their rows stay due for the next start).
		err = a.AlertDispatcher.Close(ctx)
	}
	if a.alertPool != nil {
		a.alertPool.Close()
	}
	if a.Ledger != nil {
		err = errors.Join(err, a.Ledger.Close(ctx))
	}
	if a.pool != nil {
		a.pool.Close()
	}
	if a.Fleet != nil {
		// Leave the fleet, so the others' count drops at their next
		// heartbeat rather than when this registration goes stale.
		if ferr := a.Fleet.Stop(context.WithoutCancel(ctx)); ferr != nil {
			a.log.Warn("fleet", "err", ferr)
		}
	}
	if a.Redis != nil {
		a.Redis.Close()
	}
	a.redisTLS.Close()
	return err
}
