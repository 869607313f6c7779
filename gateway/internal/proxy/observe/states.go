package observe

import (
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/gateway/internal/calllog"
	"github.com/tollgate/tollgate/gateway/internal/hostsvc"
	"github.com/tollgate/tollgate/gateway/internal/tenant"
	"github.com/tollgate/tollgate/sdk/wasmhost"
)

// Scrape-time metrics of the parts a policy state owns (its plugins and
// tenant cache) and of the host services. A reload builds new plugins and
// a new cache with counters from zero; the counters of a state that closed
// are kept in stateTotals, so the sums exported stay monotonic across
// reloads, as Prometheus counters must.

// stateTotals are the policy states whose counters the collector reads, and
// the counters of those already closed.
type stateTotals struct {
	mu      sync.Mutex // guards the fields; held for a scrape's sums, never across I/O
	live    map[*attached]struct{}
	cache   tenant.CacheStats
	plugins map[string]*pluginTotals
}

// pluginTotals sums wasmhost.Stats of one plugin name.
type pluginTotals struct {
	calls, traps, timeouts, waits, overdue, created, discarded int64
	events                                                     map[string]int64
}

func (t *pluginTotals) add(s *wasmhost.Stats) {
	t.calls += s.Calls.Load()
	t.traps += s.Traps.Load()
	t.timeouts += s.Timeouts.Load()
	t.waits += s.PoolWaits.Load()
	t.overdue += s.Overdue.Load()
	t.created += s.InstancesCreated.Load()
	t.discarded += s.InstancesDiscarded.Load()
	s.Events.Range(func(k, v any) bool {
		if t.events == nil {
			t.events = map[string]int64{}
		}
		t.events[k.(string)] += v.(*atomic.Int64).Load()
		return true
	})
}

func (t *pluginTotals) clone() *pluginTotals {
	c := *t
	c.events = make(map[string]int64, len(t.events))
	for k, v := range t.events {
		c.events[k] = v
	}
	return &c
}

func addCacheStats(dst *tenant.CacheStats, s tenant.CacheStats) {
	dst.Hits += s.Hits
	dst.Misses += s.Misses
	dst.StaleServed += s.StaleServed
	dst.Loads += s.Loads
	dst.LoadErrors += s.LoadErrors
	dst.NegativeHits += s.NegativeHits
	dst.Evictions += s.Evictions
	dst.CapacityEvictions += s.CapacityEvictions
}

// attached is a policy state's parts the metrics read: its plugins and
// its tenant cache (nil when it has none).
type attached struct {
	pipeline *wasmhost.Pipeline
	cache    *tenant.Cache
}

// Attach instruments a policy state's plugins (per-phase histograms,
// rejections) and counts its plugins' and tenant cache's counters
// (cache nil: none) among the live states' until the returned retire
// runs; the state calls it when it closes. Call Attach once the state is
// complete, before it serves.
func (o *Metrics) Attach(pipeline *wasmhost.Pipeline, cache *tenant.Cache) (retire func()) {
	st := &attached{pipeline: pipeline, cache: cache}
	for _, p := range st.pipeline.Plugins() {
		name, ph := p.Name(), p.Phases()
		var in wasmhost.Instruments
		if ph&wasmhost.PhaseRequest != 0 {
			in.Request = o.plugins.With(name, "request")
		}
		if ph&wasmhost.PhaseResponseHeaders != 0 {
			in.ResponseHeaders = o.plugins.With(name, "response_headers")
		}
		if ph&wasmhost.PhaseChunk != 0 {
			in.Chunk = o.plugins.With(name, "chunk")
		}
		if ph&wasmhost.PhaseEnd != 0 {
			in.End = o.plugins.With(name, "end")
		}
		if ph&(wasmhost.PhaseRequest|wasmhost.PhaseResponseHeaders) != 0 {
			in.Rejections = o.rejections.WithLabelValues(name)
		}
		st.pipeline.Instrument(name, in)
	}
	t := &o.states
	t.mu.Lock()
	t.live[st] = struct{}{}
	t.mu.Unlock()
	return func() { o.retire(st) }
}

// retire moves a closed state's counters into the totals.
func (o *Metrics) retire(st *attached) {
	t := &o.states
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.live[st]; !ok {
		return
	}
	delete(t.live, st)
	if c := st.cache; c != nil {
		addCacheStats(&t.cache, c.Stats())
	}
	for _, p := range st.pipeline.WithVariants() {
		pt := t.plugins[p.Name()]
		if pt == nil {
			pt = &pluginTotals{}
			t.plugins[p.Name()] = pt
		}
		pt.add(p.Stats())
	}
}

