// Package wasm hosts Tollgate's WebAssembly plugins with wazero: it compiles
// a plugin once, keeps a pool of instances that are checked out for one
// callback at a time, implements the host side of the ABI in sdk/ABI.md,
// enforces the sandbox and limits, and runs the plugins of a policy in
// order per phase (Pipeline).
package wasmhost

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

// FailMode is what happens to a request when its plugin fails (trap,
// deadline, memory limit).
type FailMode uint8

// Failure modes.
const (
	FailClosed FailMode = iota // the request fails with a clear error
	FailOpen                   // the failed callback counts as CONTINUE
)

// Spec describes one plugin to load.
type Spec struct {
	Name   string
	Module []byte // the .wasm binary
	Config []byte // JSON handed to on_configure; nil means {}
	// OnError is the failure mode.
	OnError FailMode
	// MemoryBytes caps each instance's linear memory (default 64 MiB).
	MemoryBytes int64
	// Deadline bounds one callback (default 250 ms).
	Deadline time.Duration
	// Instances caps the instance pool (default 2 × GOMAXPROCS, at least 2).
	Instances int
	// PoolWait bounds the wait for a free instance when all are busy
	// (default 10 s); past it the callback fails.
	PoolWait time.Duration
	// Uninterruptible loads the plugin without the deadline checks of
	// interrupt.go: a callback past its deadline cannot be stopped, only
	// logged and counted (Stats.Overdue), and a spinning guest can stall
	// the process at the next garbage collection. For measurements; see
	// docs/adr/0002.
	Uninterruptible bool
	// Slot is the plugin's index in its pipeline, used to key per-request
	// state. Set by NewPipeline.
	Slot int
	// Disabled leaves the plugin out of every request whose chain does
	// not switch it on (chain.go: a plan's or tenant's Override).
	Disabled bool
}

// Defaults for Spec fields left zero.
const (
	DefaultMemoryBytes = 64 << 20
	// DefaultDeadline: at 50 ms, about 1 in 50,000 preflight callbacks under
	// load ran past it with its thread on the CPU and was stopped (most
	// likely the guest's garbage collector, which runs inside whichever
	// callback triggers it; not yet confirmed by a guest-side trace). At
	// 250 ms: 0 of 286,000 (loadgen -c 8 -d 30s).
	DefaultDeadline = 250 * time.Millisecond
	DefaultPoolWait = 10 * time.Second
)

// Host compiles plugins. Compiled code is cached in a directory shared by
// all plugins and reloads, so a restart or a reload of an unchanged module
// skips compilation.
type Host struct {
	cache wazero.CompilationCache
	log   *slog.Logger
}

// NewHost returns a Host caching compiled code under cacheDir ("" means
// the user cache dir, or the temp dir when there is none).
func NewHost(cacheDir string, log *slog.Logger) (*Host, error) {
	if log == nil {
		log = slog.Default()
	}
	if cacheDir == "" {
		cacheDir = DefaultCacheDir()
	}
	if err := os.MkdirAll(cacheDir, 0o700); err != nil {
		return nil, fmt.Errorf("plugin compilation cache: %w", err)
	}
	cache, err := wazero.NewCompilationCacheWithDir(cacheDir)
	if err != nil {
		return nil, fmt.Errorf("plugin compilation cache %s: %w", cacheDir, err)
	}
	return &Host{cache: cache, log: log}, nil
}

// DefaultCacheDir is the compilation cache's directory when a policy names
// none: tollgate/wazero under the user cache dir ($XDG_CACHE_HOME, else
// ~/.cache), or under the temp dir when there is none. wazero keeps one
// subdirectory per wazero version, OS and architecture in it, and keys each
// entry on the module's SHA-256 and the CPU features its compiler uses.
func DefaultCacheDir() string {
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	return filepath.Join(base, "tollgate", "wazero")
}

// Close releases the compilation cache's in-memory state.
func (h *Host) Close() error { return h.cache.Close(context.Background()) }

// Plugin is one compiled plugin and its instance pool.
type Plugin struct {
	spec   Spec
	log    *slog.Logger
	rt     wazero.Runtime
	mod    wazero.CompiledModule
	phases Phase
	stats  *Stats
	// callResponse: the module exports on_call_response, so it may
	// answer PAUSE (suspend.go).
	callResponse bool

	mu      sync.Mutex       // guards free, waiters, live and count; never held across I/O or guest calls
	free    []*instance      // idle instances, a stack (see get)
	waiters []chan *instance // callers waiting for an instance, oldest first
	live    map[*instance]struct{}
	count   int // instances alive or being created (at most spec.Instances)
	closed  atomic.Bool
	stopDog chan struct{}

	metricNames sync.Map // validated metric names

	labels callbackLabels // profiler labels of its callbacks (labels.go); nil: none
}

// Stats counts a plugin's runtime events. Fields are updated atomically.
type Stats struct {
	Calls, Traps, Timeouts, PoolWaits, InstancesCreated, InstancesDiscarded atomic.Int64
	// Overdue counts callbacks of an uninterruptible plugin that ran past
	// their deadline.
	Overdue atomic.Int64
	// Events counts the guest's metric_add names.
	Events sync.Map // name → *atomic.Int64
}

