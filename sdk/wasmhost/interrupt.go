package wasmhost

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
)

// Stopping a runaway callback (docs/adr/0002).
//
// Before a plugin is compiled, instrument adds three mutable i32 globals to
// the module — $stop and $ticks, exported as stopExport and ticksExport, and
// $fuel — and puts a check at the entry of every function and the top of
// every loop body:
//
//	global.get $fuel  i32.const 1  i32.sub  global.set $fuel
//	global.get $fuel  i32.eqz
//	if
//	  i32.const fuelPerCheck  global.set $fuel
//	  global.get $ticks  i32.const 1  i32.add  global.set $ticks
//	  i32.const 0  memory.grow  drop          ;; a call into Go
//	  global.get $stop
//	  if  unreachable  end
//	end
//
// Every unbounded computation in Wasm repeats a loop or a call, so a guest
// that runs on reaches the slow path every fuelPerCheck checks. There, the
// no-op memory.grow is a call from the guest's native code into wazero's Go
// code: a point where the Go scheduler can preempt the goroutine, so a
// spinning guest never holds up a garbage collection's stop-the-world (or
// the watchdog). Then $stop: the watchdog stops a callback by setting it to
// 1 from its own goroutine, and the guest traps on the calling goroutine,
// which discards the instance. $ticks counts the slow paths taken: the
// watchdog reads it to tell a guest that is computing (ticks advance) from
// one that is merely starved of CPU by a busy host (they do not), with no
// per-call cost such as reading the thread's CPU clock.
//
// This replaces wazero's WithCloseOnContextDone, which starts a watch
// goroutine per call (at low load, waking the idle core for it cost about
// 20 µs of latency a callback) and calls into Go at every loop iteration.
//
// The rewrite adds the globals after every existing global (imported ones
// come first in the index space, defined ones after) and appends the
// export, so no existing index changes; only code bodies grow. Branch
// depths are unaffected because the inserted if…end is closed before the
// original code resumes, and the check leaves the operand stack as it
// found it, so loops with parameters stay valid.

// fuelPerCheck is how many function entries and loop iterations pass
// between the guest's calls into Go.
const fuelPerCheck = 256

// The names of the globals the instrumentation exports.
const (
	stopExport  = "tollgate_stop"
	ticksExport = "tollgate_ticks"
)

// errInstrument wraps every instrumentation failure.
var errInstrument = errors.New("preparing the module for deadline checks")

// Section ids (WebAssembly core spec 5.5.2; tag from exception handling).
const (
	secCustom = 0
	secImport = 2
	secMemory = 5
	secGlobal = 6
	secExport = 7
	secCode   = 10
)

// sectionOrder is each known section's place in a module: custom sections
// may come anywhere, the others in this order.
var sectionOrder = [14]int{1: 1, 2: 2, 3: 3, 4: 4, 5: 5, 13: 6, 6: 7, 7: 8, 8: 9, 9: 10, 12: 11, 10: 12, 11: 13}

var wasmHeader = []byte{0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00}

