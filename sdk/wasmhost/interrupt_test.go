package wasmhost

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// Hand-assembled modules: just enough of the binary format to cover the
// shapes instrument must handle.

func leb(v uint32) []byte { return appendU32(nil, v) }

func vec(items ...[]byte) []byte {
	out := leb(uint32(len(items)))
	for _, it := range items {
		out = append(out, it...)
	}
	return out
}

func str(s string) []byte { return append(leb(uint32(len(s))), s...) }

func sec(id byte, body []byte) []byte { return appendSection(nil, id, body) }

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// memory is a memory section with one page.
var memory = sec(5, vec([]byte{0x00, 0x01}))

// body is a function body with no locals.
func body(code ...byte) []byte {
	b := append([]byte{0x00}, code...)
	return append(leb(uint32(len(b))), b...)
}

// spinModule exports "spin", an endless loop, and "ret", returning its
// i32 parameter; with imports, it also imports a global and a function so
// indices start past them.
func spinModule(imports bool) []byte {
	types := sec(1, vec(
		[]byte{0x60, 0x00, 0x00},             // () -> ()
		[]byte{0x60, 0x01, 0x7f, 0x01, 0x7f}, // (i32) -> i32
	))
	var imps []byte
	funcBase := uint32(0)
	if imports {
		imps = sec(2, vec(
			cat(str("envg"), str("g"), []byte{0x03, 0x7f, 0x00}),
			cat(str("env"), str("f"), []byte{0x00, 0x00}),
		))
		funcBase = 1
	}
	funcs := sec(3, vec([]byte{0x00}, []byte{0x01}))
	exports := sec(7, vec(
		cat(str("spin"), []byte{0x00}, leb(funcBase)),
		cat(str("ret"), []byte{0x00}, leb(funcBase+1)),
	))
	code := sec(10, vec(
		// loop (type: empty) br 0 end end
		body(0x03, 0x40, 0x0c, 0x00, 0x0b, 0x0b),
		// block i32 (local.get 0) end end
		body(0x02, 0x7f, 0x20, 0x00, 0x0b, 0x0b),
	))
	return cat(wasmHeader, types, imps, funcs, memory, exports, code)
}

func hostEnv(t *testing.T, ctx context.Context, rt wazero.Runtime) {
	t.Helper()
	_, err := rt.NewHostModuleBuilder("env").
		NewFunctionBuilder().WithFunc(func() {}).Export("f").
		Instantiate(ctx)
	if err != nil {
		t.Fatal(err)
	}
}

func TestInstrumentStopsALoop(t *testing.T) {
	for _, imports := range []bool{false, true} {
		name := "no-imports"
		if imports {
			name = "imports"
		}
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			rt := wazero.NewRuntime(ctx)
			defer rt.Close(ctx)
			src := spinModule(imports)
			if imports {
				// An imported global can only come from a module that
				// exports one; wazero's host builder has no globals, so
				// the import is satisfied by a tiny module.
				g := cat(wasmHeader, sec(6, vec([]byte{0x7f, 0x00, 0x41, 0x07, 0x0b})), sec(7, vec(cat(str("g"), []byte{0x03, 0x00}))))
				gm, err := rt.CompileModule(ctx, g)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := rt.InstantiateModule(ctx, gm, wazero.NewModuleConfig().WithName("envg")); err != nil {
					t.Fatal(err)
				}
				hostEnv(t, ctx, rt)
			}
			out, err := instrument(src)
			if err != nil {
				t.Fatal(err)
			}
			cm, err := rt.CompileModule(ctx, out)
			if err != nil {
				t.Fatalf("instrumented module does not compile: %v", err)
			}
			mod, err := rt.InstantiateModule(ctx, cm, wazero.NewModuleConfig().WithName("m"))
			if err != nil {
				t.Fatal(err)
			}
			stop, ok := mod.ExportedGlobal(stopExport).(api.MutableGlobal)
			if !ok {
				t.Fatal("no mutable stop global exported")
			}
			// The other function is unchanged in behaviour.
			res, err := mod.ExportedFunction("ret").Call(ctx, 42)
			if err != nil || res[0] != 42 {
				t.Fatalf("ret(42) = %v, %v", res, err)
			}
			done := make(chan error, 1)
			go func() {
				_, err := mod.ExportedFunction("spin").Call(ctx)
				done <- err
			}()
			select {
			case err := <-done:
				t.Fatalf("spin returned before being stopped: %v", err)
			case <-time.After(50 * time.Millisecond):
			}
			stop.Set(1)
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), "unreachable") {
					t.Fatalf("spin ended with %v, want an unreachable trap", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("spin did not stop within 5s of the stop global being set")
			}
		})
	}
}

