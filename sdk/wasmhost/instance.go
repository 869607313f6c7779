package wasmhost

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"
)

// instance is one instantiated module. It serves one callback at a time.
type instance struct {
	p   *Plugin
	mod api.Module
	// ctx carries the instance to host functions. It is never canceled:
	// a callback is stopped through stop (see interrupt.go).
	ctx context.Context
	// stop is the instrumentation's global: set to 1, the guest traps at
	// its next check. ticks counts the guest's progress. Both nil when the
	// plugin is uninterruptible.
	stop  api.MutableGlobal
	ticks api.Global
	fns   map[string]api.Function
	// callbacks are the per-request exports by callbackIndex: a callback
	// finds its function without hashing its name.
	callbacks [len(callbackExports)]api.Function

	req     *Request     // the request of the current callback
	phase   Phase        // the phase of the current callback; 0 while configuring
	started atomic.Int64 // monoNow when the current callback began; 0 when idle
	killed  atomic.Bool

	// Watchdog-only: the guest's ticks when the watchdog first saw the
	// current callback past its deadline.
	overdueCall  int64
	overdueTicks uint32
	stderr       *tailBuffer

	// services: the names of the services the guest called, so a call
	// does not allocate its name (at most maxServiceNames).
	services map[string]string
}

const maxServiceNames = 32

// serviceName returns name as a string, the same one for each call of a
// service. Only the instance's goroutine uses it.
func (inst *instance) serviceName(name []byte) string {
	if s, ok := inst.services[string(name)]; ok {
		return s
	}
	s := string(name)
	if inst.services == nil {
		inst.services = make(map[string]string)
	}
	if len(inst.services) < maxServiceNames {
		inst.services[s] = s
	}
	return s
}

type instanceKey struct{}

func runtimeProcs() int { return runtime.GOMAXPROCS(0) }

// newInstance instantiates and configures an instance in a slot the caller
// has reserved (p.count); on failure the slot is released (forget).
func (p *Plugin) newInstance(ctx context.Context) (inst *instance, err error) {
	inst = &instance{p: p, fns: make(map[string]api.Function), stderr: &tailBuffer{max: 2048}}
	inst.ctx = context.WithValue(context.Background(), instanceKey{}, inst)
	cfg := wazero.NewModuleConfig().
		WithName("").
		// _initialize is called below, under a deadline.
		WithStartFunctions().
		WithSysWalltime().
		WithSysNanotime().
		WithRandSource(rand.Reader).
		WithStderr(inst.stderr)
	mod, err := p.rt.InstantiateModule(withLinearMemory(inst.ctx), p.mod, cfg)
	if err != nil {
		p.forget(inst)
		return nil, fmt.Errorf("instantiating: %w%s", inst.explain(err), inst.stderrTail())
	}
	inst.mod = mod
	if g, ok := mod.ExportedGlobal(stopExport).(api.MutableGlobal); ok && !p.spec.Uninterruptible {
		inst.stop, inst.ticks = g, mod.ExportedGlobal(ticksExport)
	}
	p.mu.Lock()
	p.live[inst] = struct{}{}
	p.mu.Unlock()
	for name := range p.mod.ExportedFunctions() {
		inst.fns[name] = mod.ExportedFunction(name)
	}
	for i, name := range callbackExports {
		inst.callbacks[i] = inst.fns[name]
	}
	// The guest's _initialize and on_configure are rare and bounded by a
	// generous deadline of their own.
	limit := time.AfterFunc(max(time.Second, 20*p.spec.Deadline), func() {
		inst.killed.Store(true)
		inst.interrupt()
	})
	if f := inst.fns["_initialize"]; f != nil {
		if err := f.CallWithStack(inst.ctx, nil); err != nil {
			limit.Stop()
			err = inst.explain(err)
			inst.close()
			return nil, fmt.Errorf("instantiating: %w", err)
		}
	}
	defer func() {
		if !limit.Stop() && err == nil {
			// The deadline passed just as configuration returned: the
			// stop global may be set, so the instance is not usable.
			inst.close()
			inst, err = nil, fmt.Errorf("%w: %s: configuration ran past its deadline", ErrPluginFailed, p.spec.Name)
		}
	}()
	if f := inst.fns["on_configure"]; f != nil {
		inst.req = configureRequest(p.spec.Config)
		stack := []uint64{uint64(len(p.spec.Config))}
		err := f.CallWithStack(inst.ctx, stack)
		reason := string(inst.req.RejectMessage)
		inst.req = nil
		if err != nil {
			inst.close()
			return nil, fmt.Errorf("on_configure: %w%s", inst.explain(err), inst.stderrTail())
		}
		if stack[0] != 0 {
			inst.close()
			if reason == "" {
				reason = fmt.Sprintf("on_configure returned %d", int32(stack[0]))
			}
			return nil, fmt.Errorf("configuration refused: %s", reason)
		}
	}
	p.stats.InstancesCreated.Add(1)
	return inst, nil
}