// instrument returns a copy of module with the stop checks added. It
// decodes only what it must (imports, the global and export counts, and
// every instruction of every code body, to find loops); anything it does
// not recognize is an error rather than a guess. The result is validated
// by wazero when compiled.
func instrument(module []byte) ([]byte, error) {
	if !bytes.HasPrefix(module, wasmHeader) {
		return nil, fmt.Errorf("%w: not a WebAssembly binary module (version 1)", errInstrument)
	}
	type section struct {
		id   byte
		body []byte
	}
	var secs []section
	r := reader{b: module, off: len(wasmHeader)}
	var importGlobals, definedGlobals uint32
	var hasMemory bool
	for r.off < len(r.b) && r.err == nil {
		id := r.byte()
		n := r.u32()
		body := r.take(int(n))
		if r.err != nil {
			break
		}
		if int(id) >= len(sectionOrder) || (id != secCustom && sectionOrder[id] == 0) {
			return nil, fmt.Errorf("%w: unknown section id %d", errInstrument, id)
		}
		switch id {
		case secImport:
			g, mem, err := readImports(body)
			if err != nil {
				return nil, err
			}
			importGlobals, hasMemory = g, hasMemory || mem
		case secMemory:
			hasMemory = true
		case secGlobal:
			sr := reader{b: body}
			definedGlobals = sr.u32()
			if sr.err != nil {
				return nil, fmt.Errorf("%w: global section: %v", errInstrument, sr.err)
			}
		case secExport:
			if err := checkExportFree(body); err != nil {
				return nil, err
			}
		case secCustom:
			sr := reader{b: body}
			name := sr.name()
			if strings.HasPrefix(name, ".debug_") {
				// DWARF refers to code offsets, which the rewrite moves.
				continue
			}
		}
		secs = append(secs, section{id, body})
	}
	if r.err != nil {
		return nil, fmt.Errorf("%w: %v", errInstrument, r.err)
	}
	if !hasMemory {
		return nil, fmt.Errorf("%w: the module has no linear memory (the plugin ABI needs one)", errInstrument)
	}
	if uint64(importGlobals)+uint64(definedGlobals) >= 1<<32-3 {
		return nil, fmt.Errorf("%w: too many globals", errInstrument)
	}
	stop := importGlobals + definedGlobals // then $fuel, $ticks
	check := appendCheck(nil, stop, stop+1, stop+2)

	out := make([]byte, 0, len(module)+len(module)/8+64)
	out = append(out, wasmHeader...)
	var haveGlobal, haveExport bool
	// addMissing adds the global and export sections when the module has
	// none, just before the first section that must follow them.
	addMissing := func(before int) {
		if !haveGlobal && before > sectionOrder[secGlobal] {
			out = appendSection(out, secGlobal, appendGlobals(appendU32(nil, 3)))
			haveGlobal = true
		}
		if !haveExport && before > sectionOrder[secExport] {
			out = appendSection(out, secExport, appendExports(appendU32(nil, 2), stop))
			haveExport = true
		}
	}
	for _, s := range secs {
		if s.id != secCustom {
			addMissing(sectionOrder[s.id])
		}
		switch s.id {
		case secGlobal:
			sr := reader{b: s.body}
			n := sr.u32()
			out = appendSection(out, secGlobal, appendGlobals(append(appendU32(nil, n+3), s.body[sr.off:]...)))
			haveGlobal = true
		case secExport:
			sr := reader{b: s.body}
			n := sr.u32()
			out = appendSection(out, secExport, appendExports(append(appendU32(nil, n+2), s.body[sr.off:]...), stop))
			haveExport = true
		case secCode:
			code, err := instrumentCode(s.body, check)
			if err != nil {
				return nil, err
			}
			out = appendSection(out, secCode, code)
		default:
			out = appendSection(out, s.id, s.body)
		}
	}
	addMissing(len(sectionOrder) + 1)
	return out, nil
}

func appendCheck(dst []byte, stop, fuel, ticks uint32) []byte {
	dst = append(dst, 0x23) // global.get $fuel
	dst = appendU32(dst, fuel)
	dst = append(dst, 0x41, 0x01, 0x6b, 0x24) // i32.const 1, i32.sub, global.set $fuel
	dst = appendU32(dst, fuel)
	dst = append(dst, 0x23) // global.get $fuel
	dst = appendU32(dst, fuel)
	dst = append(dst, 0x45, 0x04, 0x40, 0x41) // i32.eqz, if, i32.const fuelPerCheck
	dst = appendS32(dst, fuelPerCheck)
	dst = append(dst, 0x24) // global.set $fuel
	dst = appendU32(dst, fuel)
	dst = append(dst, 0x23) // global.get $ticks
	dst = appendU32(dst, ticks)
	dst = append(dst, 0x41, 0x01, 0x6a, 0x24) // i32.const 1, i32.add, global.set $ticks
	dst = appendU32(dst, ticks)
	dst = append(dst, 0x41, 0x00, 0x40, 0x00, 0x1a, 0x23) // i32.const 0, memory.grow 0, drop, global.get $stop
	dst = appendU32(dst, stop)
	return append(dst, 0x04, 0x40, 0x00, 0x0b, 0x0b) // if, unreachable, end, end
}

// appendGlobals appends the entries of $stop (0), $fuel (fuelPerCheck) and
// $ticks (0): mutable i32s.
func appendGlobals(dst []byte) []byte {
	dst = append(dst, 0x7f, 0x01, 0x41, 0x00, 0x0b, 0x7f, 0x01, 0x41)
	dst = appendS32(dst, fuelPerCheck)
	return append(dst, 0x0b, 0x7f, 0x01, 0x41, 0x00, 0x0b)
}

