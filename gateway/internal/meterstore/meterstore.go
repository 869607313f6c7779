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
// two operations would give made separately.
package meterstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

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
	ends    ends // deferred ends (End)
	admits  atomic.Uint64
	limiter limiter.Limiter
	budget  budget.Counter
	// Both set when the two counters share a Redis client: the pairs are
	// then one function call (FCALL) each.
	rl *limiter.Redis
	rb *budget.Redis
}

// New returns a Store on l and b. It makes each pair one function call when
// l is a *limiter.Redis and b a *budget.Redis on the same client.
func New(l limiter.Limiter, b budget.Counter) *Store {
	s := &Store{limiter: l, budget: b}
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
	var res rueidis.RedisResult
	if len(carried) > 0 {
		res = s.carry(ctx, carried, &redisx.Call{F: admitReserve, Keys: keys, Args: args})
	} else {
		res = s.rl.Client().FCall(ctx, admitReserve, keys, args)
	}
	parts, err := res.ToArray()
	if err == nil && len(parts) == 0 {
		err = errors.New("empty reply")
	}
	if err != nil {
		// The call failed as a whole: the admission decides as if alone
		// (the fallback under fail_open), and an admitted request's hold
		// is asked for alone, as it would have been.
		out := Admitted{}
		out.Decision, out.AdmitErr = a.Failed(err)
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

// AdjustSettle corrects c's tokens and settles st, in one function call when
// the Store is OneTrip and both have work for Redis (a second one plus
// seeding when a budget scope is cold, as Settle alone). Either may be nil:
// nothing of it to do.
func (s *Store) AdjustSettle(ctx context.Context, c *Correction, st *Settlement) Settled {
	var out Settled
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
	res := s.rl.Client().FCall(ctx, adjustSettle, keys, args)
	parts, err := res.ToArray()
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

// adjustSettle runs the rate limiter's token correction and then the
// budget's settle, each whatever the other did. It replies {adjust's
// reply, settle's reply}, each an error reply if it failed.
var adjustSettle = library.Function("adjust_settle")

// endOnce is adjustSettle made to run once however often it is called:
// the budget's settle first, and the token correction only when the settle
// was not a repeat (its marker did not exist). It replies {adjust's reply
// or 0, settle's reply}, or {0, {0}} when the marker exists (a repeat
// known without reading the scopes); nothing is corrected when the settle
// was a repeat, cold (seed and call again) or failed.
var endOnce = library.Function("end_once")