// configureRequest carries the config to the `config` host function.
func configureRequest(cfg []byte) *Request {
	return &Request{Body: cfg, MaxTokens: -1, configuring: true}
}

func (inst *instance) fn(name string) api.Function { return inst.fns[name] }

// callbackExports are the exports the pipeline calls per request.
var callbackExports = [...]string{"on_request", "on_response_headers", "on_chunk", "on_end", "on_call_response"}

// callbackIndex is name's index in callbackExports, or -1 for any other
// export. The names are constants at the call sites, so the switch
// compares lengths and a few bytes where a map lookup would hash the name
// (7% of a minimal callback's host time, BenchmarkPhaseCall/request).
func callbackIndex(name string) int {
	switch name {
	case "on_request":
		return 0
	case "on_response_headers":
		return 1
	case "on_chunk":
		return 2
	case "on_end":
		return 3
	case "on_call_response":
		return 4
	}
	return -1
}

// callback is export name, one of callbackExports or any other export.
func (inst *instance) callback(name string) api.Function {
	if i := callbackIndex(name); i >= 0 {
		return inst.callbacks[i]
	}
	return inst.fns[name]
}

// monoNow is the monotonic clock in nanoseconds since clockBase, never 0:
// the deadline clock of callbacks. It reads only the monotonic clock,
// where time.Now also reads the wall clock (13% of a minimal callback's
// host time, BenchmarkPhaseCall/request), and is immune to wall clock
// steps.
func monoNow() int64 { return int64(time.Since(clockBase)) + 1 }

// close discards the instance.
func (inst *instance) close() {
	if inst.mod != nil {
		inst.mod.Close(context.Background())
	}
	inst.p.forget(inst)
	inst.p.stats.InstancesDiscarded.Add(1)
}

func (p *Plugin) forget(inst *instance) {
	p.mu.Lock()
	delete(p.live, inst)
	if !p.closed.Load() {
		if w := p.oldestWaiter(); w != nil {
			// The slot passes to the longest waiter, which creates an
			// instance in it rather than waiting for a busy one.
			p.mu.Unlock()
			w <- nil
			return
		}
	}
	p.count--
	p.mu.Unlock()
}

// explain turns a call error into what happened: deadline, memory, trap.
func (inst *instance) explain(err error) error {
	name := inst.p.spec.Name
	var ee *sys.ExitError
	switch {
	case inst.killed.Load():
		return fmt.Errorf("%w: %s: callback ran past its %s deadline and was stopped", ErrPluginFailed, name, inst.p.spec.Deadline)
	case strings.Contains(inst.stderr.String(), "out of memory"):
		return fmt.Errorf("%w: %s: out of memory (limit %d MiB)", ErrPluginFailed, name, inst.p.spec.MemoryBytes>>20)
	case errors.As(err, &ee):
		return fmt.Errorf("%w: %s: exited with code %d%s", ErrPluginFailed, name, ee.ExitCode(), inst.stderrTail())
	default:
		msg, _, _ := strings.Cut(err.Error(), "\n") // the first line; the wasm stack trace goes to the debug log
		return fmt.Errorf("%w: %s: trapped: %s%s", ErrPluginFailed, name, msg, inst.stderrTail())
	}
}

// stderrTail is the first line of what the guest wrote to stderr (a Go
// guest's panic message), for error messages.
func (inst *instance) stderrTail() string {
	s := strings.TrimSpace(inst.stderr.String())
	if s == "" {
		return ""
	}
	s, _, _ = strings.Cut(s, "\n")
	return " (guest: " + s + ")"
}

