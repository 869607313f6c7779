package conformance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

// callbacks are the phase callbacks, by phase bit, with their signatures
// (ABI.md, "Guest exports").
var callbacks = []struct {
	bit    uint32
	name   string
	params int
}{
	{1, "on_request", 1},
	{2, "on_response_headers", 2},
	{4, "on_chunk", 3},
	{8, "on_end", 2},
}

// reservedExports are the names the host's deadline instrumentation adds
// (ABI.md, "Limits and sandbox").
var reservedExports = []string{"tollgate_stop", "tollgate_ticks"}

// exportsCheck compiles the module on a runtime of its own, without a
// cache (the cold compile time), checks its imports against the host's
// functions and WASI, its exports against the ABI, and instantiates it
// three times to read tollgate_abi_version and tollgate_phases after
// configuration, as the host does.
func (c *checker) exportsCheck() Result {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigCompiler().
		WithCloseOnContextDone(true).
		WithMemoryLimitPages(uint32((c.opts.MemoryBytes+65535)/65536)))
	defer rt.Close(context.Background())
	start := time.Now()
	mod, err := rt.CompileModule(ctx, c.module)
	c.report.ColdCompile = time.Since(start)
	if err != nil {
		return fail("exports", "not a WebAssembly module wazero accepts: %v", err)
	}
	var problems []string
	problems = append(problems, c.importProblems(ctx, rt, mod)...)
	problems = append(problems, exportProblems(mod)...)
	if len(problems) == 0 {
		// The instances' callbacks run without the host's deadline
		// checks: a module spinning in one is stopped by the runtime's
		// context.
		ictx, cancel := context.WithTimeout(ctx, max(5*time.Second, 20*c.opts.Deadline))
		defer cancel()
		problems = append(problems, c.instanceProblems(ictx, rt, mod)...)
	}
	if len(problems) > 0 {
		return Result{Name: "exports", Detail: strings.Join(problems, "; ")}
	}
	return pass("exports", "phases %s; %d tollgate imports", phaseNames(c.phases), c.tollgateImports)
}

func (c *checker) importProblems(ctx context.Context, rt wazero.Runtime, mod wazero.CompiledModule) []string {
	wasi, err := wasi_snapshot_preview1.NewBuilder(rt).Compile(ctx)
	if err != nil {
		return []string{"compiling WASI: " + err.Error()}
	}
	wasiFns := wasi.ExportedFunctions()
	var problems []string
	if len(mod.ImportedMemories()) > 0 {
		problems = append(problems, "the module imports a memory: define and export its own linear memory as \"memory\" (ABI.md, Guest exports)")
	}
	for _, def := range mod.ImportedFunctions() {
		module, name, _ := def.Import()
		var want api.FunctionDefinition
		switch module {
		case "tollgate":
			c.tollgateImports++
			want = c.hostFns[name]
			if want == nil {
				problems = append(problems, fmt.Sprintf("imports tollgate.%s, which this host does not define: import only the functions of ABI.md, Host imports", name))
				continue
			}
		case wasi_snapshot_preview1.ModuleName:
			want = wasiFns[name]
			if want == nil {
				problems = append(problems, fmt.Sprintf("imports %s.%s, which is not a WASI preview 1 function", module, name))
				continue
			}
		default:
			problems = append(problems, fmt.Sprintf("imports %s.%s: a plugin may import only from \"tollgate\" and %q (ABI.md, Host imports)", module, name, wasi_snapshot_preview1.ModuleName))
			continue
		}
		if got, exp := signature(def), signature(want); got != exp {
			problems = append(problems, fmt.Sprintf("imports %s.%s as %s, but the host defines %s (ABI.md, Host imports)", module, name, got, exp))
		}
	}
	return problems
}