// appendExports appends the exports of $stop and $ticks.
func appendExports(dst []byte, stop uint32) []byte {
	for i, name := range []string{stopExport, ticksExport} {
		dst = appendU32(dst, uint32(len(name)))
		dst = append(dst, name...)
		dst = append(dst, 0x03) // global
		dst = appendU32(dst, stop+2*uint32(i))
	}
	return dst
}

// appendS32 appends a signed LEB128.
func appendS32(dst []byte, v int32) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(dst, c)
		}
		dst = append(dst, c|0x80)
	}
}

func appendSection(dst []byte, id byte, body []byte) []byte {
	dst = append(dst, id)
	dst = appendU32(dst, uint32(len(body)))
	return append(dst, body...)
}

func appendU32(dst []byte, v uint32) []byte {
	for v >= 0x80 {
		dst = append(dst, byte(v)|0x80)
		v >>= 7
	}
	return append(dst, byte(v))
}

// readImports counts the imported globals and reports whether a memory is
// imported.
func readImports(body []byte) (globals uint32, memory bool, err error) {
	r := reader{b: body}
	n := r.u32()
	for i := uint32(0); i < n && r.err == nil; i++ {
		r.name() // module
		r.name() // field
		switch kind := r.byte(); kind {
		case 0x00: // function: type index
			r.u32()
		case 0x01: // table: reference type, limits
			r.refType()
			r.limits()
		case 0x02: // memory: limits
			r.limits()
			memory = true
		case 0x03: // global: value type, mutability
			r.valType()
			r.byte()
			globals++
		case 0x04: // tag: attribute, type index
			r.byte()
			r.u32()
		default:
			r.fail("unknown import kind 0x%02x", kind)
		}
	}
	if r.err != nil {
		return 0, false, fmt.Errorf("%w: import section: %v", errInstrument, r.err)
	}
	return globals, memory, nil
}

func checkExportFree(body []byte) error {
	r := reader{b: body}
	n := r.u32()
	for i := uint32(0); i < n && r.err == nil; i++ {
		if name := r.name(); name == stopExport || name == ticksExport {
			return fmt.Errorf("%w: the module already exports %q, a name the gateway reserves", errInstrument, name)
		}
		r.byte()
		r.u32()
	}
	if r.err != nil {
		return fmt.Errorf("%w: export section: %v", errInstrument, r.err)
	}
	return nil
}

// instrumentCode rewrites the code section: each body gets the check after
// its locals and after the block type of each loop.
func instrumentCode(sec []byte, check []byte) ([]byte, error) {
	r := reader{b: sec}
	n := r.u32()
	out := appendU32(make([]byte, 0, len(sec)+len(sec)/8), n)
	var marks []int
	for i := uint32(0); i < n && r.err == nil; i++ {
		size := r.u32()
		fn := r.take(int(size))
		if r.err != nil {
			break
		}
		fr := reader{b: fn}
		// Locals: a vector of (count, value type).
		locals := fr.u32()
		for j := uint32(0); j < locals && fr.err == nil; j++ {
			fr.u32()
			fr.valType()
		}
		marks = marks[:0]
		if !reachesLoop(fn[fr.off:]) {
			// The entry check. A body that surely enters a loop first has
			// it there: Go's wasm functions with calls open with their
			// resume loop (seven in ten functions of the built-in
			// plugins), which then take one check per call, not two.
			marks = append(marks, fr.off)
		}
		if err := scanLoops(&fr, &marks); err != nil {
			return nil, fmt.Errorf("%w: function body %d: %v", errInstrument, i, err)
		}
		grown := len(fn) + len(marks)*len(check)
		out = appendU32(out, uint32(grown))
		prev := 0
		for _, m := range marks {
			out = append(out, fn[prev:m]...)
			out = append(out, check...)
			prev = m
		}
		out = append(out, fn[prev:]...)
	}
	if r.err != nil {
		return nil, fmt.Errorf("%w: code section: %v", errInstrument, r.err)
	}
	if r.off != len(sec) {
		return nil, fmt.Errorf("%w: code section: %d trailing bytes", errInstrument, len(sec)-r.off)
	}
	return out, nil
}

