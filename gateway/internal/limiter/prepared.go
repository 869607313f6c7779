package limiter

import (
	"context"
	"fmt"

	"github.com/redis/rueidis"

	"github.com/tollgate/tollgate/gateway/internal/redisx"
)

// Admission is one request's admission prepared for a script call: the
// keys and arguments of AdmitLua's admit function, and how to read its
// reply. Redis.Admit runs it alone; package meterstore runs it with the
// request's budget hold in one script call. Release it when done; it must
// not be used after that.
type Admission struct {
	r    *Redis
	req  *Request
	call *redisCall
}

// PrepareAdmit validates req and prepares its admission. The Admission
// keeps req, which must not change until Release.
func (r *Redis) PrepareAdmit(req *Request) (*Admission, error) {
	if err := validate(req); err != nil {
		r.invalid.Add(1)
		return nil, err
	}
	call := r.calls.Get().(*redisCall)
	call.plan.build(req.Limits, req.Tokens, 1)
	if call.plan.n > 0 {
		call.prepare(r.prefix, req.Tenant, req.Limits, true)
	}
	a := &call.adm // pooled with the call: an admission allocates nothing
	*a = Admission{r: r, req: req, call: call}
	return a, nil
}

// Local reports whether the admission needs no Redis (no limit has an RPM
// or a TPM): it is then allowed, counted as such.
func (a *Admission) Local() (Decision, bool) {
	if a.call.plan.n > 0 {
		return Decision{}, false
	}
	a.r.admitted.Add(1)
	return Decision{Allowed: true}, true
}

// Keys are the cells' keys, every one under the tenant's hash tag; the
// slice is the Admission's.
func (a *Admission) Keys() []string { return a.call.keys }

// Args are the cells' costs and tolerances; the slice is the Admission's.
func (a *Admission) Args() []string { return a.call.args }

// Decide reads admit's reply (an array, or an error) into the decision.
func (a *Admission) Decide(reply rueidis.RedisMessage) (Decision, error) {
	p := &a.call.plan
	now, ok, err := p.readAdmit(reply)
	if err != nil {
		a.r.errs.Add(1)
		return Decision{}, fmt.Errorf("rate limiting tenant %q: %w", a.req.Tenant, err)
	}
	d := p.decision(now, ok)
	a.r.count(d)
	return d, nil
}

// Failed decides after the script call failed with err: the fallback's
// decision under FailOpen when Redis is unavailable, else the error.
func (a *Admission) Failed(err error) (Decision, error) {
	req := a.req
	if err := a.r.failed(err, req.OnError, req.Tenant); err != nil {
		return Decision{}, err
	}
	d := a.r.fallback.admit(&a.call.plan, req.Tenant, req.Limits, req.Tokens, a.r.divisor(req.Replicas))
	d.Fallback = true
	a.r.fallbacks.Add(1)
	a.r.count(d)
	return d, nil
}

// Release gives the Admission's memory back.
func (a *Admission) Release() {
	if c := a.call; c != nil {
		a.call, a.req = nil, nil
		a.r.put(c)
	}
}

// Adjustment is a token correction prepared for a script call: the keys
// and arguments of AdjustLua's adjust function. Redis.Adjust runs it
// alone; package meterstore with the request's budget settle. Release it
// when done.
type Adjustment struct {
	r        *Redis
	tenant   string
	limits   []Limit
	delta    int64
	mode     FailMode
	replicas int
	call     *redisCall
}

// PrepareAdjust validates and prepares Adjust(tenant, limits, delta,
// mode, replicas). The Adjustment keeps limits, which must not change
// until Release.
func (r *Redis) PrepareAdjust(tenant string, limits []Limit, delta int64, mode FailMode, replicas int) (*Adjustment, error) {
	if err := validateMode(mode, replicas); err != nil {
		r.invalid.Add(1)
		return nil, err
	}
	if err := validateLimits(tenant, limits); err != nil {
		r.invalid.Add(1)
		return nil, err
	}
	call := r.calls.Get().(*redisCall)
	call.plan.buildAdjust(limits, delta, 1)
	if call.plan.n > 0 {
		call.prepare(r.prefix, tenant, limits, false)
	}
	a := &call.adj
	*a = Adjustment{r: r, tenant: tenant, limits: limits, delta: delta, mode: mode, replicas: replicas, call: call}
	return a, nil
}

// Keys are the token cells' keys (none: nothing to adjust); the slice is
// the Adjustment's.
func (a *Adjustment) Keys() []string { return a.call.keys }

// Args are the cells' shifts; the slice is the Adjustment's.
func (a *Adjustment) Args() []string { return a.call.args }

// Failed handles a failed script call: the fallback takes the correction
// under FailOpen when Redis is unavailable; otherwise the error.
func (a *Adjustment) Failed(err error) error {
	if err := a.r.failed(err, a.mode, a.tenant); err != nil {
		return err
	}
	a.r.fallback.adjust(&a.call.plan, a.tenant, a.limits, a.delta, a.r.divisor(a.replicas))
	return nil
}

// Release gives the Adjustment's memory back.
func (a *Adjustment) Release() {
	if c := a.call; c != nil {
		a.call, a.limits = nil, nil
		a.r.put(c)
	}
}

// Client is the Redis client the limiter keeps its cells in.
func (r *Redis) Client() *redisx.Client { return r.c }

// admitAlone runs a prepared admission in a script call of its own.
func (r *Redis) admitAlone(ctx context.Context, a *Admission) (Decision, error) {
	if d, ok := a.Local(); ok {
		return d, nil
	}
	res := r.c.Exec(ctx, admitScript, a.Keys(), a.Args())
	if err := res.Error(); err != nil {
		return a.Failed(err)
	}
	msg, err := res.ToMessage()
	if err != nil {
		return a.Failed(err)
	}
	return a.Decide(msg)
}
