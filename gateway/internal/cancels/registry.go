package cancels

import (
	"context"
	"encoding/json"
	"fmt"
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
	cancelPrefix = "tollgate:{cancel}:"
	// indexKey is a sorted set of the requests in flight on every
	// replica (member: replica, tenant and id; score: its deadline, ms of
	// the Redis server's clock), infoKey a hash of their info (JSON) by
	// the same members: what the admin API lists. Same hash tag as the
	// rest, so the poll stays one script call on a Redis Cluster.
	indexKey       = cancelPrefix + "index"
	infoKey        = cancelPrefix + "info"
	cancelMarkTTL  = 10 * time.Second
	maxCancelBatch = 5000 // requests per poll script call
)

// The poll: KEYS are inflight:ID and mark:ID pairs of the requests in
// flight, then the inflight:ID keys of requests that ended since the last
// poll, then the index and info keys. ARGV[1] is the inflight expiry in
// ms, ARGV[2] how many requests are in flight, ARGV[3] how many ended; then
// per request in flight its tenant, its member (replica, tenant and id) and
// its info (JSON; "" when an earlier poll sent it); then the members of the
// ended ones. It withdraws the ended requests (first: another tenant's
// request here may carry the same id), drops the index entries of
// replicas that stopped polling (deadline passed, on the server's clock),
// announces the requests in flight — inflight key, index entry with its
// deadline, info — and returns the indexes (1-based) of the requests with
// a cancel mark for their tenant, taking those marks, and, negated, those
// whose info the hash lacks (sent again by the next poll).
var pollScript = rueidis.NewLuaScript(`
if redis.replicate_commands then redis.replicate_commands() end
local ttl = tonumber(ARGV[1])
local n = tonumber(ARGV[2])
local e = tonumber(ARGV[3])
local index, info = KEYS[#KEYS-1], KEYS[#KEYS]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local out = {}
for i = 1, e do
  local m = ARGV[3+3*n+i]
  redis.call('DEL', KEYS[2*n+i])
  redis.call('ZREM', index, m)
  redis.call('HDEL', info, m)
end
local stale = redis.call('ZRANGEBYSCORE', index, '-inf', now, 'LIMIT', 0, 1000)
if #stale > 0 then
  redis.call('ZREM', index, unpack(stale))
  redis.call('HDEL', info, unpack(stale))
end
for i = 1, n do
  local tenant, member, js = ARGV[3*i+1], ARGV[3*i+2], ARGV[3*i+3]
  redis.call('SET', KEYS[2*i-1], tenant, 'PX', ttl)
  redis.call('ZADD', index, now + ttl, member)
  if js ~= '' then
    redis.call('HSET', info, member, js)
  elseif redis.call('HEXISTS', info, member) == 0 then
    out[#out+1] = -i
  end
  if redis.call('EXISTS', KEYS[2*i]) == 1 and
     (redis.call('SREM', KEYS[2*i], '=' .. tenant) == 1 or redis.call('SREM', KEYS[2*i], '*') == 1) then
    out[#out+1] = i
  end
end
if n > 0 then
  redis.call('PEXPIRE', index, ttl)
  redis.call('PEXPIRE', info, ttl)
end
return out`)