// get checks an instance out of the pool, creating one while under the cap
// and otherwise waiting up to PoolWait for one to come back.
//
// The pool is a stack: the instance put back last is taken first. Its code
// and memory are the likeliest to be in the CPU's caches, and under light
// load the others sit unused instead of taking turns (a queue would hand out
// the least recently used one, always the coldest).
func (p *Plugin) get() (*instance, error) {
	p.mu.Lock()
	if n := len(p.free); n > 0 {
		inst := p.free[n-1]
		p.free[n-1] = nil
		p.free = p.free[:n-1]
		p.mu.Unlock()
		return inst, nil
	}
	if p.count < p.spec.Instances {
		p.count++ // reserved here, so concurrent callers never exceed the cap
		p.mu.Unlock()
		return p.newInstance(context.Background())
	}
	// All instances busy: wait (back-pressure), first come first served. A
	// goroutine holding an instance may be descheduled by a busy host
	// between its Go steps, so the wait is bounded by PoolWait, not by the
	// callback deadline.
	w := make(chan *instance, 1)
	p.waiters = append(p.waiters, w)
	p.mu.Unlock()
	p.stats.PoolWaits.Add(1)
	t := time.NewTimer(p.spec.PoolWait)
	defer t.Stop()
	select {
	case inst := <-w:
		return p.handed(inst)
	case <-t.C:
	}
	p.mu.Lock()
	for i, x := range p.waiters {
		if x == w {
			p.waiters = slices.Delete(p.waiters, i, i+1)
			p.mu.Unlock()
			return nil, fmt.Errorf("%w: %s: no instance free within %s (all %d busy)", ErrPluginFailed, p.spec.Name, p.spec.PoolWait, p.spec.Instances)
		}
	}
	p.mu.Unlock()
	// Handed one just as the wait ran out: the send is on its way.
	return p.handed(<-w)
}

// handed is what a waiter was given: an instance, or nil for a slot freed
// by a discarded instance (already reserved for the waiter), to fill.
func (p *Plugin) handed(inst *instance) (*instance, error) {
	if inst != nil {
		return inst, nil
	}
	return p.newInstance(context.Background())
}

// put returns an instance to the pool, or to the longest waiter.
func (p *Plugin) put(inst *instance) {
	if p.closed.Load() {
		inst.close()
		return
	}
	p.mu.Lock()
	if w := p.oldestWaiter(); w != nil {
		p.mu.Unlock()
		w <- inst // buffered: never blocks
		return
	}
	p.free = append(p.free, inst)
	p.mu.Unlock()
}

// oldestWaiter takes the longest-waiting caller off the queue; nil when none
// waits. p.mu is held.
func (p *Plugin) oldestWaiter() chan *instance {
	if len(p.waiters) == 0 {
		return nil
	}
	w := p.waiters[0]
	p.waiters = slices.Delete(p.waiters, 0, 1)
	return w
}

// call runs export name on an instance with stack as params and results.
// A failed instance is discarded.
func (p *Plugin) call(r *Request, phase Phase, name string, stack []uint64) error {
	inst, err := p.get()
	if err != nil {
		return err
	}
	f := inst.callback(name)
	if f == nil {
		p.put(inst)
		return nil
	}
	p.stats.Calls.Add(1)
	inst.req, inst.phase = r, phase
	inst.started.Store(monoNow())
	if p.labels != nil {
		p.labels.set(name)
	}
	err = f.CallWithStack(inst.ctx, stack)
	if p.labels != nil {
		p.labels.clear()
	}
	inst.started.Store(0)
	inst.req, inst.phase = nil, 0
	if err == nil && inst.killed.Load() {
		if p.spec.Uninterruptible {
			inst.killed.Store(false) // it was only reported
		} else {
			// Stopped just as it returned: its context is canceled, so
			// the instance cannot serve another callback.
			inst.close()
			return nil
		}
	}
	if err != nil {
		err = inst.explain(err)
		if inst.killed.Load() {
			p.stats.Timeouts.Add(1)
		} else {
			p.stats.Traps.Add(1)
		}
		p.log.Warn("plugin callback failed; instance discarded", "phase", name, "err", err, "stderr", inst.stderr.String())
		inst.close()
		return err
	}
	p.put(inst)
	return nil
}

