package meterstore

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/redis/rueidis"

	"github.com/tollgate/tollgate/gateway/internal/redisx"
)

// Calls that arrive while another with the same keys is on its way to
// Redis share a call. Admissions (admit_reserve) and ends made before the
// last byte (adjust_settle) each do so among themselves:
//
//   - The first call of a group — the requests whose calls have the same
//     keys but for the settled marker: one tenant, the same limits and
//     budget scopes — goes at once, alone, as before.
//   - Each one that starts while that call is in flight waits for it,
//     without holding anything but its goroutine; when the call's reply
//     comes back, all the waiters go in one call of admit_reserve_many
//     (adjust_settle_many), made by the first of them, and so on while
//     some wait.
//   - The shared call decides them in the order they arrived exactly as
//     the call for each in turn would (one clock reading for all of them,
//     as if they had arrived in the same microsecond), but reads each key
//     once and writes each once, where B calls read and write every key B
//     times and pay B calls' own cost.
//
// A request alone never waits: sharing costs nothing at one request at a
// time and, under load, a call waits at most for the one in flight, whose
// round trip it would have queued behind in Redis anyway. What Redis saves
// is the point: the per-call cost and the reads and writes are paid once a
// batch, and one tenant's counters, which live in one Redis core (one hash
// slot), serve more requests a second (docs/adr/0031-counter-calls-share-a-call.md).

// maxBatch is the most requests' calls one shared call carries; more
// wait for the next.
const maxBatch = 64

// SharedCounts count the calls that shared a call with others; they
// outlive a Store (CountShared).
type SharedCounts struct {
	// Shared counts the requests' calls sent in a call with others, Calls
	// the calls that carried them.
	Shared, Calls atomic.Int64
}

// CountShared makes the Store count its shared admissions in admits and
// its shared ends in ends. Call it before use.
func (s *Store) CountShared(admits, ends *SharedCounts) {
	s.admitGroups.counts, s.endGroups.counts = admits, ends
}

// callWait is a call waiting for its group's call in flight.
type callWait struct {
	keys, args []string
	ready      chan struct{} // closed once parts and err are set, or lead
	lead       []*callWait   // set when this call makes the group's next call, for these
	parts      []rueidis.RedisMessage
	err        error
}

// callGroup is a group with a call in flight and the calls waiting for it.
type callGroup struct {
	waiting []*callWait
}

// groups is the Store's groups of one function with a call in flight, by
// the keys of their calls but the first (the marker).
type groups struct {
	one, many *redisx.Function // the call alone, shared
	carry     bool             // a call carries its tenant's pending ends
	counts    *SharedCounts
	off       bool // every call goes alone (tests)
	// beforeFirst, when set (tests), runs before a group's first call.
	beforeFirst func()
	mu          sync.Mutex
	m           map[string]*callGroup
}

// groupKey is the keys of a call but the marker, each ended by a 0 byte.
func groupKey(buf []byte, keys []string) []byte {
	for _, k := range keys[1:] {
		buf = append(buf, k...)
		buf = append(buf, 0)
	}
	return buf
}

// join registers a call of keys: it reports true when no call of its
// group is in flight (the caller makes it now, then calls done), else it
// returns the call's place among the waiters.
func (g *groups) join(key []byte, keys, args []string) (*callWait, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.m == nil {
		g.m = make(map[string]*callGroup)
	}
	grp := g.m[string(key)]
	if grp == nil {
		g.m[string(key)] = &callGroup{}
		return nil, true
	}
	w := &callWait{keys: keys, args: args, ready: make(chan struct{})}
	grp.waiting = append(grp.waiting, w)
	return w, false
}

// done ends a call of the group: the group is gone when nobody waits;
// else the first maxBatch waiters make the next call, the first of them
// leading it.
func (g *groups) done(key []byte) {
	g.mu.Lock()
	grp := g.m[string(key)]
	if len(grp.waiting) == 0 {
		delete(g.m, string(key))
		g.mu.Unlock()
		return
	}
	k := min(len(grp.waiting), maxBatch)
	lead := make([]*callWait, k)
	copy(lead, grp.waiting)
	rest := copy(grp.waiting, grp.waiting[k:])
	clear(grp.waiting[rest:])
	grp.waiting = grp.waiting[:rest]
	g.mu.Unlock()
	lead[0].lead = lead
	close(lead[0].ready)
}

