// Package meterstore runs a request's rate-limit and budget counter
// operations as pairs: before the request is forwarded, its rate-limit
// admission and then, only if admitted, its budget hold; when it ends,
// its rate-limit token correction and its budget settle. With both
// counters in one Redis (a limiter.Redis and a budget.Redis on the same
// client) each pair is one call of a Lua function of the package's Redis
// Functions library (FCALL) — one round trip — since every key of a
// tenant, rate limits and budgets alike, carries the tenant's hash tag and
// so lives in one Redis Cluster slot. Otherwise (the
// in-process counters) the two operations run one after the other, in the
// same order. Either way the answers and the counters' state are what the
// two operations would give made separately. Pairs of one tenant that
// arrive while one of theirs is in flight share a call (batch.go).
package meterstore

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/budget"
	"github.com/tollgate/tollgate/gateway/internal/limiter"
	"github.com/tollgate/tollgate/gateway/internal/redisx"
)

// Hold is the budget hold asked for after an admission: the arguments of
// budget.Counter.Reserve.
type Hold struct {
	Tenant, RequestID string
	Scopes            []budget.Scope
	Amount            int64
	Lease             time.Duration
}

// Admitted is what AdmitReserve did.
type Admitted struct {
	// Decision and AdmitErr are limiter.Limiter.Admit's results.
	Decision limiter.Decision
	AdmitErr error
	// Reserved says the hold was asked for: the admission allowed the
	// request. Reservation and ReserveErr are then Reserve's results.
	Reserved    bool
	Reservation budget.Reservation
	ReserveErr  error
	// Seq numbers the admission among the Store's, from 1 (End reads it).
	Seq uint64
}

// Correction is the rate limiter's token correction at the end of a
// request: the arguments of limiter.Limiter.Adjust.
type Correction struct {
	Tenant   string
	Limits   []limiter.Limit
	Delta    int64
	Mode     limiter.FailMode
	Replicas int
	// Fallback: the admission was the in-process fallback's (Redis failed
	// under fail_open). The correction is the fallback's too: Redis never
	// counted the tokens, so giving them back there would let it admit
	// more than its limits, and waiting on it is for nothing.
	Fallback bool
}

// Settlement is the budget settle at the end of a request: the arguments
// of budget.Counter.Settle.
type Settlement struct {
	Tenant, RequestID string
	Scopes            []budget.Scope
	Actual            int64
}

// Settled is what AdjustSettle did: Adjust's error, and Settle's results.
type Settled struct {
	AdjustErr error
	Crossed   []budget.Crossing
	SettleErr error
}

// Store runs the pairs on a limiter and a budget counter. Safe for
// concurrent use.
type Store struct {
	ends ends // deferred ends (End)
	// The admissions' and the ends' calls in flight (Store.call).
	admitGroups, endGroups groups
	admits                 atomic.Uint64
	limiter                limiter.Limiter
	budget                 budget.Counter
	// Both set when the two counters share a Redis client: the pairs are
	// then one function call (FCALL) each.
	rl *limiter.Redis
	rb *budget.Redis
}

// New returns a Store on l and b. It makes each pair one function call when
// l is a *limiter.Redis and b a *budget.Redis on the same client.
func New(l limiter.Limiter, b budget.Counter) *Store {
	s := &Store{limiter: l, budget: b}
	s.admitGroups = groups{one: admitReserve, many: admitReserveMany, carry: true}
	s.endGroups = groups{one: adjustSettle, many: adjustSettleMany}
	rl, ok1 := l.(*limiter.Redis)
	rb, ok2 := b.(*budget.Redis)
	if ok1 && ok2 && rl.Client() == rb.Client() {
		s.rl, s.rb = rl, rb
	}
	return s
}

// OneTrip reports whether each pair is one function call.
func (s *Store) OneTrip() bool { return s.rl != nil }