func TestInstrumentStopsRecursion(t *testing.T) {
	// f calls itself twice: no loop anywhere, exponential time. The check
	// at function entry stops it.
	out, err := instrument(recursionModule(nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	assertRecursionStops(t, out)
}

// recursionModule exports f, which calls itself twice while a depth
// counter in a global is under 40: the stack stays at 40 frames, the call
// tree has 2^40 leaves. prefix and suffix wrap the body's code.
func recursionModule(prefix, suffix []byte) []byte {
	types := sec(1, vec([]byte{0x60, 0x00, 0x00}))
	funcs := sec(3, vec([]byte{0x00}))
	exports := sec(7, vec(cat(str("f"), []byte{0x00, 0x00})))
	globals := sec(6, vec([]byte{0x7f, 0x01, 0x41, 0x00, 0x0b}))
	// global.get 0; i32.const 40; i32.lt_s; if; global.get 0; i32.const 1;
	// i32.add; global.set 0; call 0; call 0; global.get 0; i32.const 1;
	// i32.sub; global.set 0; end
	recurse := []byte{
		0x23, 0x00, 0x41, 40, 0x48, 0x04, 0x40,
		0x23, 0x00, 0x41, 0x01, 0x6a, 0x24, 0x00,
		0x10, 0x00, 0x10, 0x00,
		0x23, 0x00, 0x41, 0x01, 0x6b, 0x24, 0x00,
		0x0b}
	code := sec(10, vec(body(cat(prefix, recurse, suffix, []byte{0x0b})...)))
	return cat(wasmHeader, types, funcs, memory, globals, exports, code)
}

// assertRecursionStops calls f of the instrumented recursionModule out,
// sets the stop global, and wants the call to trap soon after.
func assertRecursionStops(t *testing.T, out []byte) {
	t.Helper()
	ctx := context.Background()
	rt := wazero.NewRuntime(ctx)
	defer rt.Close(ctx)
	mod, err := rt.Instantiate(ctx, out)
	if err != nil {
		t.Fatal(err)
	}
	stop := mod.ExportedGlobal(stopExport).(api.MutableGlobal)
	done := make(chan error, 1)
	go func() {
		_, err := mod.ExportedFunction("f").Call(ctx)
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	stop.Set(1)
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("2^40 calls finished: the recursion was not stopped")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("recursion did not stop within 5s of the stop global being set")
	}
}

func TestInstrumentRefusesReservedExport(t *testing.T) {
	src := cat(wasmHeader, memory,
		sec(6, vec([]byte{0x7f, 0x01, 0x41, 0x00, 0x0b})),
		sec(7, vec(cat(str(stopExport), []byte{0x03, 0x00}))))
	if _, err := instrument(src); err == nil || !errors.Is(err, errInstrument) {
		t.Fatalf("instrument = %v, want a reserved-name error", err)
	}
}

func TestInstrumentRejectsGarbage(t *testing.T) {
	for _, src := range [][]byte{
		nil,
		wasmHeader, // no memory
		[]byte("not wasm"),
		cat(wasmHeader, []byte{10, 5, 1, 3, 0}), // body ends early
		cat(wasmHeader, []byte{10, 4, 1, 2, 0, 0xff}),    // unknown opcode
		cat(wasmHeader, []byte{10, 0xff, 0xff, 0xff}),    // section past the end
		cat(wasmHeader, []byte{10, 5, 1, 3, 0, 0x0b, 0}), // trailing byte in body size
	} {
		if _, err := instrument(src); err == nil {
			t.Errorf("instrument(%x) succeeded", src)
		}
	}
}

func TestInstrumentTestPlugin(t *testing.T) {
	src := testPlugin(t)
	out, err := instrument(src)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// The hosts' compilation cache: the pipeline tests load these same
	// bytes, and one compile serves both.
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCompilationCache(testHost(t).cache))
	defer rt.Close(ctx)
	if _, err := rt.CompileModule(ctx, out); err != nil {
		t.Fatalf("instrumented Go plugin does not compile: %v", err)
	}
	t.Logf("module %d bytes, instrumented %d (+%.1f%%)", len(src), len(out), 100*float64(len(out)-len(src))/float64(len(src)))
}

// hugeVectorCount reports whether any byte sequence of src decodes as an
// unsigned LEB128 of 3 to 5 bytes whose value is over 1<<24: a count no
// module of fuzzing size can honour. It is deliberately broad (it also
// matches some large i32.const immediates); the fuzz target only skips the
// oracle for such inputs, never instrument itself.
func hugeVectorCount(src []byte) bool {
	for i := range src {
		var v uint64
		for n := 0; n < 5 && i+n < len(src); n++ {
			b := src[i+n]
			v |= uint64(b&0x7f) << (7 * n)
			if b&0x80 == 0 {
				if n >= 2 && v > 1<<24 {
					return true
				}
				break
			}
		}
	}
	return false
}

// FuzzInstrument: instrument never panics, and whatever wazero accepts
// before instrumentation it accepts after.
func FuzzInstrument(f *testing.F) {
	f.Add(spinModule(false))
	f.Add(spinModule(true))
	f.Add(cat(wasmHeader, memory, sec(6, vec([]byte{0x7f, 0x01, 0x41, 0x00, 0x0b}))))
	f.Add(cat(wasmHeader, memory))
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	f.Cleanup(func() { rt.Close(ctx) })
	f.Fuzz(func(t *testing.T, src []byte) {
		out, err := instrument(src)
		if err != nil {
			return
		}
		if hugeVectorCount(src) {
			// wazero's decoder allocates a vector by its declared count
			// before reading its elements: one 27-byte input declaring
			// 536M results took 4.2 GB and 9 s in CompileModule, and
			// under load the fuzz workers were killed. Such a module is
			// invalid anyway (its vector needs more bytes than it has).
			return
		}
		before, err := rt.CompileModule(ctx, src)
		if err != nil {
			return
		}
		before.Close(ctx)
		after, err := rt.CompileModule(ctx, out)
		if err != nil {
			t.Fatalf("valid module no longer valid after instrumentation: %v", err)
		}
		after.Close(ctx)
	})
}

func TestReachesLoop(t *testing.T) {
	for _, c := range []struct {
		name string
		code []byte
		want bool
	}{
		{"loop first", []byte{0x03, 0x40, 0x0b, 0x0b}, true},
		// Go's shape: global.get 0; local.set 0; block; loop
		{"straight line, a block, then the loop", []byte{0x23, 0x00, 0x21, 0x00, 0x02, 0x40, 0x03, 0x40, 0x0b, 0x0b, 0x0b}, true},
		{"a call first", []byte{0x10, 0x00, 0x03, 0x40, 0x0b, 0x0b}, false},
		{"a branch first", []byte{0x02, 0x40, 0x0c, 0x00, 0x03, 0x40, 0x0b, 0x0b, 0x0b}, false},
		{"a return first", []byte{0x0f, 0x03, 0x40, 0x0b, 0x0b}, false},
		{"an if first", []byte{0x41, 0x01, 0x04, 0x40, 0x0b, 0x03, 0x40, 0x0b, 0x0b}, false},
		{"no loop", []byte{0x41, 0x01, 0x1a, 0x0b}, false},
		{"truncated", []byte{0x41}, false},
		{"empty", nil, false},
	} {
		if got := reachesLoop(c.code); got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
}

// A function in Go's shape (it opens with its loop) that recurses from
// inside the loop, never repeating it: its only check is the loop's, and
// the recursion still stops.
func TestInstrumentStopsRecursionThroughALoop(t *testing.T) {
	// block; loop; (the recursion); end; end
	src := recursionModule([]byte{0x02, 0x40, 0x03, 0x40}, []byte{0x0b, 0x0b})
	out, err := instrument(src)
	if err != nil {
		t.Fatal(err)
	}
	if want := len(src) + len(appendCheck(nil, 1, 2, 3)); len(out) < want || len(out) > want+64 {
		t.Fatalf("instrumented module is %d bytes, want one check (%d + globals and exports)", len(out), want)
	}
	assertRecursionStops(t, out)
}