func exportProblems(mod wazero.CompiledModule) []string {
	var problems []string
	if _, ok := mod.ExportedMemories()["memory"]; !ok {
		problems = append(problems, "no memory exported as \"memory\": the ABI passes every value through it (ABI.md, Guest exports)")
	}
	fns := mod.ExportedFunctions()
	want := map[string]string{
		"_initialize":          "() → ()",
		"tollgate_abi_version": "() → (i32)",
		"tollgate_phases":      "() → (i32)",
		"on_configure":         "(i32) → (i32)",
	}
	for _, cb := range callbacks {
		want[cb.name] = "(" + strings.TrimSuffix(strings.Repeat("i32,", cb.params), ",") + ") → (i32)"
	}
	want["on_call_response"] = "(i32,i32,i32,i32,i32,i32) → (i32)" // ABI.md, Dispatched calls
	for _, name := range []string{"_initialize", "tollgate_abi_version"} {
		if fns[name] == nil {
			problems = append(problems, fmt.Sprintf("no %s export (ABI.md, Guest exports%s)", name, map[bool]string{true: "; build Go plugins with -buildmode=c-shared, Rust ones with the SDK's export macro", false: ""}[name == "_initialize"]))
		}
	}
	names := make([]string, 0, len(want))
	for name := range want {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if def := fns[name]; def != nil && signature(def) != want[name] {
			problems = append(problems, fmt.Sprintf("%s is exported as %s; it must be %s (ABI.md, Guest exports)", name, signature(def), want[name]))
		}
	}
	for _, name := range reservedExports {
		if fns[name] != nil {
			problems = append(problems, fmt.Sprintf("exports the reserved name %s: rename it (ABI.md, Limits and sandbox)", name))
		}
	}
	return problems
}

// instanceProblems instantiates the module three times, configures each
// instance and reads its ABI version and phases.
func (c *checker) instanceProblems(ctx context.Context, rt wazero.Runtime, mod wazero.CompiledModule) []string {
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, rt); err != nil {
		return []string{"instantiating WASI: " + err.Error()}
	}
	stub := &stubHost{config: c.config}
	if err := stub.instantiate(ctx, rt, mod); err != nil {
		return []string{"defining the host functions: " + err.Error()}
	}
	exported := uint32(0)
	for _, cb := range callbacks {
		if mod.ExportedFunctions()[cb.name] != nil {
			exported |= cb.bit
		}
	}
	var phases []uint32
	for i := range 3 {
		p, problem := stub.run(ctx, rt, mod)
		if problem != "" {
			return []string{fmt.Sprintf("instance %d: %s", i+1, problem)}
		}
		phases = append(phases, p)
	}
	c.phases = exported
	if phases[0] == noPhases {
		return nil
	}
	var problems []string
	for i, p := range phases {
		if p != phases[0] {
			problems = append(problems, fmt.Sprintf("tollgate_phases returned %#x on instance 1 and %#x on instance %d: every instance must report the same set (ABI.md, Guest exports)", phases[0], p, i+1))
			break
		}
	}
	p := phases[0]
	if p&^15 != 0 {
		problems = append(problems, fmt.Sprintf("tollgate_phases returned %#x, with bits other than 1, 2, 4, 8 (ABI.md, Guest exports)", p))
	}
	for _, cb := range callbacks {
		if p&cb.bit != 0 && exported&cb.bit == 0 {
			problems = append(problems, fmt.Sprintf("tollgate_phases reports phase %s (%d) but the module does not export %s: export the callback or clear the bit (ABI.md, Guest exports)", cb.name[3:], cb.bit, cb.name))
		}
	}
	c.phases = exported & p
	return problems
}

// noPhases stands for a module without tollgate_phases.
const noPhases = ^uint32(0)

// stubHost defines the module's tollgate imports for instanceProblems:
// config, fail, log and metric_add behave as the host's do during
// on_configure; the others trap, as the host's do outside a callback.
type stubHost struct {
	config  []byte
	refused string
	inside  bool // in on_configure
}

var errOutside = errors.New("host function called outside on_configure")

