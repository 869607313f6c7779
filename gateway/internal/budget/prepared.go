package budget

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"github.com/tollgate/tollgate/gateway/internal/redisx"
)

// Hold is a Reserve (or Extend) prepared for a script call: the keys and
// arguments of HoldSettleLua's reserve function, and how to read its reply.
// Redis.Reserve runs it alone; package meterstore runs it after the rate
// limiter's admission in one script call. A cold reply (a scope without
// its spent key) is finished by Seeded, which seeds and runs it alone.
type Hold struct {
	r                 *Redis
	op                string
	script            *rueidis.Lua
	tenant, requestID string
	scopes            []Scope
	keys, args        []string
}

// PrepareReserve validates and prepares Reserve(tenant, requestID,
// scopes, amount, lease). The Hold keeps scopes, which must not change
// while it is used.
func (r *Redis) PrepareReserve(tenant, requestID string, scopes []Scope, amount int64, lease time.Duration) (*Hold, error) {
	if err := checkHold(requestID, amount, lease); err != nil {
		return nil, err
	}
	return r.prepareHold("reserve", reserveScript, tenant, requestID, scopes, amount, lease)
}

// Keys are the marker's and the scopes' keys, every one under the
// tenant's hash tag; the slice is the Hold's.
func (h *Hold) Keys() []string { return h.keys }

// Args are reserve's arguments; the slice is the Hold's.
func (h *Hold) Args() []string { return h.args }

// Read reads reserve's reply: the result, or cold when the reply asks for
// scopes to be seeded (then finish with Seeded).
func (h *Hold) Read(reply rueidis.RedisMessage) (res Reservation, cold bool, err error) {
	v, err := h.r.ints(h.op, reply)
	if err != nil {
		return Reservation{}, false, err
	}
	if v[0] == codeSeed {
		return Reservation{}, true, nil
	}
	res, err = h.read(v)
	return res, false, err
}

// Seeded finishes a Hold whose reply was cold: it seeds the scopes the
// reply named and runs reserve once more, alone.
func (h *Hold) Seeded(ctx context.Context, reply rueidis.RedisMessage) (Reservation, error) {
	v, err := h.r.ints(h.op, reply)
	if err != nil {
		return Reservation{}, err
	}
	if v[0] != codeSeed {
		return Reservation{}, fmt.Errorf("budget %s: seeding after a warm reply %v", h.op, v)
	}
	if err := h.r.seedScopes(ctx, h.tenant, h.scopes, h.keys, 1, v[1:]); err != nil {
		return Reservation{}, err
	}
	return h.alone(ctx)
}

// Failed is the error of a Hold whose script call failed with err.
func (h *Hold) Failed(err error) error { return redisError(h.op, err) }

// alone runs the Hold in script calls of its own (two and a seed when
// cold).
func (h *Hold) alone(ctx context.Context) (Reservation, error) {
	v, err := h.r.run(ctx, h.op, h.script, h.tenant, h.scopes, h.keys, h.args, 1)
	if err != nil {
		return Reservation{}, err
	}
	return h.read(v)
}

// read makes the Reservation of a warm reply.
func (h *Hold) read(v []int64) (Reservation, error) {
	op, scopes := h.op, h.scopes
	if len(v) != 2+2*len(scopes) || v[1] < 0 || v[1] > int64(len(scopes)) {
		return Reservation{}, fmt.Errorf("budget %s: unexpected reply %v", op, v)
	}
	counts := func(j int) (int64, int64) { return v[2+2*j], v[3+2*j] }
	switch v[0] {
	case codeRefused:
		if v[1] == 0 {
			return Reservation{}, fmt.Errorf("budget %s: unexpected reply %v", op, v)
		}
		return result(scopes, false, int(v[1])-1, counts), nil
	case codeAdmitted:
		return result(scopes, true, -1, counts), nil
	case codeDuplicate:
		res := result(scopes, true, -1, counts)
		res.Duplicate = true
		return res, nil
	case codeRecreated:
		res := result(scopes, true, -1, counts)
		res.Recreated = true
		return res, nil
	case codeSettled:
		return Reservation{}, settledError(h.requestID)
	}
	return Reservation{}, fmt.Errorf("budget %s: unexpected reply %v", op, v)
}

// Settlement is a Settle prepared for a script call: the keys and
// arguments of HoldSettleLua's settle function, and how to read its reply.
// Redis.Settle runs it alone; package meterstore after the rate
// limiter's token correction in one script call.
type Settlement struct {
	r                 *Redis
	tenant, requestID string
	scopes            []Scope
	keys, args        []string
}

