package conformance

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/tetratelabs/wazero/api"

	"github.com/tollgate/tollgate/sdk/wasmhost"
)

// Options tune Check. The zero value checks with config {} under the
// gateway's default limits.
type Options struct {
	// Config is the JSON handed to on_configure; nil means {}.
	Config []byte
	// Deadline bounds one callback (default: the gateway's, 250 ms).
	Deadline time.Duration
	// MemoryBytes caps an instance's linear memory (default: the
	// gateway's, 64 MiB).
	MemoryBytes int64
	// Quick runs a smaller battery: a word split in the middle only,
	// fewer requests for the memory and time measurements.
	Quick bool
	// CacheDir is the compilation cache of the loads that run the
	// battery ("" means the gateway's default). The cold compile time is
	// always measured without a cache.
	CacheDir string
}

// Result is one named check.
type Result struct {
	// Name is the check: exports, configure, phases.request,
	// phases.response_headers, phases.chunk, phases.end, state.instances,
	// state.interleaved, limits.memory, limits.growth, limits.deadline.
	Name string `json:"name"`
	// OK reports that the module passed. A check that could not run
	// (Skipped) is not OK and not a failure.
	OK      bool `json:"ok"`
	Skipped bool `json:"skipped,omitempty"`
	// Detail says what was seen; for a failure, what the module must do
	// instead, citing the section of sdk/ABI.md.
	Detail string `json:"detail"`
}

// Failed reports whether the check ran and the module failed it.
func (r Result) Failed() bool { return !r.OK && !r.Skipped }

func pass(name, format string, args ...any) Result {
	return Result{Name: name, OK: true, Detail: fmt.Sprintf(format, args...)}
}

func fail(name, format string, args ...any) Result {
	return Result{Name: name, Detail: fmt.Sprintf(format, args...)}
}

func skip(name, format string, args ...any) Result {
	return Result{Name: name, Skipped: true, Detail: fmt.Sprintf(format, args...)}
}

// Report is what Check found and measured.
type Report struct {
	Module       string   `json:"module"`
	Results      []Result `json:"results"`
	Measurements `json:"measurements"`
}

// Measurements describe the module's cost in the plugin runtime.
type Measurements struct {
	// ModuleBytes is the size of the .wasm file.
	ModuleBytes int `json:"module_bytes"`
	// ColdCompile is wazero's compile of the module with no cache.
	ColdCompile time.Duration `json:"cold_compile_ns"`
	// InstanceMemory is an instance's linear memory after configure, and
	// PeakMemory the largest seen while the battery ran, in bytes.
	InstanceMemory uint64 `json:"instance_memory_bytes"`
	PeakMemory     uint64 `json:"peak_memory_bytes"`
	// RequestCallback and ChunkCallback are the median time of one
	// request phase and one chunk phase callback on a warm instance, host
	// side included (zero when the module does not take the phase).
	RequestCallback time.Duration `json:"request_callback_ns"`
	ChunkCallback   time.Duration `json:"chunk_callback_ns"`
	// SlowestCallback is the longest callback of the battery.
	SlowestCallback time.Duration `json:"slowest_callback_ns"`
}

// OK reports whether no check failed.
func (r *Report) OK() bool {
	for _, res := range r.Results {
		if res.Failed() {
			return false
		}
	}
	return true
}

// Result returns the check named name.
func (r *Report) Result(name string) (Result, bool) {
	for _, res := range r.Results {
		if res.Name == name {
			return res, true
		}
	}
	return Result{}, false
}

// checker is the state of one Check.
type checker struct {
	opts    Options
	module  []byte
	config  []byte
	hostFns map[string]api.FunctionDefinition
	report  *Report
	closers []func()

	phases          uint32 // reported by the module's exports
	tollgateImports int

	words    []string
	baseline map[string]string // stream name → outcome on one instance
	overran  map[string]bool   // streams with a callback stopped at the deadline
	slowest  time.Duration
	// growthPeak is the peak memory of the growth check's instance.
	growthPeak uint64
}

// Check loads the module at wasmPath in the plugin runtime and runs every
// check against it. The error is for a module that cannot be read or a
// runtime that cannot start; what the module does wrong is in the Report.
func Check(wasmPath string, o Options) (*Report, error) {
	module, err := os.ReadFile(wasmPath)
	if err != nil {
		return nil, fmt.Errorf("reading plugin module: %w", err)
	}
	if o.Config == nil {
		o.Config = []byte("{}")
	}
	if o.Deadline == 0 {
		o.Deadline = wasmhost.DefaultDeadline
	}
	if o.MemoryBytes == 0 {
		o.MemoryBytes = wasmhost.DefaultMemoryBytes
	}
	c := &checker{opts: o, module: module, config: o.Config,
		report:   &Report{Module: wasmPath, Measurements: Measurements{ModuleBytes: len(module)}},
		words:    configWords(o.Config),
		baseline: map[string]string{}, overran: map[string]bool{}}
	defer func() {
		for _, f := range c.closers {
			f()
		}
	}()
	c.run()
	return c.report, nil
}

func (c *checker) run() {
	main, err := c.load(1, c.config)
	c.add(c.exportsCheck())
	c.add(c.configureCheck(main, err))
	if err != nil {
		for _, name := range []string{"phases", "state", "limits"} {
			c.add(skip(name, "the module did not load with the given config"))
		}
		return
	}
	c.report.InstanceMemory = main.rec.memory.Load()
	c.phasesChecks(main)
	c.stateChecks(main)
	c.limitsChecks(main)
	c.report.PeakMemory = max(main.rec.peak.Load(), c.growthPeak)
	c.report.SlowestCallback = c.slowest
}

func (c *checker) add(r Result) { c.report.Results = append(c.report.Results, r) }

// configureCheck: the config given is accepted, and one that is not JSON
// is refused with a reason or accepted, never a trap.
func (c *checker) configureCheck(main *loaded, err error) Result {
	if err != nil {
		if errors.Is(err, wasmhost.ErrPluginFailed) {
			return fail("configure", "on_configure failed with the given config: %v; it must return 0, or call fail(reason) and return non-zero (ABI.md, Guest exports)", err)
		}
		return fail("configure", "the module did not load with the given config: %v", err)
	}
	_, bad := c.load(1, []byte("this is not JSON {"))
	switch {
	case bad == nil:
		return pass("configure", "config accepted; a config that is not JSON is accepted too")
	case errors.Is(bad, wasmhost.ErrPluginFailed):
		return fail("configure", "a config that is not JSON made on_configure fail: %v; it must call fail(reason) and return non-zero, not trap (ABI.md, Host imports: fail)", bad)
	}
	msg := bad.Error()
	if strings.Contains(msg, "on_configure returned") { // wasmhost's words for a refusal without fail
		return fail("configure", "a config that is not JSON was refused without a reason (%v): call fail(reason) before returning non-zero (ABI.md, Host imports: fail)", bad)
	}
	return pass("configure", "config accepted; a config that is not JSON is refused: %s", trimLoadError(msg))
}