// pauseClock stops the current callback's deadline clock while the host
// works for it (a service call); the watchdog ignores the instance until
// resumeClock.
func (inst *instance) pauseClock() (started, at int64) {
	return inst.started.Swap(0), monoNow()
}

func (inst *instance) resumeClock(started, at int64) {
	if started == 0 {
		return
	}
	inst.started.Store(started + monoNow() - at)
}

// watchdog stops callbacks that run past the deadline. It scans the live
// instances a few times per deadline; the scan holds p.mu only to copy the
// set, and stopping happens outside it.
//
// The deadline is for a guest burning CPU, not for a host too busy to run
// it: a callback past its wall-clock deadline is stopped once its guest is
// seen making progress — runawayTicks ticks (interrupt.go) since the
// watchdog first saw it overdue — or unconditionally at ten times the
// deadline. Under CPU starvation a healthy callback is slow but hardly
// advances, and survives.
func (p *Plugin) watchdog() {
	tick := p.spec.Deadline / 4
	tick = min(max(tick, time.Millisecond), 50*time.Millisecond)
	t := time.NewTicker(tick)
	defer t.Stop()
	var overdue []*instance
	for {
		select {
		case <-p.stopDog:
			return
		case <-t.C:
		}
		now := monoNow()
		overdue = overdue[:0]
		p.mu.Lock()
		for inst := range p.live {
			if s := inst.started.Load(); s != 0 && now-s > int64(p.spec.Deadline) {
				overdue = append(overdue, inst)
			}
		}
		p.mu.Unlock()
		for _, inst := range overdue {
			if !p.runaway(inst, now) || inst.killed.Swap(true) {
				continue
			}
			if p.spec.Uninterruptible {
				p.stats.Overdue.Add(1)
				p.log.Error("callback past its deadline cannot be stopped (plugin is uninterruptible)", "deadline", p.spec.Deadline.String())
				continue
			}
			inst.interrupt()
		}
	}
}

// runawayTicks is how much progress past its deadline marks a callback as
// a runaway: 2^10 ticks of 256 loop iterations or calls each, a
// millisecond or so of CPU.
const runawayTicks = 1 << 10

// runaway decides whether an overdue callback is to be stopped.
func (p *Plugin) runaway(inst *instance, now int64) bool {
	started := inst.started.Load()
	if started == 0 {
		return false
	}
	if now-started > 10*int64(p.spec.Deadline) {
		return true
	}
	if inst.ticks == nil {
		return true // no progress counter: wall-clock deadline
	}
	ticks := uint32(inst.ticks.Get())
	if inst.overdueCall != started {
		inst.overdueCall, inst.overdueTicks = started, ticks
		return false
	}
	return ticks-inst.overdueTicks >= runawayTicks
}

// interrupt makes the instance's running callback trap at its next check.
// Safe from any goroutine: the guest's native code reads the global, and
// the instance is discarded after the trap, never reused.
func (inst *instance) interrupt() {
	if inst.stop != nil {
		inst.stop.Set(1)
	}
}

// tailBuffer keeps the first and the last max/2 bytes written to a guest's
// stderr: the head has a Go panic's message, the tail its last frames.
type tailBuffer struct {
	max  int
	head []byte
	tail bytes.Buffer
	cut  bool
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	n := len(p)
	half := t.max / 2
	if room := half - len(t.head); room > 0 {
		k := min(room, len(p))
		t.head = append(t.head, p[:k]...)
		p = p[k:]
	}
	if len(p) > half {
		p = p[len(p)-half:]
		t.cut = true
	}
	if t.tail.Len()+len(p) > half {
		rest := append([]byte(nil), t.tail.Bytes()[t.tail.Len()+len(p)-half:]...)
		t.tail.Reset()
		t.tail.Write(rest)
		t.cut = true
	}
	t.tail.Write(p)
	return n, nil
}

func (t *tailBuffer) String() string {
	if t.cut {
		return string(t.head) + " … " + t.tail.String()
	}
	return string(t.head) + t.tail.String()
}