// PrepareSettle validates and prepares Settle(tenant, requestID, scopes,
// actual). The Settlement keeps scopes, which must not change while it is
// used.
func (r *Redis) PrepareSettle(tenant, requestID string, scopes []Scope, actual int64) (*Settlement, error) {
	if err := checkSettle(requestID, actual); err != nil {
		return nil, err
	}
	if err := checkScopes(scopes); err != nil {
		return nil, err
	}
	return &Settlement{r: r, tenant: tenant, requestID: requestID, scopes: scopes,
		keys: r.keys(tenant, requestID, scopes, holdSuffixes[:]),
		args: []string{requestID, strconv.FormatInt(actual, 10), r.settledTTLArg}}, nil
}

// Keys are the marker's and the scopes' keys; the slice is the
// Settlement's.
func (st *Settlement) Keys() []string { return st.keys }

// Args are settle's arguments; the slice is the Settlement's.
func (st *Settlement) Args() []string { return st.args }

// Read reads settle's reply: the crossings, or cold when the reply asks
// for scopes to be seeded (then finish with Seeded).
func (st *Settlement) Read(reply rueidis.RedisMessage) (crossed []Crossing, cold bool, err error) {
	v, err := st.r.ints("settle", reply)
	if err != nil {
		return nil, false, err
	}
	if v[0] == codeSeed {
		return nil, true, nil
	}
	crossed, err = st.read(v)
	return crossed, false, err
}

// Seeded finishes a Settlement whose reply was cold: it seeds the scopes
// the reply named and runs settle once more, alone.
func (st *Settlement) Seeded(ctx context.Context, reply rueidis.RedisMessage) ([]Crossing, error) {
	v, err := st.r.ints("settle", reply)
	if err != nil {
		return nil, err
	}
	if v[0] != codeSeed {
		return nil, fmt.Errorf("budget settle: seeding after a warm reply %v", v)
	}
	if err := st.r.seedScopes(ctx, st.tenant, st.scopes, st.keys, 1, v[1:]); err != nil {
		return nil, err
	}
	return st.alone(ctx)
}

// ReadOnce reads the reply of a settle that may have run before (package
// meterstore's end_once): applied says this call added the cost, and
// crossed are then its crossings; a repeat (the request was settled
// already) is neither applied nor cold. cold: seed (Seed) and call again.
func (st *Settlement) ReadOnce(reply rueidis.RedisMessage) (crossed []Crossing, applied, cold bool, err error) {
	v, err := st.r.ints("settle", reply)
	if err != nil {
		return nil, false, false, err
	}
	switch {
	case v[0] == codeSeed:
		return nil, false, true, nil
	case v[0] == codeRefused && len(v) == 1:
		return nil, false, false, nil // a repeat known by its marker alone
	}
	crossed, err = st.read(v)
	return crossed, err == nil && v[0] == codeAdmitted, false, err
}

// Seed seeds the scopes a cold reply named, for the settle to be called
// again.
func (st *Settlement) Seed(ctx context.Context, reply rueidis.RedisMessage) error {
	v, err := st.r.ints("settle", reply)
	if err != nil {
		return err
	}
	if v[0] != codeSeed {
		return fmt.Errorf("budget settle: seeding after a warm reply %v", v)
	}
	return st.r.seedScopes(ctx, st.tenant, st.scopes, st.keys, 1, v[1:])
}

// Failed is the error of a Settlement whose script call failed with err.
func (st *Settlement) Failed(err error) error { return redisError("settle", err) }

func (st *Settlement) alone(ctx context.Context) ([]Crossing, error) {
	v, err := st.r.run(ctx, "settle", settleScript, st.tenant, st.scopes, st.keys, st.args, 1)
	if err != nil {
		return nil, err
	}
	return st.read(v)
}

// read makes the crossings of a warm reply.
func (st *Settlement) read(v []int64) ([]Crossing, error) {
	scopes := st.scopes
	if len(v) != 1+2*len(scopes) || (v[0] != codeAdmitted && v[0] != codeRefused) {
		return nil, fmt.Errorf("budget settle: unexpected reply %v", v)
	}
	if v[0] == codeRefused {
		return nil, nil
	}
	var out []Crossing
	var at time.Time
	for j, sc := range scopes {
		if len(sc.Alerts) == 0 {
			continue
		}
		if at.IsZero() {
			at = st.r.now()
		}
		out = appendCrossings(out, st.tenant, sc, v[1+2*j], v[2+2*j], at)
	}
	return out, nil
}

// ints reads a script's reply of integers (an error reply is the error).
func (r *Redis) ints(op string, reply rueidis.RedisMessage) ([]int64, error) {
	if err := reply.Error(); err != nil {
		return nil, redisError(op, err)
	}
	v, err := reply.AsIntSlice()
	if err != nil || len(v) == 0 {
		return nil, fmt.Errorf("budget %s: unexpected reply: %v", op, err)
	}
	return v, nil
}

// Client is the Redis client the counter keeps its state in.
func (r *Redis) Client() *redisx.Client { return r.c }