// ErrPluginFailed wraps every failure of a guest callback.
var ErrPluginFailed = errors.New("plugin failed")

// Load compiles spec.Module, checks its ABI version, and creates its first
// instances (each configured with spec.Config). The plugin's runtime gets
// its own memory cap; nothing of the host is granted to it but the
// `tollgate` imports and a WASI with no files, no environment and no
// network.
func (h *Host) Load(ctx context.Context, spec Spec) (*Plugin, error) {
	if spec.MemoryBytes == 0 {
		spec.MemoryBytes = DefaultMemoryBytes
	}
	if spec.Deadline == 0 {
		spec.Deadline = DefaultDeadline
	}
	if spec.Instances == 0 {
		spec.Instances = max(2, 2*runtimeProcs())
	}
	if spec.PoolWait == 0 {
		spec.PoolWait = DefaultPoolWait
	}
	if spec.Config == nil {
		spec.Config = []byte("{}")
	}
	pages := uint32((spec.MemoryBytes + 65535) / 65536)
	// No WithCloseOnContextDone: a runaway guest is stopped by the checks
	// instrument adds (interrupt.go, docs/adr/0002), which cost no watch
	// goroutine per call.
	cfg := wazero.NewRuntimeConfigCompiler().
		WithCompilationCache(h.cache).
		WithMemoryLimitPages(pages)
	rt := wazero.NewRuntimeWithConfig(ctx, cfg)
	p := &Plugin{spec: spec, log: h.log.With("plugin", spec.Name), rt: rt, stats: &Stats{},
		live: make(map[*instance]struct{}), stopDog: make(chan struct{}), labels: newCallbackLabels(spec.Name)}
	if err := p.load(ctx); err != nil {
		rt.Close(ctx)
		return nil, fmt.Errorf("plugin %q: %w", spec.Name, err)
	}
	go p.watchdog()
	return p, nil
}

func (p *Plugin) load(ctx context.Context) error {
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, p.rt); err != nil {
		return fmt.Errorf("instantiating WASI: %w", err)
	}
	if err := p.instantiateHostModule(ctx); err != nil {
		return fmt.Errorf("instantiating host functions: %w", err)
	}
	bin, ierr := p.spec.Module, error(nil)
	if !p.spec.Uninterruptible {
		// On failure the original is compiled for a better diagnosis (not
		// wasm, not a plugin) before the instrumentation's error.
		if inst, err := instrumentShared(bin); err == nil {
			bin = inst
		} else {
			ierr = err
		}
	}
	mod, err := p.rt.CompileModule(ctx, bin)
	if err != nil {
		return fmt.Errorf("compiling: %w", err)
	}
	p.mod = mod
	exports := mod.ExportedFunctions()
	_, p.callResponse = exports["on_call_response"]
	if _, ok := exports["tollgate_abi_version"]; !ok {
		return errors.New("not a Tollgate plugin: it does not export tollgate_abi_version (see sdk/ABI.md)")
	}
	if _, ok := exports["_initialize"]; !ok {
		return errors.New("the module has no _initialize export: build Go plugins with -buildmode=c-shared (a reactor), not as a command")
	}
	if ierr != nil {
		return ierr
	}
	p.mu.Lock()
	p.count++
	p.mu.Unlock()
	inst, err := p.newInstance(ctx)
	if err != nil {
		return err
	}
	// The ABI version and phases are read from the first instance.
	stack := []uint64{0}
	if err := inst.fn("tollgate_abi_version").CallWithStack(ctx, stack); err != nil {
		inst.close()
		return fmt.Errorf("calling tollgate_abi_version: %w", err)
	}
	if v := uint32(stack[0]); v != ABIVersion {
		inst.close()
		return fmt.Errorf("plugin ABI version %d, but this gateway implements version %d: rebuild the plugin against a matching SDK", v, ABIVersion)
	}
	for _, e := range phaseExports {
		if inst.mod.ExportedFunction(e.Export) != nil {
			p.phases |= e.Phase
		}
	}
	if f := inst.mod.ExportedFunction("tollgate_phases"); f != nil {
		if err := f.CallWithStack(ctx, stack); err != nil {
			inst.close()
			return fmt.Errorf("calling tollgate_phases: %w", err)
		}
		p.phases &= Phase(stack[0])
	}
	if p.phases == 0 {
		p.log.Warn("plugin takes part in no phase; with the Go SDK, register handlers in init(), not main()")
	}
	p.put(inst)
	return nil
}

// Name is the plugin's name from the policy.
func (p *Plugin) Name() string { return p.spec.Name }

// Phases reports the phases the plugin takes part in.
func (p *Plugin) Phases() Phase { return p.phases }

// FailMode is the plugin's failure mode.
func (p *Plugin) FailMode() FailMode { return p.spec.OnError }

// Stats returns the plugin's counters.
func (p *Plugin) Stats() *Stats { return p.stats }

// Close stops the watchdog and closes the plugin's runtime, which closes
// every instance. Calls in flight fail; call Close once nothing uses the
// plugin.
func (p *Plugin) Close() error {
	if p.closed.Swap(true) {
		return nil
	}
	close(p.stopDog)
	return p.rt.Close(context.Background())
}