// listScript lists the requests in flight on every replica: KEYS[1] the
// index, KEYS[2] the info hash; the info of the members whose deadline
// has not passed on the server's clock.
var listScript = rueidis.NewLuaScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local live = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf')
if #live == 0 then return {} end
return redis.call('HMGET', KEYS[2], unpack(live))`)

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
	info       Info
}

// Info is what the admin API lists of a request in flight besides its id
// and tenant.
type Info struct {
	Model   string
	Stream  bool
	Started time.Time
}

// Request is a request in flight, as List returns it.
type Request struct {
	ID        string    `json:"id"`
	TenantID  string    `json:"tenant_id"`
	Model     string    `json:"model"`
	StartedAt time.Time `json:"started_at"`
	Stream    bool      `json:"stream"`
	Replica   string    `json:"replica"`
}

// registryKey keys a request by tenant and id: two tenants' requests may
// share an id, and neither may reach the other's.
func registryKey(tenant, id string) string { return tenant + "\x00" + id }

// Registry is the registry and its poller.
type Registry struct {
	log      *slog.Logger
	redis    *redisx.Client // nil: in-process only
	interval time.Duration
	replica  string // this process's name in listings

	mu   sync.Mutex          // guards reqs; never held across I/O
	reqs map[string]inflight // by registryKey

	// announced are the registry keys of the requests the last poll
	// announced, with their ids (poller only): those no longer in flight
	// are withdrawn by the next.
	announced map[string]string
	// resend are the registry keys whose info the last poll found
	// missing in Redis (poller only).
	resend map[string]bool

	polls, pollFailures, fallbackPolls, remoteCancels atomic.Int64
	scriptRefused                                     atomic.Bool

	stop chan struct{}
	done chan struct{}
}

// New starts a registry; rc nil keeps it in-process (no poller). interval
// is the poll period; replica names this process in listings (the fleet's
// instance id). Close stops it.
func New(log *slog.Logger, rc *redisx.Client, interval time.Duration, replica string) *Registry {
	c := &Registry{log: log, redis: rc, interval: interval, replica: replica, reqs: make(map[string]inflight),
		announced: make(map[string]string), resend: make(map[string]bool),
		stop: make(chan struct{}), done: make(chan struct{})}
	if rc == nil {
		close(c.done)
		return c
	}
	go c.run()
	return c
}

// Add registers a request of tenant ("" when none was resolved); the
// returned key removes it. It sends nothing: the next poll announces it.
func (c *Registry) Add(id []byte, tenant string, cancel context.CancelCauseFunc, info Info) string {
	key := registryKey(tenant, string(id))
	c.mu.Lock()
	c.reqs[key] = inflight{id: key[len(tenant)+1:], tenant: tenant, cancel: cancel, info: info}
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
	var batch []announce
	var ended []string
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
		}
		batch = c.snapshot(batch[:0])
		ended = ended[:0]
		for key := range c.announced {
			if !c.running(key) {
				ended = append(ended, key)
			}
		}
		prev := c.announced
		c.announced = make(map[string]string, len(batch))
		for i := range batch {
			a := &batch[i]
			if _, was := prev[a.key]; !was || c.resend[a.key] {
				a.info = c.infoJSON(a)
			}
			c.announced[a.key] = a.id
		}
		clear(c.resend)
		endedIDs := make([]string, len(ended))
		for i, key := range ended {
			endedIDs[i] = prev[key]
		}
		// Nothing in flight and nothing to withdraw: nothing sent.
		for len(batch) > 0 || len(ended) > 0 {
			n, e := min(len(batch), maxCancelBatch), min(len(ended), maxCancelBatch)
			c.poll(batch[:n], ended[:e], endedIDs[:e])
			batch, ended, endedIDs = batch[n:], ended[e:], endedIDs[e:]
		}
	}
}

// announce is one request in flight as a poll announces it.
type announce struct {
	key, id, tenant string
	started         time.Time
	model           string
	stream          bool
	info            string // JSON, or "" when an earlier poll sent it
}

// member is a request's member of the index and info keys.
func (c *Registry) member(key string) string { return c.replica + "\x00" + key }

func (c *Registry) infoJSON(a *announce) string {
	b, _ := json.Marshal(Request{ID: a.id, TenantID: a.tenant, Model: a.model, StartedAt: a.started.UTC(), Stream: a.stream, Replica: c.replica})
	return string(b)
}

func (c *Registry) running(key string) bool {
	c.mu.Lock()
	_, ok := c.reqs[key]
	c.mu.Unlock()
	return ok
}

func (c *Registry) snapshot(batch []announce) []announce {
	c.mu.Lock()
	for key, r := range c.reqs {
		batch = append(batch, announce{key: key, id: r.id, tenant: r.tenant, started: r.info.Started, model: r.info.Model, stream: r.info.Stream})
	}
	c.mu.Unlock()
	return batch
}

// poll announces batch, withdraws ended (registry keys; endedIDs their
// ids) and takes the cancel marks: one script call, or, when Redis refuses
// scripts, one command per key, pipelined.
func (c *Registry) poll(batch []announce, ended, endedIDs []string) {
	ctx := context.Background()
	ttl := strconv.FormatInt((3 * c.interval).Milliseconds(), 10)
	c.polls.Add(1)
	if !c.scriptRefused.Load() {
		keys := make([]string, 0, 2*len(batch)+len(ended)+2)
		args := make([]string, 0, 3+3*len(batch)+len(ended))
		args = append(args, ttl, strconv.Itoa(len(batch)), strconv.Itoa(len(ended)))
		for _, a := range batch {
			keys = append(keys, cancelPrefix+"inflight:"+a.id, cancelPrefix+"mark:"+a.id)
			args = append(args, a.tenant, c.member(a.key), a.info)
		}
		for i, key := range ended {
			keys = append(keys, cancelPrefix+"inflight:"+endedIDs[i])
			args = append(args, c.member(key))
		}
		keys = append(keys, indexKey, infoKey)
		hits, err := c.redis.Exec(ctx, pollScript, keys, args).AsIntSlice()
		if err == nil {
			for _, h := range hits {
				switch {
				case h >= 1 && int(h) <= len(batch):
					c.fire(batch[h-1].id, batch[h-1].tenant)
				case h <= -1 && int(-h) <= len(batch):
					c.resend[batch[-h-1].key] = true
				}
			}
			return
		}
		if redisx.IsUnavailable(err) {
			c.pollFailures.Add(1)
			c.resendAll(batch)
			return // in-process cancels only until Redis answers
		}
		c.log.Warn("cancel poll: Redis refused the script; polling one command per key", "err", err)
		c.scriptRefused.Store(true)
	}
	c.fallbackPolls.Add(1)
	raw, err := c.redis.Raw()
	if err != nil {
		c.pollFailures.Add(1)
		c.resendAll(batch)
		return
	}
	// As the script: withdrawals first, then per request in flight its
	// announcement (inflight key, index entry and info, sent every poll:
	// this path cannot ask Redis which info it lacks) and the removal of
	// its tenant's mark and of an admin mark. Deadlines are on this
	// replica's clock here; stale index entries are dropped, their info
	// left to the hash's expiry.
	const perRequest = 5
	deadline := strconv.FormatInt(time.Now().Add(3*c.interval).UnixMilli(), 10)
	cmds := make(rueidis.Commands, 0, 3*len(ended)+perRequest*len(batch)+3)
	for i, key := range ended {
		cmds = append(cmds, raw.B().Del().Key(cancelPrefix+"inflight:"+endedIDs[i]).Build(),
			raw.B().Zrem().Key(indexKey).Member(c.member(key)).Build(),
			raw.B().Hdel().Key(infoKey).Field(c.member(key)).Build())
	}
	for _, a := range batch {
		mark := cancelPrefix + "mark:" + a.id
		info := a.info
		if info == "" {
			info = c.infoJSON(&a)
		}
		cmds = append(cmds,
			raw.B().Set().Key(cancelPrefix+"inflight:"+a.id).Value(a.tenant).Px(3*c.interval).Build(),
			raw.B().Zadd().Key(indexKey).ScoreMember().ScoreMember(float64(time.Now().Add(3*c.interval).UnixMilli()), c.member(a.key)).Build(),
			raw.B().Hset().Key(infoKey).FieldValue().FieldValue(c.member(a.key), info).Build(),
			raw.B().Srem().Key(mark).Member(markFor(a.tenant)).Build(),
			raw.B().Srem().Key(mark).Member(markFor(AnyTenant)).Build())
	}
	cmds = append(cmds, raw.B().Zremrangebyscore().Key(indexKey).Min("-inf").Max(deadline).Build())
	if len(batch) > 0 {
		cmds = append(cmds, raw.B().Pexpire().Key(indexKey).Milliseconds((3 * c.interval).Milliseconds()).Build(),
			raw.B().Pexpire().Key(infoKey).Milliseconds((3 * c.interval).Milliseconds()).Build())
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
	for i, a := range batch {
		at := 3*len(ended) + perRequest*i
		own, _ := res[at+3].AsInt64()
		admin, _ := res[at+4].AsInt64()
		if own == 1 || admin == 1 {
			c.fire(a.id, a.tenant)
		}
	}
}

// resendAll makes the next poll send the info of batch again: this poll's
// may not have arrived.
func (c *Registry) resendAll(batch []announce) {
	for _, a := range batch {
		if a.info != "" {
			c.resend[a.key] = true
		}
	}
}

// List returns the requests in flight: this replica's from its registry
// and, with Redis, every other replica's that a poll announced (a request
// is listed from its replica's first poll after it started until its
// withdrawal, or three poll intervals after its replica's last poll). It
// sends one script call (or, when Redis refuses scripts, two commands);
// never on the request path.
func (c *Registry) List(ctx context.Context) ([]Request, error) {
	c.mu.Lock()
	out := make([]Request, 0, len(c.reqs))
	for _, r := range c.reqs {
		out = append(out, Request{ID: r.id, TenantID: r.tenant, Model: r.info.Model, StartedAt: r.info.Started.UTC(), Stream: r.info.Stream, Replica: c.replica})
	}
	c.mu.Unlock()
	if c.redis == nil {
		return out, nil
	}
	var vals []rueidis.RedisMessage
	var err error
	if !c.scriptRefused.Load() {
		vals, err = c.redis.Exec(ctx, listScript, []string{indexKey, infoKey}, nil).ToArray()
	} else {
		var members []string
		members, err = c.redis.Do(ctx, func(b rueidis.Builder) rueidis.Completed {
			return b.Zrange().Key(indexKey).Min("(" + strconv.FormatInt(time.Now().UnixMilli(), 10)).Max("+inf").Byscore().Build()
		}).AsStrSlice()
		if err == nil && len(members) > 0 {
			vals, err = c.redis.Do(ctx, func(b rueidis.Builder) rueidis.Completed {
				return b.Hmget().Key(infoKey).Field(members...).Build()
			}).ToArray()
		}
	}
	if err != nil && !rueidis.IsRedisNil(err) {
		return nil, fmt.Errorf("listing requests in flight: %w", err)
	}
	for _, v := range vals {
		s, err := v.ToString()
		if err != nil {
			continue // info not sent yet (nil)
		}
		var r Request
		if json.Unmarshal([]byte(s), &r) != nil || r.Replica == c.replica {
			continue // this replica's are listed from the registry
		}
		out = append(out, r)
	}
	return out, nil
}

// Replica is this process's name in listings.
func (c *Registry) Replica() string { return c.replica }

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