func (s *stubHost) instantiate(ctx context.Context, rt wazero.Runtime, mod wazero.CompiledModule) error {
	b := rt.NewHostModuleBuilder("tollgate")
	for _, def := range mod.ImportedFunctions() {
		module, name, _ := def.Import()
		if module != "tollgate" {
			continue
		}
		fn := s.function(name)
		b.NewFunctionBuilder().WithGoModuleFunction(fn, def.ParamTypes(), def.ResultTypes()).Export(name)
	}
	_, err := b.Instantiate(ctx)
	return err
}

func (s *stubHost) function(name string) api.GoModuleFunc {
	return func(ctx context.Context, m api.Module, stack []uint64) {
		if !s.inside {
			panic(errOutside)
		}
		switch name {
		case "config":
			buf, n := uint32(stack[0]), uint32(stack[1])
			if uint64(len(s.config)) <= uint64(n) && !m.Memory().Write(buf, s.config) {
				panic(fmt.Errorf("config: buffer [%#x, +%d) outside memory", buf, n))
			}
			stack[0] = uint64(len(s.config))
		case "fail":
			b, ok := m.Memory().Read(uint32(stack[0]), uint32(stack[1]))
			if !ok {
				panic(errors.New("fail: range outside memory"))
			}
			s.refused = string(b)
		case "log", "metric_add":
			if len(stack) > 0 {
				stack[0] = 0
			}
		default:
			panic(fmt.Errorf("%s called from on_configure, where it is not available", name))
		}
	}
}

// run instantiates and configures one instance, and returns its phases
// (noPhases when it does not export tollgate_phases).
func (s *stubHost) run(ctx context.Context, rt wazero.Runtime, mod wazero.CompiledModule) (uint32, string) {
	inst, err := rt.InstantiateModule(ctx, mod, wazero.NewModuleConfig().WithName("").WithStartFunctions().
		WithSysWalltime().WithSysNanotime())
	if err != nil {
		return 0, "instantiating: " + err.Error()
	}
	defer inst.Close(context.Background())
	if f := inst.ExportedFunction("_initialize"); f != nil {
		if _, err := f.Call(ctx); err != nil {
			return 0, "_initialize trapped: " + firstLine(err)
		}
	}
	for _, name := range reservedExports {
		if inst.ExportedGlobal(name) != nil || inst.ExportedMemory(name) != nil {
			return 0, fmt.Sprintf("exports the reserved name %s: rename it (ABI.md, Limits and sandbox)", name)
		}
	}
	res, err := inst.ExportedFunction("tollgate_abi_version").Call(ctx)
	if err != nil {
		return 0, "tollgate_abi_version trapped: " + firstLine(err) + " (it may not call host functions; ABI.md, Conventions)"
	}
	if v := uint32(res[0]); v != 1 {
		return 0, fmt.Sprintf("tollgate_abi_version returned %d; this host implements version 1 (ABI.md)", v)
	}
	if f := inst.ExportedFunction("on_configure"); f != nil {
		s.inside = true
		res, err := f.Call(ctx, uint64(len(s.config)))
		s.inside = false
		if err != nil {
			return 0, "on_configure trapped: " + firstLine(err)
		}
		if res[0] != 0 {
			return 0, fmt.Sprintf("on_configure refused the config (%s); the configure check says more", s.refused)
		}
	}
	f := inst.ExportedFunction("tollgate_phases")
	if f == nil {
		return noPhases, ""
	}
	res, err = f.Call(ctx)
	if err != nil {
		return 0, "tollgate_phases trapped: " + firstLine(err) + " (it may not call host functions; ABI.md, Conventions)"
	}
	return uint32(res[0]), ""
}

func signature(def api.FunctionDefinition) string {
	types := func(ts []api.ValueType) string {
		s := make([]string, len(ts))
		for i, t := range ts {
			s[i] = api.ValueTypeName(t)
		}
		return "(" + strings.Join(s, ",") + ")"
	}
	return types(def.ParamTypes()) + " → " + types(def.ResultTypes())
}

func phaseNames(p uint32) string {
	var names []string
	for _, cb := range callbacks {
		if p&cb.bit != 0 {
			names = append(names, cb.name[3:])
		}
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(slices.Clip(names), ",")
}

func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}
