package cancels

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/tollgate/tollgate/gateway/internal/redisx"
)

// Cancels reach a request wherever it runs. Each gateway keeps a registry
// of the requests it is serving; one poller per gateway, every interval,
// makes one Redis script call for all of them that (a) announces them —
// inflight key → tenant, expiring after three intervals — and (b) takes the
// cancel marks another replica left for them. A cancel received by any
// replica cancels a local request at once, or, for a request another
// replica announced for the caller's tenant, leaves a mark that replica's
// next poll picks up: within one interval plus one round trip.
//
// Request ids are not secret and a client may choose its own
// (X-Request-Id), so two tenants' requests can carry the same id. A cancel
// therefore names the tenant it is for, locally and in Redis: the registry
// is keyed by tenant and id, and a cancel mark is a set of "=TENANT"
// members ("*" for the admin API's cancel of any tenant's request), each
// taken only by a request of that tenant. One tenant can neither cancel
// another's request nor consume a mark left for it.
//
// All keys share one hash tag, so the poll is one script call on a Redis
// Cluster too. Without Redis (or while it is down) cancels work for the
// requests of the replica that receives them.
const (
	cancelPrefix   = "tollgate:{cancel}:"
	cancelMarkTTL  = 10 * time.Second
	maxCancelBatch = 5000 // requests per poll script call
)

// The poll: KEYS are inflight:ID and mark:ID pairs of the requests in
// flight, then the inflight:ID keys of requests that ended since the last
// poll; ARGV[1] the inflight expiry in ms, ARGV[2] how many requests are in
// flight, then the tenant of each. It announces the requests in flight,
// withdraws the ended ones (first: another tenant's request here may
// carry the same id), and returns the indexes (1-based) of the
// requests with a cancel mark for their tenant, taking those marks.
var pollScript = rueidis.NewLuaScript(`
local ttl = ARGV[1]
local n = tonumber(ARGV[2])
local out = {}
for i = 2*n+1, #KEYS do
  redis.call('DEL', KEYS[i])
end
for i = 1, n do
  local tenant = ARGV[i+2]
  redis.call('SET', KEYS[2*i-1], tenant, 'PX', ttl)
  if redis.call('EXISTS', KEYS[2*i]) == 1 and
     (redis.call('SREM', KEYS[2*i], '=' .. tenant) == 1 or redis.call('SREM', KEYS[2*i], '*') == 1) then
    out[#out+1] = i
  end
end
return out`)

// markScript leaves a cancel mark for a request another replica announced:
// KEYS[1] inflight:ID, KEYS[2] mark:ID; ARGV[1] the mark ("=TENANT", or "*"
// for the admin API), ARGV[2] the mark's expiry in ms. 1 if marked, 0 if no
// such request of that tenant is in flight.
var markScript = rueidis.NewLuaScript(`
local owner = redis.call('GET', KEYS[1])
if not owner or (ARGV[1] ~= '*' and '=' .. owner ~= ARGV[1]) then
  return 0
end
redis.call('SADD', KEYS[2], ARGV[1])
redis.call('PEXPIRE', KEYS[2], ARGV[2])
return 1`)

// AnyTenant is the tenant argument of a cancel that may end any tenant's
// request (the admin API's). Tenant ids are never empty.
const AnyTenant = ""

// markFor is the cancel mark member for tenant ("*": any).
func markFor(tenant string) string {
	if tenant == AnyTenant {
		return "*"
	}
	return "=" + tenant
}

// inflight is one request a gateway is serving.
type inflight struct {
	id, tenant string
	cancel     context.CancelCauseFunc
}

// registryKey keys a request by tenant and id: two tenants' requests may
// share an id, and neither may reach the other's.
func registryKey(tenant, id string) string { return tenant + "\x00" + id }

// Registry is the registry and its poller.
type Registry struct {
	log      *slog.Logger
	redis    *redisx.Client // nil: in-process only
	interval time.Duration

	mu   sync.Mutex          // guards reqs; never held across I/O
	reqs map[string]inflight // by registryKey

	// announced are the registry keys of the requests the last poll
	// announced, with their ids (poller only): those no longer in flight
	// are withdrawn by the next.
	announced map[string]string

	polls, pollFailures, fallbackPolls, remoteCancels atomic.Int64
	scriptRefused                                     atomic.Bool

	stop chan struct{}
	done chan struct{}
}

