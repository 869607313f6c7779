package meterstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/redis/rueidis"

	"github.com/tollgate/tollgate/gateway/internal/budget"
	"github.com/tollgate/tollgate/gateway/internal/redisx"
)

// A request's end — its token correction and its budget settle — need not
// hold the reply's last byte for a Redis round trip. What the next request
// must find is the end done before its own admission; End gives that
// without waiting:
//
//   - End sends the end call (end_once) on a goroutine of its own and
//     registers it as pending for the tenant; the reply's last byte goes at
//     once.
//   - Every admission of the tenant that starts while an end is pending
//     carries it: the end calls go first in the admission's own write
//     (redisx.Client.FCallMulti), so Redis runs them before the admission,
//     in one round trip. An end is pending until a reply says it ran.
//   - An end runs once however many calls carry it: end_once settles first,
//     and the settle's marker (the request id, kept for the settled window)
//     makes every later copy a repeat that changes nothing, the token
//     correction included, which runs only in the call whose settle was
//     not a repeat.
//
// So a client's next request through this gateway sees its previous
// request's end exactly as if the last byte had waited for it (the end
// runs before the next admission, in Redis's order). A request through
// another gateway sees it once the end call arrives, a round trip after
// the last byte at most, as a concurrent request would.
//
// An end is deferred only when no other admission has started on the
// Store since the request's own, and a tenant has at most maxPending ends
// pending: under concurrency a request's end overlaps the others' round
// trips anyway, and every carried copy of an end that has run costs Redis
// a repeat settle. Otherwise the end is made before the last byte, as
// AdjustSettle makes it.

// maxPending is how many ends a tenant may have pending at once.
const maxPending = 1

// errNotCorrected is a deferred end's correction when its settle failed:
// end_once corrects only after a settle that ran.
var errNotCorrected = errors.New("rate limit: token correction not made: the budget settle failed")

// endCall is one pending end: its end_once call, made of copies (the
// request's own memory is reused once End returns).
type endCall struct {
	keys, args []string
	corr       Correction
	p          *budget.Settlement
	st         Settlement
	done       atomic.Bool // its result was handed to the Store's onEnd
	acked      bool        // removed from pending (Store.mu)
}

// EndCounts count what happened to requests' ends; they outlive a Store
// (CountEnds).
type EndCounts struct {
	// Before counts ends made before the reply's last byte, After those
	// made after it (End deferred them).
	Before, After atomic.Int64
	// Carried counts the copies of pending ends admissions carried.
	Carried atomic.Int64
}

// CountEnds makes the Store count its ends in c. Call it before use.
func (s *Store) CountEnds(c *EndCounts) { s.ends.counts = c }

// ends is the Store's pending ends.
type ends struct {
	counts  *EndCounts
	mu      sync.Mutex
	pending map[string][]*endCall // by tenant
	n       atomic.Int64          // how many are pending, all tenants
	senders sync.WaitGroup
	onEnd   func(*Correction, *Settlement, Settled)
	// beforeSend and beforeAck, when set (tests), run before a sender's
	// call and before it removes its end from pending.
	beforeSend, beforeAck func()
}

// OnEnd sets what a deferred end does with its result: f gets the
// request's correction and settlement and what the end did, once per
// end, on whatever goroutine learned it. Set it before End is used.
func (s *Store) OnEnd(f func(*Correction, *Settlement, Settled)) { s.ends.onEnd = f }

// Wait waits until every end End deferred has been answered (or has
// failed: each within the Redis command timeout). Call it before the Redis
// client closes.
func (s *Store) Wait() { s.ends.senders.Wait() }