// AdmitReserve admits lr and, if it is allowed, holds h: Admit and then
// Reserve, in one function call when the Store is OneTrip (and a second one
// plus seeding when a budget scope is cold, as Reserve alone).
func (s *Store) AdmitReserve(ctx context.Context, lr *limiter.Request, h *Hold) Admitted {
	seq := s.admits.Add(1)
	out := s.admitReserve(ctx, lr, h)
	out.Seq = seq
	return out
}

func (s *Store) admitReserve(ctx context.Context, lr *limiter.Request, h *Hold) Admitted {
	if s.rl == nil {
		return s.admitThenReserve(ctx, lr, h)
	}
	var buf [maxPending]*endCall
	carried := s.ends.carried(h.Tenant, buf[:0])
	if lr.Tenant != h.Tenant {
		s.runCarried(ctx, carried)
		s.Before(ctx, lr.Tenant)
		return s.admitThenReserve(ctx, lr, h)
	}
	a, err := s.rl.PrepareAdmit(lr)
	if err != nil {
		return Admitted{AdmitErr: err}
	}
	defer a.Release()
	if d, ok := a.Local(); ok {
		s.runCarried(ctx, carried)
		return s.reserve(ctx, Admitted{Decision: d}, h)
	}
	p, err := s.rb.PrepareReserve(h.Tenant, h.RequestID, h.Scopes, h.Amount, h.Lease)
	if err != nil {
		// Nothing to hold in Redis: admit alone, then answer as Reserve.
		s.runCarried(ctx, carried)
		out := Admitted{}
		out.Decision, out.AdmitErr = s.rl.Admit(ctx, lr)
		if out.AdmitErr == nil && out.Decision.Allowed {
			out.Reserved, out.ReserveErr = true, err
		}
		return out
	}
	keys, args := joinCall(p.Keys(), p.Args(), a.Keys(), a.Args())
	parts, err := s.call(ctx, &s.admitGroups, h.Tenant, carried, keys, args)
	if err != nil {
		// The call failed as a whole: the admission decides as if alone
		// (the fallback under fail_open). An admitted request's hold is
		// asked for alone, as it would have been, unless Redis did not
		// answer at all: then the hold fails as the call did, rather than
		// make the request wait a second timeout on a Redis that has just
		// not answered within one.
		out := Admitted{}
		out.Decision, out.AdmitErr = a.Failed(err)
		if redisx.IsUnavailable(err) && out.AdmitErr == nil && out.Decision.Allowed {
			out.Reserved = true
			out.ReserveErr = fmt.Errorf("budget reserve (with the admission): %w: %w", budget.ErrUnavailable, err)
			return out
		}
		return s.reserve(ctx, out, h)
	}
	out := Admitted{}
	out.Decision, out.AdmitErr = a.Decide(parts[0])
	if out.AdmitErr != nil || !out.Decision.Allowed {
		return out
	}
	out.Reserved = true
	if len(parts) != 2 {
		out.ReserveErr = fmt.Errorf("budget reserve: admit-reserve reply has %d parts, want 2", len(parts))
		return out
	}
	var cold bool
	out.Reservation, cold, out.ReserveErr = p.Read(parts[1])
	if cold {
		out.Reservation, out.ReserveErr = p.Seeded(ctx, parts[1])
	}
	return out
}

// admitThenReserve is AdmitReserve as two calls.
func (s *Store) admitThenReserve(ctx context.Context, lr *limiter.Request, h *Hold) Admitted {
	var out Admitted
	out.Decision, out.AdmitErr = s.limiter.Admit(ctx, lr)
	return s.reserve(ctx, out, h)
}

// reserve holds h alone if out's admission allowed the request.
func (s *Store) reserve(ctx context.Context, out Admitted, h *Hold) Admitted {
	if out.AdmitErr != nil || !out.Decision.Allowed {
		return out
	}
	out.Reserved = true
	out.Reservation, out.ReserveErr = s.budget.Reserve(ctx, h.Tenant, h.RequestID, h.Scopes, h.Amount, h.Lease)
	return out
}