// New starts a registry; rc nil keeps it in-process (no poller). interval
// is the poll period. Close stops it.
func New(log *slog.Logger, rc *redisx.Client, interval time.Duration) *Registry {
	c := &Registry{log: log, redis: rc, interval: interval, reqs: make(map[string]inflight), announced: make(map[string]string),
		stop: make(chan struct{}), done: make(chan struct{})}
	if rc == nil {
		close(c.done)
		return c
	}
	go c.run()
	return c
}

// Add registers a request of tenant ("" when none was resolved); the
// returned key removes it.
func (c *Registry) Add(id []byte, tenant string, cancel context.CancelCauseFunc) string {
	key := registryKey(tenant, string(id))
	c.mu.Lock()
	c.reqs[key] = inflight{id: key[len(tenant)+1:], tenant: tenant, cancel: cancel}
	c.mu.Unlock()
	return key
}

func (c *Registry) Remove(key string) {
	c.mu.Lock()
	delete(c.reqs, key)
	c.mu.Unlock()
}

// local cancels a request of tenant served here; AnyTenant cancels every
// request here with that id.
func (c *Registry) local(id, tenant string) bool {
	if tenant != AnyTenant {
		c.mu.Lock()
		r, ok := c.reqs[registryKey(tenant, id)]
		c.mu.Unlock()
		if ok {
			r.cancel(ErrCancelled)
		}
		return ok
	}
	var hits []context.CancelCauseFunc
	c.mu.Lock()
	for _, r := range c.reqs {
		if r.id == id {
			hits = append(hits, r.cancel)
		}
	}
	c.mu.Unlock()
	for _, cancel := range hits {
		cancel(ErrCancelled)
	}
	return len(hits) > 0
}

// Cancel cancels request id of tenant (AnyTenant: of any tenant): here if
// it runs here, else through Redis for the replica that announced it. false
// means no such request of that tenant is known (unknown and foreign read
// the same).
func (c *Registry) Cancel(ctx context.Context, id, tenant string) (bool, error) {
	if c.local(id, tenant) {
		return true, nil
	}
	if c.redis == nil {
		return false, nil
	}
	inflightKey, markKey := cancelPrefix+"inflight:"+id, cancelPrefix+"mark:"+id
	mark := markFor(tenant)
	if !c.scriptRefused.Load() {
		n, err := c.redis.Exec(ctx, markScript, []string{inflightKey, markKey},
			[]string{mark, strconv.FormatInt(cancelMarkTTL.Milliseconds(), 10)}).AsInt64()
		if err == nil || redisx.IsUnavailable(err) {
			return n == 1, err
		}
		c.log.Warn("cancel: Redis refused the script; using one command per key", "err", err)
		c.scriptRefused.Store(true)
	}
	owner, err := c.redis.Do(ctx, func(b rueidis.Builder) rueidis.Completed { return b.Get().Key(inflightKey).Build() }).ToString()
	if rueidis.IsRedisNil(err) || (err == nil && tenant != AnyTenant && owner != tenant) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	raw, err := c.redis.Raw()
	if err != nil {
		return false, err
	}
	for _, res := range raw.DoMulti(ctx,
		raw.B().Sadd().Key(markKey).Member(mark).Build(),
		raw.B().Pexpire().Key(markKey).Milliseconds(cancelMarkTTL.Milliseconds()).Build()) {
		if err := res.Error(); err != nil {
			return false, err
		}
	}
	return true, nil
}

func (c *Registry) run() {
	defer close(c.done)
	t := time.NewTicker(c.interval)
	defer t.Stop()
	var ids, tenants, ended []string
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
		}
		ids, tenants = c.snapshot(ids[:0], tenants[:0])
		ended = ended[:0]
		for key, id := range c.announced {
			if !c.running(key) {
				ended = append(ended, id)
			}
		}
		clear(c.announced)
		for i, id := range ids {
			c.announced[registryKey(tenants[i], id)] = id
		}
		// Nothing in flight and nothing to withdraw: nothing sent.
		for len(ids) > 0 || len(ended) > 0 {
			n, e := min(len(ids), maxCancelBatch), min(len(ended), maxCancelBatch)
			c.poll(ids[:n], tenants[:n], ended[:e])
			ids, tenants, ended = ids[n:], tenants[n:], ended[e:]
		}
	}
}