// End is AdjustSettle for a request whose reply need not wait for it: when
// the Store is OneTrip, OnEnd was set, the request has a settlement, no
// admission has started on the Store since the request's own (seq, its
// Admitted.Seq; 0 for a request admitted otherwise) and its tenant has fewer than maxPending ends pending, it
// returns deferred at once and the result goes to the OnEnd function later
// (see above). Otherwise it is AdjustSettle and returns its result.
//
// The idle rule keeps the deferral where it pays: a request alone on the
// counters waits for nothing but its own round trips, while under
// concurrency its end's round trip overlaps the other requests' and
// carrying it would only cost Redis repeats.
func (s *Store) End(c *Correction, st *Settlement, seq uint64) (out Settled, deferred bool) {
	if c != nil && c.Fallback && s.rl != nil {
		// The fallback's correction is made here, in-process; only the
		// settle can be deferred.
		var adjustErr error
		c, adjustErr = s.adjustFallback(c)
		out, deferred = s.End(c, st, seq)
		if out.AdjustErr == nil {
			out.AdjustErr = adjustErr
		}
		return out, deferred
	}
	if seq == 0 || s.rl == nil || s.ends.onEnd == nil || st == nil || (c != nil && c.Tenant != st.Tenant) || s.admits.Load() != seq {
		return s.endNow(c, st), false
	}
	e, ok := s.prepareEnd(c, st)
	if !ok || !s.ends.add(st.Tenant, e) {
		return s.endNow(c, st), false
	}
	if n := s.ends.counts; n != nil {
		n.After.Add(1)
	}
	s.ends.senders.Add(1)
	go s.send(e)
	return Settled{}, true
}

// endNow is End's AdjustSettle, counted.
func (s *Store) endNow(c *Correction, st *Settlement) Settled {
	if n := s.ends.counts; n != nil && (c != nil || st != nil) {
		n.Before.Add(1)
	}
	return s.AdjustSettle(context.Background(), c, st)
}

// prepareEnd makes the end_once call of c and st, on copies of what the
// request's memory holds.
func (s *Store) prepareEnd(c *Correction, st *Settlement) (*endCall, bool) {
	e := &endCall{st: *st}
	e.st.Scopes = slices.Clone(st.Scopes)
	p, err := s.rb.PrepareSettle(e.st.Tenant, e.st.RequestID, e.st.Scopes, e.st.Actual)
	if err != nil {
		return nil, false
	}
	e.p = p
	var ak, aa []string
	if c != nil {
		e.corr = *c
		e.corr.Limits = slices.Clone(c.Limits)
		a, err := s.rl.PrepareAdjust(c.Tenant, c.Limits, c.Delta, c.Mode, c.Replicas)
		if err != nil {
			return nil, false
		}
		defer a.Release()
		ak, aa = a.Keys(), a.Args()
	}
	e.keys, e.args = joinCall(p.Keys(), p.Args(), ak, aa) // copies the slices
	return e, true
}

// add registers e as pending for tenant, unless the tenant has
// maxPending already.
func (q *ends) add(tenant string, e *endCall) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.pending == nil {
		q.pending = make(map[string][]*endCall)
	}
	l := q.pending[tenant]
	if len(l) >= maxPending {
		return false
	}
	q.pending[tenant] = append(l, e)
	q.n.Add(1)
	return true
}

// carried appends the tenant's pending ends to dst.
func (q *ends) carried(tenant string, dst []*endCall) []*endCall {
	if q.n.Load() == 0 {
		return dst
	}
	q.mu.Lock()
	dst = append(dst, q.pending[tenant]...)
	q.mu.Unlock()
	return dst
}

// ack removes e from pending: a reply said it ran (or its sender gave up).
func (q *ends) ack(e *endCall) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if e.acked {
		return
	}
	e.acked = true
	t := e.st.Tenant
	l := q.pending[t]
	if i := slices.Index(l, e); i >= 0 {
		l = slices.Delete(l, i, i+1)
	}
	if len(l) == 0 {
		delete(q.pending, t)
	} else {
		q.pending[t] = l
	}
	q.n.Add(-1)
}

// send makes e's own end call: at once, beside the next requests.
func (s *Store) send(e *endCall) {
	defer s.ends.senders.Done()
	defer func() {
		if f := s.ends.beforeAck; f != nil {
			f()
		}
		s.ends.ack(e)
	}()
	if f := s.ends.beforeSend; f != nil {
		f()
	}
	ctx := context.Background()
	for try := 0; ; try++ {
		res := s.rl.Client().FCall(ctx, endOnce, e.keys, e.args)
		parts, err := endParts(res)
		if err != nil {
			s.finish(e, s.endFailed(e, err))
			return
		}
		out, applied, cold := s.readEnd(e, parts)
		if cold && try == 0 {
			if err := e.p.Seed(ctx, parts[1]); err != nil {
				s.finish(e, Settled{SettleErr: err})
				return
			}
			continue
		}
		if cold {
			out = Settled{SettleErr: errors.New("budget settle: the scopes' spent is still missing after seeding")}
			if e.corr.Tenant != "" {
				out.AdjustErr = errNotCorrected
			}
			applied = true
		}
		if applied {
			s.finish(e, out)
		}
		return
	}
}

