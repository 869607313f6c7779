package wasmhost

// The bytecode reader instrument uses to walk a module's sections and
// function bodies: just enough of the binary format to find loops and
// skip every other instruction's immediates.

import (
	"fmt"
)

// reader decodes a byte slice; the first error sticks and later reads
// return zero values.
type reader struct {
	b   []byte
	off int
	err error
}

func (r *reader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf(format+" at offset %d", append(args, r.off)...)
	}
}

func (r *reader) byte() byte {
	if r.err != nil {
		return 0
	}
	if r.off >= len(r.b) {
		r.fail("unexpected end")
		return 0
	}
	c := r.b[r.off]
	r.off++
	return c
}

func (r *reader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b)-r.off {
		r.fail("length %d past the end", n)
		return nil
	}
	s := r.b[r.off : r.off+n]
	r.off += n
	return s
}

// u32 reads an unsigned LEB128 of at most 32 bits.
func (r *reader) u32() uint32 {
	var v uint32
	for i := 0; i < 5; i++ {
		c := r.byte()
		if r.err != nil {
			return 0
		}
		if i == 4 && c > 0x0f {
			r.fail("u32 out of range")
			return 0
		}
		v |= uint32(c&0x7f) << (7 * i)
		if c < 0x80 {
			return v
		}
	}
	return v
}

// uleb skips an unsigned LEB128 of at most max bytes.
func (r *reader) uleb(max int) {
	for i := 0; i < max; i++ {
		if c := r.byte(); r.err != nil || c < 0x80 {
			return
		}
	}
	r.fail("LEB128 longer than %d bytes", max)
}

// sleb skips a signed LEB128 of at most max bytes.
func (r *reader) sleb(max int) { r.uleb(max) }

func (r *reader) name() string {
	n := r.u32()
	return string(r.take(int(n)))
}

// valType reads a value type: a number, vector or reference type.
func (r *reader) valType() {
	switch t := r.byte(); t {
	case 0x7f, 0x7e, 0x7d, 0x7c, 0x7b, 0x70, 0x6f:
	case 0x63, 0x64: // (ref null ht), (ref ht)
		r.heapType()
	default:
		if r.err == nil {
			r.fail("unknown value type 0x%02x", t)
		}
	}
}

func (r *reader) refType() {
	switch t := r.byte(); t {
	case 0x70, 0x6f:
	case 0x63, 0x64:
		r.heapType()
	default:
		if r.err == nil {
			r.fail("unknown reference type 0x%02x", t)
		}
	}
}

// heapType reads an abstract heap type byte or a type index (s33).
func (r *reader) heapType() {
	if r.off < len(r.b) && r.b[r.off] >= 0x69 && r.b[r.off] <= 0x74 {
		r.off++
		return
	}
	r.sleb(5)
}

// blockType reads an empty block type, a single value type, or a type
// index (s33).
func (r *reader) blockType() {
	if r.off >= len(r.b) {
		r.fail("unexpected end")
		return
	}
	switch r.b[r.off] {
	case 0x40, 0x7f, 0x7e, 0x7d, 0x7c, 0x7b, 0x70, 0x6f:
		r.off++
	case 0x63, 0x64:
		r.off++
		r.heapType()
	default:
		r.sleb(5)
	}
}

func (r *reader) limits() {
	flags := r.byte()
	if flags > 0x07 {
		r.fail("unknown limits flags 0x%02x", flags)
		return
	}
	size := 5
	if flags&0x04 != 0 { // 64-bit memory or table
		size = 10
	}
	r.uleb(size)
	if flags&0x01 != 0 {
		r.uleb(size)
	}
}

// memArg reads alignment (bit 6: a memory index follows) and offset.
func (r *reader) memArg() {
	align := r.u32()
	if align&0x40 != 0 {
		r.u32()
	}
	r.uleb(10)
}

// miscOp reads the 0xFC-prefixed instructions: saturating truncation,
// bulk memory and table operations.
func (r *reader) miscOp() {
	switch sub := r.u32(); {
	case sub <= 7: // trunc_sat
	case sub == 8: // memory.init: data, memory
		r.u32()
		r.u32()
	case sub == 9, sub == 11, sub == 13, sub >= 15 && sub <= 17:
		// data.drop, memory.fill, elem.drop, table.grow/size/fill
		r.u32()
	case sub == 10, sub == 12, sub == 14: // memory.copy, table.init, table.copy
		r.u32()
		r.u32()
	default:
		if r.err == nil {
			r.fail("unsupported instruction 0xfc %d", sub)
		}
	}
}

// simdOp reads the 0xFD-prefixed vector instructions.
func (r *reader) simdOp() {
	switch sub := r.u32(); {
	case sub <= 11, sub == 92, sub == 93: // loads, store, load*_zero
		r.memArg()
	case sub == 12, sub == 13: // v128.const, i8x16.shuffle
		r.take(16)
	case sub >= 21 && sub <= 34: // extract_lane, replace_lane
		r.byte()
	case sub >= 84 && sub <= 91: // load*_lane, store*_lane
		r.memArg()
		r.byte()
	case sub <= 0x1ff: // the rest (arithmetic, relaxed SIMD): none
	default:
		if r.err == nil {
			r.fail("unsupported instruction 0xfd %d", sub)
		}
	}
}

// atomicOp reads the 0xFE-prefixed thread instructions.
func (r *reader) atomicOp() {
	switch sub := r.u32(); {
	case sub == 3: // atomic.fence: one reserved byte
		r.byte()
	case sub <= 2, sub >= 0x10 && sub <= 0x4e:
		r.memArg()
	default:
		if r.err == nil {
			r.fail("unsupported instruction 0xfe %d", sub)
		}
	}
}