// adjustFallback makes c in the rate limiter's in-process fallback when
// the fallback admitted its request (Correction.Fallback) and returns nil,
// what is left for Redis; otherwise it returns c as it is.
func (s *Store) adjustFallback(c *Correction) (*Correction, error) {
	if c == nil || !c.Fallback || s.rl == nil {
		return c, nil
	}
	return nil, s.rl.AdjustFallback(c.Tenant, c.Limits, c.Delta, c.Mode, c.Replicas)
}

// AdjustSettle corrects c's tokens and settles st, in one function call when
// the Store is OneTrip and both have work for Redis (a second one plus
// seeding when a budget scope is cold, as Settle alone). Either may be nil:
// nothing of it to do.
func (s *Store) AdjustSettle(ctx context.Context, c *Correction, st *Settlement) Settled {
	var out Settled
	c, out.AdjustErr = s.adjustFallback(c)
	if c == nil || st == nil || s.rl == nil || c.Tenant != st.Tenant {
		if c != nil {
			out.AdjustErr = s.limiter.Adjust(ctx, c.Tenant, c.Limits, c.Delta, c.Mode, c.Replicas)
		}
		if st != nil {
			out.Crossed, out.SettleErr = s.budget.Settle(ctx, st.Tenant, st.RequestID, st.Scopes, st.Actual)
		}
		return out
	}
	a, err := s.rl.PrepareAdjust(c.Tenant, c.Limits, c.Delta, c.Mode, c.Replicas)
	if err != nil {
		out.AdjustErr = err
		out.Crossed, out.SettleErr = s.rb.Settle(ctx, st.Tenant, st.RequestID, st.Scopes, st.Actual)
		return out
	}
	defer a.Release()
	p, err := s.rb.PrepareSettle(st.Tenant, st.RequestID, st.Scopes, st.Actual)
	if err != nil || len(a.Keys()) == 0 {
		if len(a.Keys()) > 0 {
			out.AdjustErr = s.rl.Adjust(ctx, c.Tenant, c.Limits, c.Delta, c.Mode, c.Replicas)
		}
		out.SettleErr = err
		if err == nil {
			out.Crossed, out.SettleErr = s.rb.Settle(ctx, st.Tenant, st.RequestID, st.Scopes, st.Actual)
		}
		return out
	}
	keys, args := joinCall(p.Keys(), p.Args(), a.Keys(), a.Args())
	parts, err := s.call(ctx, &s.endGroups, st.Tenant, nil, keys, args)
	if err == nil && len(parts) != 2 {
		err = fmt.Errorf("adjust-settle reply has %d parts, want 2", len(parts))
	}
	if err != nil {
		out.AdjustErr, out.SettleErr = a.Failed(err), p.Failed(err)
		return out
	}
	if err := parts[0].Error(); err != nil {
		out.AdjustErr = a.Failed(err)
	}
	var cold bool
	out.Crossed, cold, out.SettleErr = p.Read(parts[1])
	if cold {
		out.Crossed, out.SettleErr = p.Seeded(ctx, parts[1])
	}
	return out
}

// joinCall makes the keys and arguments of a call of two parts, the
// budget's (k1, a1) and then the rate limiter's: ARGV ends with the first
// part's numbers of keys and of arguments, which the library's split reads
// to find where the second part starts.
func joinCall(k1, a1, k2, a2 []string) (keys, args []string) {
	keys = make([]string, 0, len(k1)+len(k2))
	keys = append(append(keys, k1...), k2...)
	args = make([]string, 0, len(a1)+len(a2)+2)
	args = append(append(args, a1...), a2...)
	args = append(args, strconv.Itoa(len(k1)), strconv.Itoa(len(a1)))
	return keys, args
}