// readEnd reads an end_once reply: what it did, whether it ran (its settle
// was not a repeat; an error reply counts as run, as its outcome is
// final), and whether the scopes need seeding first.
func (s *Store) readEnd(e *endCall, parts []rueidis.RedisMessage) (out Settled, applied, cold bool) {
	crossed, applied, cold, err := e.p.ReadOnce(parts[1])
	if err != nil {
		out.SettleErr = err
		if e.corr.Tenant != "" {
			out.AdjustErr = errNotCorrected
		}
		return out, true, false
	}
	if !applied {
		return Settled{}, false, cold
	}
	out.Crossed = crossed
	if err := parts[0].Error(); err != nil {
		out.AdjustErr = s.adjustFailed(e, err)
	}
	return out, true, false
}

// endFailed is the result of an end call that failed as a whole.
func (s *Store) endFailed(e *endCall, err error) Settled {
	return Settled{AdjustErr: s.adjustFailed(e, err), SettleErr: e.p.Failed(err)}
}

// adjustFailed hands err to the correction's Failed (the in-process
// fallback takes the correction under fail_open).
func (s *Store) adjustFailed(e *endCall, err error) error {
	if e.corr.Tenant == "" {
		return nil
	}
	a, perr := s.rl.PrepareAdjust(e.corr.Tenant, e.corr.Limits, e.corr.Delta, e.corr.Mode, e.corr.Replicas)
	if perr != nil {
		return perr
	}
	defer a.Release()
	return a.Failed(err)
}

// finish hands e's result to onEnd, once.
func (s *Store) finish(e *endCall, out Settled) {
	if e.done.CompareAndSwap(false, true) {
		var c *Correction
		if e.corr.Tenant != "" {
			c = &e.corr
		}
		s.ends.onEnd(c, &e.st, out)
	}
}

// carriedReplies reads the replies of the ends an admission carried: an
// end that ran is finished and no longer pending; one whose reply was
// cold or failed is left to its sender.
func (s *Store) carriedReplies(carried []*endCall, replies []rueidis.RedisResult) {
	if n := s.ends.counts; n != nil {
		n.Carried.Add(int64(len(carried)))
	}
	for i, e := range carried {
		parts, err := endParts(replies[i])
		if err != nil {
			continue
		}
		out, applied, cold := s.readEnd(e, parts)
		if cold {
			continue
		}
		if applied {
			s.finish(e, out)
		}
		s.ends.ack(e)
	}
}

func endParts(res rueidis.RedisResult) ([]rueidis.RedisMessage, error) {
	parts, err := res.ToArray()
	if err == nil && len(parts) != 2 {
		err = fmt.Errorf("end call reply has %d parts, want 2", len(parts))
	}
	return parts, err
}

// carry runs the carried ends' calls and then, unless nil, admit's, in
// one write, and returns admit's reply: AdmitReserve's call when the
// tenant has ends pending, or (admit nil) the ends alone.
func (s *Store) carry(ctx context.Context, carried []*endCall, admit *redisx.Call) rueidis.RedisResult {
	var callBuf [maxPending + 1]redisx.Call
	var resBuf [maxPending + 1]rueidis.RedisResult
	calls := callBuf[:0]
	for _, e := range carried {
		calls = append(calls, redisx.Call{F: endOnce, Keys: e.keys, Args: e.args})
	}
	if admit != nil {
		calls = append(calls, *admit)
	}
	res := s.rl.Client().FCallMulti(ctx, calls, resBuf[:0])
	s.carriedReplies(carried, res)
	if admit == nil {
		return rueidis.RedisResult{}
	}
	return res[len(res)-1]
}

// Before runs the tenant's pending ends, in one round trip, if it has any:
// a path that admits or holds for the tenant other than AdmitReserve's
// (which carries them in its own call) calls it first.
func (s *Store) Before(ctx context.Context, tenant string) {
	var buf [maxPending]*endCall
	s.runCarried(ctx, s.ends.carried(tenant, buf[:0]))
}

// runCarried runs carried ends in one write of their own.
func (s *Store) runCarried(ctx context.Context, carried []*endCall) {
	if len(carried) > 0 {
		s.carry(ctx, carried, nil)
	}
}