// sums returns the totals over closed and live states.
func (t *stateTotals) sums() (tenant.CacheStats, map[string]*pluginTotals) {
	t.mu.Lock()
	defer t.mu.Unlock()
	cache := t.cache
	plugins := make(map[string]*pluginTotals, len(t.plugins))
	for k, v := range t.plugins {
		plugins[k] = v.clone()
	}
	for st := range t.live {
		if c := st.cache; c != nil {
			addCacheStats(&cache, c.Stats())
		}
		for _, p := range st.pipeline.WithVariants() {
			pt := plugins[p.Name()]
			if pt == nil {
				pt = &pluginTotals{}
				plugins[p.Name()] = pt
			}
			pt.add(p.Stats())
		}
	}
	return cache, plugins
}

var (
	mRateRejections = desc("tollgate_ratelimit_rejections_total", "Rate-limit admissions refused, by reason: requests or tokens (the limit reached), unavailable (Redis down under fail_closed).", "reason")
	mBudgetOverruns = desc("tollgate_budget_overruns_total", "Settled requests whose cost was above their budget hold: the hold was not an upper bound (a price's bounds wrong, parts the body cannot bound, default_max_tokens below the reply, a lease that ended).")
	mBudgetOverrun  = desc("tollgate_budget_overrun_micros_total", "By how much settled costs passed their budget holds, in USD micros.")
	mBudgetResults  = desc("tollgate_budget_reservations_total", "Budget holds asked for, by operation (reserve before forwarding, extend during a stream) and result: held, insufficient (the budget would be passed: a rejection or a cut stream), unavailable (the counter is down).", "op", "result")
	mPGStatements   = desc("tollgate_postgres_statements_total", "Statements sent to Postgres by pool: tenants (key and price reads on cache misses) or ledger (call log, budget seeding, reconcile). A batch's statements count one each, a COPY one.", "pool")
	mCacheLookups   = desc("tollgate_tenant_cache_lookups_total", "Tenant cache lookups (keys and prices) by result: hit (fresh), stale (served while one reload runs), negative_hit (a remembered unknown key), miss (waited for a store read).", "result")
	mCacheLoads     = desc("tollgate_tenant_cache_loads_total", "Store reads made by the tenant cache (misses share one read per key; stale entries are reloaded in the background).")
	mCacheLoadErrs  = desc("tollgate_tenant_cache_load_errors_total", "Tenant cache store reads that failed (an unknown key is not a failure).")
	mCacheEvictions = desc("tollgate_tenant_cache_evictions_total", "Tenant cache evictions by reason: invalidation (a write, here or through LISTEN/NOTIFY) or capacity (room for new entries, store.cache.max_entries).", "reason")
	mPluginOverdue  = desc("tollgate_plugin_overdue_total", "Callbacks of an uninterruptible plugin that ran past their deadline (logged, not stopped).", "plugin")
	mPluginCreated  = desc("tollgate_plugin_instances_created_total", "Plugin instances created (the pool grows on demand; a trap replaces one).", "plugin")
	mPluginDropped  = desc("tollgate_plugin_instances_discarded_total", "Plugin instances discarded (after a trap or a timeout, or when the plugin closed).", "plugin")
	mLedgerTxRows   = desc("tollgate_calllog_transaction_rows", "Rows per committed call-log transaction (group commit).")
	mRespCache      = desc("tollgate_response_cache_requests_total", "Requests the response cache took part in, by result: hit (served from the cache), miss (looked up, then served by the upstream and stored if it completed), bypass (not cacheable, or the client or plugin said not to use the cache).", "result")
	mRespCacheBytes = desc("tollgate_response_cache_served_bytes_total", "Bytes of replies served from the response cache.")
	mRespCacheSaved = desc("tollgate_response_cache_saved_micros_total", "What the replies served from the response cache would have cost from the upstream, less what the hits were charged, in USD micros at the current prices.")
	mRespCacheStore = desc("tollgate_response_cache_stores_total", "Replies the response cache tried to store, by result: stored, failed (Redis down or slow, or over cache.max_entry_bytes).", "result")
	mRespCacheCoal  = desc("tollgate_response_cache_coalesced_total", "Requests that waited for an identical request's reply instead of calling the upstream (coalesce).")
	mMeterEnds      = desc("tollgate_meter_ends_total", "Requests' ends on the counters (token correction and budget settle), by when they were made: before_last_byte (the reply waited for them) or after_reply (made after it, the tenant's next admission carrying it: docs/adr/0030-ends-after-the-reply.md).", "when")
	mMeterCarried   = desc("tollgate_meter_ends_carried_total", "Copies of pending ends that admissions carried ahead of themselves in their own round trip (a copy of an end that has run already changes nothing).")
	mMeterShared    = desc("tollgate_meter_shared_total", "Requests' counter calls sent to Redis in one call with others of the same tenant, limits and budgets, by call: admit_reserve (the admission and hold) or adjust_settle (the end before the last byte). Those that arrived while their group's previous call was in flight share one (docs/adr/0031-counter-calls-share-a-call.md).", "call")
	mMeterCalls     = desc("tollgate_meter_shared_calls_total", "Calls that carried shared counter calls, by call; tollgate_meter_shared_total divided by it is their mean size.", "call")
	mLedgerDups     = desc("tollgate_calllog_duplicate_rows_total", "Committed rows Postgres already held (a replayed spool), skipped without adding their cost again.")
)