// reachesLoop reports whether code, a function body after its locals,
// surely enters a loop before it can call, branch or return: it opens with
// blocks and straight-line instructions (at most a few dozen), then a loop.
// Anything else, or anything it cannot decode, is a no.
func reachesLoop(code []byte) bool {
	r := reader{b: code}
	for range 64 {
		switch op := r.byte(); {
		case r.err != nil:
			return false
		case op == 0x03: // loop
			return true
		case op == 0x02: // block
			r.blockType()
		case op == 0x01, op == 0x1a: // nop, drop
		case op >= 0x20 && op <= 0x24: // local.get/set/tee, global.get/set
			r.u32()
		case op >= 0x28 && op <= 0x3e: // loads and stores (they may trap: that ends the call too)
			r.memArg()
		case op == 0x41: // i32.const
			r.sleb(5)
		case op == 0x42: // i64.const
			r.sleb(10)
		case op >= 0x45 && op <= 0xc4: // numeric
		default:
			return false
		}
	}
	return false
}

// scanLoops reads the instructions of a function body to its end and adds
// to marks the offset just after each loop's block type.
func scanLoops(r *reader, marks *[]int) error {
	depth := 1 // the function body's implicit block
	for depth > 0 && r.err == nil {
		if r.off >= len(r.b) {
			return errors.New("body ends before its final end")
		}
		op := r.byte()
		switch {
		case op == 0x03: // loop
			r.blockType()
			*marks = append(*marks, r.off)
			depth++
		case op == 0x02, op == 0x04, op == 0x06: // block, if, try
			r.blockType()
			depth++
		case op == 0x1f: // try_table: block type, catch clauses
			r.blockType()
			n := r.u32()
			for i := uint32(0); i < n && r.err == nil; i++ {
				switch k := r.byte(); k {
				case 0x00, 0x01: // catch, catch_ref: tag, label
					r.u32()
					r.u32()
				case 0x02, 0x03: // catch_all, catch_all_ref: label
					r.u32()
				default:
					r.fail("unknown catch clause 0x%02x", k)
				}
			}
			depth++
		case op == 0x0b: // end
			depth--
		case op == 0x00, op == 0x01, op == 0x05, op == 0x0a, op == 0x0f, op == 0x19,
			op == 0x1a, op == 0x1b, op == 0xd1, op == 0xd3, op == 0xd4:
			// unreachable, nop, else, throw_ref, return, catch_all, drop,
			// select, ref.is_null, ref.eq, ref.as_non_null: no immediates
		case op == 0x07, op == 0x08, op == 0x09, op == 0x0c, op == 0x0d, op == 0x10,
			op == 0x12, op == 0x14, op == 0x15, op == 0x18, op == 0xd2, op == 0xd5, op == 0xd6,
			op >= 0x20 && op <= 0x26:
			// catch, throw, rethrow, br, br_if, call, return_call, call_ref,
			// return_call_ref, delegate, ref.func, br_on_null,
			// br_on_non_null, local/global/table get/set: one index
			r.u32()
		case op == 0x0e: // br_table: labels, default
			n := r.u32()
			for i := uint32(0); i <= n && r.err == nil; i++ {
				r.u32()
			}
		case op == 0x11, op == 0x13: // call_indirect, return_call_indirect
			r.u32()
			r.u32()
		case op == 0x1c: // select t*
			n := r.u32()
			for i := uint32(0); i < n && r.err == nil; i++ {
				r.valType()
			}
		case op >= 0x28 && op <= 0x3e: // loads and stores
			r.memArg()
		case op == 0x3f, op == 0x40: // memory.size, memory.grow
			r.u32()
		case op == 0x41: // i32.const
			r.sleb(5)
		case op == 0x42: // i64.const
			r.sleb(10)
		case op == 0x43: // f32.const
			r.take(4)
		case op == 0x44: // f64.const
			r.take(8)
		case op >= 0x45 && op <= 0xc4: // numeric (incl. sign extension)
		case op == 0xd0: // ref.null: heap type
			r.heapType()
		case op == 0xfc:
			r.miscOp()
		case op == 0xfd:
			r.simdOp()
		case op == 0xfe:
			r.atomicOp()
		default:
			r.fail("unsupported instruction 0x%02x", op)
		}
	}
	if r.err != nil {
		return r.err
	}
	if r.off != len(r.b) {
		return fmt.Errorf("%d bytes after the body's end", len(r.b)-r.off)
	}
	return nil
}