func (c *Registry) running(key string) bool {
	c.mu.Lock()
	_, ok := c.reqs[key]
	c.mu.Unlock()
	return ok
}

func (c *Registry) snapshot(ids, tenants []string) ([]string, []string) {
	c.mu.Lock()
	for _, r := range c.reqs {
		ids = append(ids, r.id)
		tenants = append(tenants, r.tenant)
	}
	c.mu.Unlock()
	return ids, tenants
}

// poll announces ids and takes their cancel marks: one script call, or,
// when Redis refuses scripts, one command per key, pipelined.
func (c *Registry) poll(ids, tenants, ended []string) {
	ctx := context.Background()
	ttl := strconv.FormatInt((3 * c.interval).Milliseconds(), 10)
	c.polls.Add(1)
	if !c.scriptRefused.Load() {
		keys := make([]string, 0, 2*len(ids)+len(ended))
		args := make([]string, 0, 2+len(ids))
		args = append(args, ttl, strconv.FormatInt(int64(len(ids)), 10))
		for i, id := range ids {
			keys = append(keys, cancelPrefix+"inflight:"+id, cancelPrefix+"mark:"+id)
			args = append(args, tenants[i])
		}
		for _, id := range ended {
			keys = append(keys, cancelPrefix+"inflight:"+id)
		}
		hits, err := c.redis.Exec(ctx, pollScript, keys, args).AsIntSlice()
		if err == nil {
			for _, h := range hits {
				if h >= 1 && int(h) <= len(ids) {
					c.fire(ids[h-1], tenants[h-1])
				}
			}
			return
		}
		if redisx.IsUnavailable(err) {
			c.pollFailures.Add(1)
			return // in-process cancels only until Redis answers
		}
		c.log.Warn("cancel poll: Redis refused the script; polling one command per key", "err", err)
		c.scriptRefused.Store(true)
	}
	c.fallbackPolls.Add(1)
	raw, err := c.redis.Raw()
	if err != nil {
		c.pollFailures.Add(1)
		return
	}
	// As the script: withdrawals first, then per request in flight its
	// announcement and the removal of its tenant's mark and of an admin
	// mark.
	const perRequest = 3
	cmds := make(rueidis.Commands, 0, len(ended)+perRequest*len(ids))
	for _, id := range ended {
		cmds = append(cmds, raw.B().Del().Key(cancelPrefix+"inflight:"+id).Build())
	}
	for i, id := range ids {
		mark := cancelPrefix + "mark:" + id
		cmds = append(cmds,
			raw.B().Set().Key(cancelPrefix+"inflight:"+id).Value(tenants[i]).Px(3*c.interval).Build(),
			raw.B().Srem().Key(mark).Member(markFor(tenants[i])).Build(),
			raw.B().Srem().Key(mark).Member(markFor(AnyTenant)).Build())
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	res := raw.DoMulti(ctx, cmds...)
	for _, r := range res {
		if err := r.Error(); err != nil && redisx.IsUnavailable(err) {
			c.pollFailures.Add(1)
			return
		}
	}
	for i := range ids {
		at := len(ended) + perRequest*i
		own, _ := res[at+1].AsInt64()
		admin, _ := res[at+2].AsInt64()
		if own == 1 || admin == 1 {
			c.fire(ids[i], tenants[i])
		}
	}
}

// fire cancels the request here that a mark in Redis was for.
func (c *Registry) fire(id, tenant string) {
	c.mu.Lock()
	r, ok := c.reqs[registryKey(tenant, id)]
	c.mu.Unlock()
	if ok {
		// Counted first: whoever sees the cancel's effect sees it counted.
		c.remoteCancels.Add(1)
		r.cancel(ErrCancelled)
	}
}

func (c *Registry) Close() {
	select {
	case <-c.stop:
	default:
		close(c.stop)
	}
	<-c.done
}

// Stats counts the cancel poller's work.
type Stats struct {
	// Polls counts poll rounds (one script call each, or one pipeline of
	// per-key commands in the fallback).
	Polls, PollFailures, FallbackPolls int64
	// RemoteCancels counts requests cancelled by a mark from another
	// replica.
	RemoteCancels int64
}

// Stats returns the poller's counters.
func (c *Registry) Stats() Stats {
	return Stats{Polls: c.polls.Load(), PollFailures: c.pollFailures.Load(), FallbackPolls: c.fallbackPolls.Load(),
		RemoteCancels: c.remoteCancels.Load()}
}