// leave takes w out of its group's waiters, if no call has taken it yet.
func (g *groups) leave(key []byte, w *callWait) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	grp := g.m[string(key)]
	if grp == nil {
		return false
	}
	for i, x := range grp.waiting {
		if x == w {
			n := len(grp.waiting) - 1
			copy(grp.waiting[i:], grp.waiting[i+1:])
			grp.waiting[n] = nil // the slot keeps no waiter that left
			grp.waiting = grp.waiting[:n]
			return true
		}
	}
	return false
}

// call makes g's call of keys and args, alone or shared with the
// group's others (see above), and returns its reply's parts. carried are
// the tenant's pending ends, sent ahead of a call made alone (g.carry).
func (s *Store) call(ctx context.Context, g *groups, tenant string, carried []*endCall, keys, args []string) ([]rueidis.RedisMessage, error) {
	if g.off {
		return s.callAlone(ctx, g, carried, keys, args)
	}
	var buf [256]byte
	key := groupKey(buf[:0], keys)
	w, first := g.join(key, keys, args)
	if first {
		if f := g.beforeFirst; f != nil {
			f()
		}
		parts, err := s.callAlone(ctx, g, carried, keys, args)
		g.done(key)
		return parts, err
	}
	select {
	case <-w.ready:
	case <-ctx.Done():
		if g.leave(key, w) {
			return nil, ctx.Err()
		}
		<-w.ready
	}
	if w.lead != nil {
		// The call is the others' too: the request's own cancellation
		// does not end it.
		s.callShared(context.WithoutCancel(ctx), g, tenant, key, w.lead)
	}
	return w.parts, w.err
}

// callAlone makes one request's call of g, carrying the tenant's pending
// ends ahead of it.
func (s *Store) callAlone(ctx context.Context, g *groups, carried []*endCall, keys, args []string) ([]rueidis.RedisMessage, error) {
	var res rueidis.RedisResult
	if len(carried) > 0 {
		res = s.carry(ctx, carried, &redisx.Call{F: g.one, Keys: keys, Args: args})
	} else {
		res = s.rl.Client().FCall(ctx, g.one, keys, args)
	}
	return replyParts(res.ToArray())
}

func replyParts(parts []rueidis.RedisMessage, err error) ([]rueidis.RedisMessage, error) {
	if err == nil && len(parts) == 0 {
		err = fmt.Errorf("empty reply")
	}
	return parts, err
}

// callShared makes the call of the waiters in lead (lead[0] makes it),
// hands each its reply and the group's next call to its waiters.
func (s *Store) callShared(ctx context.Context, g *groups, tenant string, key []byte, lead []*callWait) {
	var buf [maxPending]*endCall
	var carried []*endCall
	if g.carry {
		carried = s.ends.carried(tenant, buf[:0])
	}
	if len(lead) == 1 {
		w := lead[0]
		w.parts, w.err = s.callAlone(ctx, g, carried, w.keys, w.args)
		g.done(key)
		return
	}
	keys, args := joinMany(lead)
	var res rueidis.RedisResult
	if len(carried) > 0 {
		res = s.carry(ctx, carried, &redisx.Call{F: g.many, Keys: keys, Args: args})
	} else {
		res = s.rl.Client().FCall(ctx, g.many, keys, args)
	}
	g.done(key)
	if c := g.counts; c != nil {
		c.Shared.Add(int64(len(lead)))
		c.Calls.Add(1)
	}
	replies, err := res.ToArray()
	if err == nil && len(replies) != len(lead) {
		err = fmt.Errorf("shared call reply has %d parts, want %d", len(replies), len(lead))
	}
	for i, w := range lead {
		if err != nil {
			w.err = err
		} else {
			w.parts, w.err = replyParts(replies[i].ToArray())
		}
		if i > 0 {
			close(w.ready)
		}
	}
}

// joinMany makes the keys and arguments of the shared function
// (admit_reserve_many, adjust_settle_many) for the calls in lead, whose
// keys are the same but the first and whose arguments are as many.
func joinMany(lead []*callWait) (keys, args []string) {
	first := lead[0]
	keys = make([]string, 0, len(first.keys)+len(lead)-1)
	keys = append(keys, first.keys...)
	per := len(first.args) - 2 // joinCall's arguments without its two counts
	args = make([]string, 0, per*len(lead)+3)
	for i, w := range lead {
		if i > 0 {
			keys = append(keys, w.keys[0])
		}
		args = append(args, w.args[:per]...)
	}
	// joinCall's counts (the budget's keys and arguments), then how many.
	args = append(args, first.args[per:]...)
	args = append(args, strconv.Itoa(len(lead)))
	return keys, args
}