// library holds the two functions, registered once per Redis
// (FUNCTION LOAD, again after a restart or a flush: redisx.Client.FCall)
// instead of scripts whose every call defines every helper again
// (docs/adr/0020-redis-functions.md).
//
// split sets the upvalues K, A and NK, which budget.HoldSettleLua's
// functions read, to a call's keys and args and the number of the budget's
// keys, and returns where the rate limiter's part starts in each and its
// number of keys (see joinCall): both parts are read where they are, since
// copying them into tables of their own took a tenth of the call's
// instructions in Redis. failed makes the error a pcall caught an error
// reply again (pcall hands over the message).
var library = redisx.NewLibrary("tollgate_meter", `
local K, A, NK

local function split(keys, args)
  local na = #args
  local nk = tonumber(args[na - 1])
  K, A, NK = keys, args, nk
  return nk, tonumber(args[na]), #keys - nk
end

local function failed(e)
  if type(e) == 'table' and e.err then return redis.error_reply(e.err) end
  return redis.error_reply(tostring(e))
end
`+limiter.AdmitLua+limiter.AdjustLua+budget.HoldSettleLua+`
-- readSpent reads the budget's marker and spent keys and then the n keys
-- K[ko+1..ko+n] (the rate limiter's cells) with one MGET, and returns the
-- values and where the cells' start. loadSpent (budget.HoldSettleLua)
-- takes the values as pre instead of reading them again.
local function readSpent(ko, n)
  pre = nil
  local ks = spentKeys()
  local nb = #ks
  for i = 1, n do ks[nb + i] = K[ko + i] end
  return redis.call('MGET', unpack(ks)), nb
end

register('admit_reserve', function(keys, args)
  local ko, ao, n = split(keys, args)
  local v, vo = readSpent(ko, n)
  local a = admit(keys, args, ko, ao, n, v, vo)
  if a[1] ~= 1 then return {a} end
  pre = v
  local ok, b = pcall(reserve, a[2])
  if not ok then b = failed(b) end
  return {a, b}
end)

-- manyKeys reads, with one MGET, the first request's marker, every
-- scope's spent and every cell of a call of B requests (KEYS as
-- admit_reserve_many's), then the other requests' markers; it returns the
-- values and the numbers of scopes and cells.
local function manyKeys(keys, nk, B)
  local S = (nk - 1) / 3
  local C = #keys - nk - B + 1
  local ks = {keys[1]}
  for i = 1, S do ks[1 + i] = keys[3 * i - 1] end
  for i = 1, C do ks[1 + S + i] = keys[nk + i] end
  for j = 2, B do ks[S + C + j] = keys[nk + C + j - 1] end
  return redis.call('MGET', unpack(ks)), S, C
end

-- loadMany reads what a batch's holds need (admit_reserve_many): each
-- scope's spent (v[1+i], read by the batch's MGET), its holds expired at
-- now and their sum, and which of the batch's request ids (A[o+1], o a
-- multiple of stride) hold in it already. It returns the spent, the sums
-- and the holding ids by scope; or nil and the reply {codeSeed, i...}
-- naming the scopes whose spent is missing.
local function loadMany(keys, args, v, S, B, stride, now)
  local spent, missing = {}, {-1}
  for i = 1, S do
    -- As loadSpent: GET makes a key of another type the error it is.
    local s = v[1 + i] or redis.call('GET', keys[3 * i - 1])
    if s then spent[i] = tonumber(s) else missing[#missing + 1] = i end
  end
  if #missing > 1 then return nil, missing end
  local reserved, own, at = {}, {}, int(now)
  local fields = {''}
  for j = 1, B do fields[j + 1] = args[(j - 1) * stride + 1] end
  for i = 1, S do
    expire(keys[3 * i], keys[3 * i + 1], at)
    local h = redis.call('HMGET', keys[3 * i], unpack(fields))
    reserved[i] = tonumber(h[1] or 0)
    local o = {}
    for j = 1, B do
      if h[j + 1] then o[fields[j + 1]] = true end
    end
    own[i] = o
  end
  return spent, reserved, own
end

-- writeHolds writes a batch's new holds: per scope one HSET of the holds
-- and their sum, one ZADD of the leases, and the keys' TTL when renew
-- names it (as hold does for one).
local function writeHolds(keys, hs, zs, renew, reserved, S)
  for i = 1, S do
    local h = hs[i]
    if h then
      h[#h + 1] = ''
      h[#h + 1] = int(reserved[i])
      redis.call('HSET', keys[3 * i], unpack(h))
      redis.call('ZADD', keys[3 * i + 1], unpack(zs[i]))
      if renew[i] then
        redis.call('PEXPIRE', keys[3 * i], renew[i])
        redis.call('PEXPIRE', keys[3 * i + 1], renew[i])
      end
    end
  end
end

register('admit_reserve_many', function(keys, args)
  local na = #args
  local B, nab, nk = tonumber(args[na]), tonumber(args[na - 1]), tonumber(args[na - 2])
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local v, S, C = manyKeys(keys, nk, B)
  local stride = nab + 2 * C
  local tat, dirty = {}, {}
  for i = 1, C do
    -- As admit: GET makes a cell of another type the error it is.
    local x = tonumber(v[1 + S + i] or redis.call('GET', keys[nk + i])) or now
    if x < now then x = now end
    tat[i] = x
  end
  n = S
  local loaded, spent, reserved, own, cold, berr
  local hs, zs, renew, held = {}, {}, {}, {}
  local out = {}
  for j = 1, B do
    local ao = (j - 1) * stride
    local lo = ao + nab
    -- The admission, as admit on the cells as the earlier ones left them.
    local a, cost = {1, now}, {}
    for i = 1, C do
      a[i + 2] = tat[i]
      cost[i] = tonumber(args[lo + 2 * i - 1])
      if tat[i] + cost[i] - now > tonumber(args[lo + 2 * i]) then a[1] = 0 end
    end
    if a[1] ~= 1 then
      out[j] = {a}
    else
      for i = 1, C do
        if cost[i] > 0 then
          tat[i] = tat[i] + cost[i]
          dirty[i] = true
        end
      end
      -- The hold, as reserve on the holds as the earlier ones left them.
      if not loaded then
        loaded = true
        local ok, x, y, z = pcall(loadMany, keys, args, v, S, B, stride, now)
        if not ok then berr = failed(x) elseif not x then cold = y else spent, reserved, own = x, y, z end
      end
      local b
      if berr then
        b = berr
      elseif cold then
        b = cold
      else
        local id = args[ao + 1]
        local marker
        if j == 1 then marker = v[1] else marker = v[S + C + j] end
        local need, any = {}, false
        for i = 1, S do
          if not own[i][id] then need[i], any = true, true end
        end
        if marker then
          b = reply(-2, 0, spent, reserved)
        elseif not any then
          b = reply(2, 0, spent, reserved)
        else
          local amount = tonumber(args[ao + 2])
          local worst, room = 0, 0
          for i = 1, S do
            if need[i] then
              local left = tonumber(args[ao + 2 + 2 * i]) - spent[i] - reserved[i]
              if amount > left and (worst == 0 or left < room) then worst, room = i, left end
            end
          end
          if worst > 0 then
            b = reply(0, worst, spent, reserved)
          else
            local leaseEnd = int(now + tonumber(args[ao + 3]))
            for i = 1, S do
              if need[i] then
                if reserved[i] == 0 or now % 64 == 0 then renew[i] = args[ao + 3 + 2 * i] end
                reserved[i] = reserved[i] + amount
                own[i][id] = true
                local h, z = hs[i] or {}, zs[i] or {}
                h[#h + 1] = id
                h[#h + 1] = args[ao + 2]
                z[#z + 1] = leaseEnd
                z[#z + 1] = id
                hs[i], zs[i] = h, z
              end
            end
            held[#held + 1] = j
            b = reply(1, 0, spent, reserved)
          end
        end
      end
      out[j] = {a, b}
    end
  end
  for i = 1, C do
    if dirty[i] then
      redis.call('SET', keys[nk + i], int(tat[i]), 'PX', int(math.floor((tat[i] - now) / 1000) + 1000))
    end
  end
  if #held > 0 then
    local ok, e = pcall(writeHolds, keys, hs, zs, renew, reserved, S)
    if not ok then
      e = failed(e)
      for _, j in ipairs(held) do out[j][2] = e end
    end
  end
  return out
end)

-- adjustMany moves the C token cells (keys[nk+i]) by every request's
-- shifts in turn (args[o+nab+i], o = (j-1)*stride), as adjust would for
-- each, and writes each cell once.
local function adjustMany(keys, args, v, nk, S, C, B, nab, stride)
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local tat, moved = {}, {}
  for i = 1, C do
    tat[i] = tonumber(v[1 + S + i] or redis.call('GET', keys[nk + i]))
  end
  for j = 1, B do
    local o = (j - 1) * stride + nab
    for i = 1, C do
      local shift = tonumber(args[o + i])
      local old = tat[i]
      if old or shift > 0 then
        local x = old or now
        if x < now then x = now end
        x = x + shift
        if x > now then tat[i] = x else tat[i] = nil end
        moved[i] = true
      end
    end
  end
  for i = 1, C do
    if moved[i] then
      if tat[i] then
        redis.call('SET', keys[nk + i], int(tat[i]), 'PX', int(math.floor((tat[i] - now) / 1000) + 1000))
      else
        redis.call('DEL', keys[nk + i])
      end
    end
  end
end

-- settleMany settles every request in turn (its id, actual and marker
-- TTL at args[o+1..o+3]), as settle would for each: the holds of the
-- requests go with one HMGET, HDEL, ZREM and HINCRBY a scope, the cost
-- with one INCRBY a scope, and each request's marker with its SET. It
-- returns settle's reply for each.
local function settleMany(keys, args, v, S, C, B, stride)
  local spent, missing = {}, {-1}
  for i = 1, S do
    local s = v[1 + i] or redis.call('GET', keys[3 * i - 1])
    if s then spent[i] = tonumber(s) else missing[#missing + 1] = i end
  end
  local out = {}
  if #missing > 1 then
    for j = 1, B do out[j] = missing end
    return out
  end
  local ids = {}
  for j = 1, B do ids[j] = args[(j - 1) * stride + 1] end
  local own, gone, freed = {}, {}, {}
  for i = 1, S do
    local h = redis.call('HMGET', keys[3 * i], unpack(ids))
    local o = {}
    for j = 1, B do
      if h[j] then o[ids[j]] = h[j] end
    end
    own[i], gone[i], freed[i] = o, {}, 0
  end
  local marked, added = {}, {}
  for i = 1, S do added[i] = 0 end
  for j = 1, B do
    local o = (j - 1) * stride
    local id = args[o + 1]
    for i = 1, S do
      local held = own[i][id]
      if held then
        own[i][id] = nil
        local g = gone[i]
        g[#g + 1] = id
        freed[i] = freed[i] + tonumber(held)
      end
    end
    local marker
    if j == 1 then marker = v[1] else marker = v[S + C + j] end
    local r = {0}
    if not marker and not marked[id] and redis.call('SET', keys[j == 1 and 1 or #keys - B + j], '1', 'NX', 'PX', args[o + 3]) then
      marked[id] = true
      r[1] = 1
      local actual = tonumber(args[o + 2])
      for i = 1, S do
        r[#r + 1] = spent[i]
        spent[i] = spent[i] + actual
        added[i] = added[i] + actual
        r[#r + 1] = spent[i]
      end
    else
      marked[id] = true
      for i = 1, S do
        r[#r + 1] = spent[i]
        r[#r + 1] = spent[i]
      end
    end
    out[j] = r
  end
  for i = 1, S do
    local g = gone[i]
    if #g > 0 then
      redis.call('HDEL', keys[3 * i], unpack(g))
      redis.call('ZREM', keys[3 * i + 1], unpack(g))
      if freed[i] ~= 0 then redis.call('HINCRBY', keys[3 * i], '', int(-freed[i])) end
    end
    if added[i] ~= 0 then redis.call('INCRBY', keys[3 * i - 1], int(added[i])) end
  end
  return out
end

register('adjust_settle_many', function(keys, args)
  local na = #args
  local B, nab, nk = tonumber(args[na]), tonumber(args[na - 1]), tonumber(args[na - 2])
  local v, S, C = manyKeys(keys, nk, B)
  local stride = nab + C
  local a = C
  if C > 0 then
    local ok, e = pcall(adjustMany, keys, args, v, nk, S, C, B, nab, stride)
    if not ok then a = failed(e) end
  end
  local ok, b = pcall(settleMany, keys, args, v, S, C, B, stride)
  local out = {}
  for j = 1, B do
    if ok then out[j] = {a, b[j]} else out[j] = {a, failed(b)} end
  end
  return out
end)

register('end_once', function(keys, args)
  local ko, ao, n = split(keys, args)
  local v, vo = readSpent(ko, n)
  -- A copy of an end that has run: its marker is there, nothing to do.
  if v[1] then return {0, {0}} end
  pre = v
  local ok, b = pcall(settle)
  if not ok then return {0, failed(b)} end
  if b[1] ~= 1 then return {0, b} end
  local a = n
  if n > 0 then
    -- settle wrote no cell: the values read before it are current.
    ok, a = pcall(adjust, keys, args, ko, ao, n, v, vo)
    if not ok then a = failed(a) end
  end
  return {a, b}
end)

register('adjust_settle', function(keys, args)
  local ko, ao, n = split(keys, args)
  local v, vo = readSpent(ko, n)
  local ok, a = pcall(adjust, keys, args, ko, ao, n, v, vo)
  if not ok then a = failed(a) end
  -- adjust wrote no key of the budget's: the values read before it are
  -- current.
  pre = v
  local ok2, b = pcall(settle)
  if not ok2 then b = failed(b) end
  return {a, b}
end)
`)