var stateDescs = []*prometheus.Desc{mRateRejections, mBudgetResults, mBudgetOverruns, mBudgetOverrun, mPGStatements, mCacheLookups, mCacheLoads, mCacheLoadErrs,
	mCacheEvictions, mPluginOverdue, mPluginCreated, mPluginDropped, mLedgerTxRows, mLedgerDups,
	mRespCache, mRespCacheBytes, mRespCacheSaved, mRespCacheStore, mRespCacheCoal, mMeterEnds, mMeterCarried, mMeterShared, mMeterCalls}

// txRowBuckets are the upper bounds of the rows-per-transaction buckets of
// calllog.Stats.TxSizes: bucket i holds 2^i to 2^(i+1)-1 rows.
var txRowBuckets = func() []float64 {
	b := make([]float64, calllog.TxSizeBuckets-1)
	for i := range b {
		b[i] = float64(int64(2)<<i - 1)
	}
	return b
}()

// collectStates reports the metrics of the states' plugins and caches, the
// host services and the Postgres pools.
func (o *Metrics) collectStates(ch chan<- prometheus.Metric) {
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	cache, plugins := o.states.sums()
	for name, pt := range plugins {
		counter(mPluginCalls, pt.calls, name)
		counter(mPluginTraps, pt.traps, name)
		counter(mPluginTimeouts, pt.timeouts, name)
		counter(mPluginWaits, pt.waits, name)
		counter(mPluginOverdue, pt.overdue, name)
		counter(mPluginCreated, pt.created, name)
		counter(mPluginDropped, pt.discarded, name)
		for ev, v := range pt.events {
			counter(mPluginEvents, v, name, ev)
		}
	}
	counter(mCacheLookups, int64(cache.Hits), "hit")
	counter(mCacheLookups, int64(cache.StaleServed), "stale")
	counter(mCacheLookups, int64(cache.NegativeHits), "negative_hit")
	counter(mCacheLookups, int64(cache.Misses), "miss")
	counter(mCacheLoads, int64(cache.Loads))
	counter(mCacheLoadErrs, int64(cache.LoadErrors))
	counter(mCacheEvictions, int64(cache.Evictions), "invalidation")
	counter(mCacheEvictions, int64(cache.CapacityEvictions), "capacity")

	if c := o.src.Services; c != nil {
		o.collectServices(ch, c)
	}
	counter(mPGStatements, o.pgTenants.Count(), "tenants")
	counter(mPGStatements, o.pgLedger.Count(), "ledger")

	if led := o.src.Accounting.Ledger; led != nil {
		l := led.Stats()
		buckets := make(map[float64]uint64, len(txRowBuckets))
		var n uint64
		for i, c := range l.TxSizes {
			n += uint64(c)
			if i < len(txRowBuckets) {
				buckets[txRowBuckets[i]] = n
			}
		}
		ch <- prometheus.MustNewConstHistogram(mLedgerTxRows, n, float64(l.Rows), buckets)
		counter(mLedgerDups, l.Duplicates)
	}
}

// collectServices reports the host services' decisions.
func (o *Metrics) collectServices(ch chan<- prometheus.Metric, c *hostsvc.Counts) {
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	counter(mRateRejections, c.RateLimited[0].Load(), "requests")
	counter(mRateRejections, c.RateLimited[1].Load(), "tokens")
	counter(mRateRejections, c.RateUnavailable.Load(), "unavailable")
	for op := range c.Budget {
		for r := range c.Budget[op] {
			counter(mBudgetResults, c.Budget[op][r].Load(), hostsvc.BudgetOps[op], hostsvc.BudgetResultNames[r])
		}
	}
	counter(mBudgetOverruns, c.BudgetOverruns.Load())
	counter(mBudgetOverrun, c.BudgetOverrunMicros.Load())
	counter(mMeterEnds, c.Ends.Before.Load(), "before_last_byte")
	counter(mMeterEnds, c.Ends.After.Load(), "after_reply")
	counter(mMeterCarried, c.Ends.Carried.Load())
	for i, call := range [2]string{"admit_reserve", "adjust_settle"} {
		counter(mMeterShared, c.Shared[i].Shared.Load(), call)
		counter(mMeterCalls, c.Shared[i].Calls.Load(), call)
	}
	rc := &c.Cache
	for _, o := range []hostsvc.CacheOutcome{hostsvc.CacheHit, hostsvc.CacheMiss, hostsvc.CacheBypass} {
		counter(mRespCache, rc.Lookups[o].Load(), o.String())
	}
	counter(mRespCacheBytes, rc.BytesServed.Load())
	counter(mRespCacheSaved, rc.SavedMicros.Load())
	counter(mRespCacheStore, rc.Stored.Load(), "stored")
	counter(mRespCacheStore, rc.StoreFailed.Load(), "failed")
	counter(mRespCacheCoal, rc.Coalesced.Load())
}