// Preload loads the package's Redis library on c, so that a gateway's
// first requests do not each find it missing and wait for FUNCTION LOAD
// (three round trips instead of one, in one command timeout).
func Preload(ctx context.Context, c *redisx.Client) error { return c.Load(ctx, library) }

// admitReserve runs the rate limiter's admission and, only if it allowed
// the request, the budget's reserve, on the admission's clock reading
// (a[2]: one TIME for both). It replies {admit's reply} when the
// admission refused, else {admit's reply, reserve's reply}, where
// reserve's is an error reply if it failed (its admission stays charged,
// as it would have been with two calls).
var admitReserve = library.Function("admit_reserve")

// admitReserveMany is admitReserve for several requests whose keys are
// the same but for their settled markers, in one call: it admits and
// holds for each in order, as admitReserve called for each one after the
// other at one clock reading would, reading every key once and writing
// each once. KEYS: the first request's (as admitReserve), then the
// others' markers. ARGV: each request's budget and rate-limiter
// arguments, one after the other, then the number of a request's budget
// keys and budget arguments, and the number of requests. It replies an
// array of admitReserve's replies, one a request.
var admitReserveMany = library.Function("admit_reserve_many")

// adjustSettle runs the rate limiter's token correction and then the
// budget's settle, each whatever the other did. It replies {adjust's
// reply, settle's reply}, each an error reply if it failed.
var adjustSettle = library.Function("adjust_settle")

// adjustSettleMany is adjustSettle for several requests whose keys are
// the same but for their settled markers, in one call, as
// admitReserveMany is for admitReserve: it corrects and settles each in
// order, as adjustSettle called for each one after the other would, and
// replies an array of adjustSettle's replies, one a request.
var adjustSettleMany = library.Function("adjust_settle_many")

// endOnce is adjustSettle made to run once however often it is called:
// the budget's settle first, and the token correction only when the settle
// was not a repeat (its marker did not exist). It replies {adjust's reply
// or 0, settle's reply}, or {0, {0}} when the marker exists (a repeat
// known without reading the scopes); nothing is corrected when the settle
// was a repeat, cold (seed and call again) or failed.
var endOnce = library.Function("end_once")
