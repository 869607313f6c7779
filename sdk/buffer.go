package sdk

// The host never allocates in the guest: to read a value the guest passes a
// buffer, and the host returns the value's length, writing it only when it
// fits (ABI.md, "Guest-owned buffers"). A buffer is reused from call to call
// and grows to the largest value it has held, so steady-state reads make no
// allocation in the SDK.
type buffer struct{ b []byte }

// Reusable buffers. An instance runs one callback at a time on one thread.
var (
	scratch  buffer // values copied out at once (headers, fields, facts)
	bodyBuf  buffer // Exchange.Body
	textBuf  buffer // Chunk.Bytes
	stateBuf buffer // Exchange.State
)

// errUnstable is returned when the host asked for a bigger buffer again and
// again: the value changed between calls, which the ABI does not allow.
const errUnstable Error = -1000

const firstBuffer = 256

// read calls get with the whole buffer, at least min bytes, and retries with
// a bigger one while the host reports a longer value. It returns the value,
// which aliases the buffer, and the host's result code: n ≥ 0 is the length,
// n < 0 an error.
func (buf *buffer) read(min int, get func([]byte) int32) ([]byte, int32) {
	if cap(buf.b) < min || buf.b == nil {
		buf.b = make([]byte, 0, max(min, firstBuffer))
	}
	b, n := appendRead(buf.b[:0], get)
	buf.b = b[:0] // keeps what appendRead grew
	if n < 0 {
		return nil, n
	}
	return b, n
}

// appendRead calls get with dst's spare capacity and appends the value it
// writes there, growing dst and calling again while the host reports a
// longer value (three calls at most: then errUnstable). It returns dst
// and the host's result code: n ≥ 0 is the value's length, n < 0 an error
// (dst unchanged).
func appendRead(dst []byte, get func([]byte) int32) ([]byte, int32) {
	for range 3 {
		n := get(dst[len(dst):cap(dst)])
		if n < 0 {
			return dst, n
		}
		if int(n) <= cap(dst)-len(dst) {
			return dst[:len(dst)+int(n)], n
		}
		dst = grow(dst, int(n))
	}
	return dst, int32(errUnstable)
}

// grow returns dst with room for at least n more bytes (at least twice its
// spare capacity).
func grow(dst []byte, n int) []byte {
	grown := make([]byte, len(dst), len(dst)+max(n, 2*(cap(dst)-len(dst))))
	copy(grown, dst)
	return grown
}

// broken reports a host result the ABI rules out for the call the SDK made
// (for example NOT_ALLOWED from a getter that is only reachable in its own
// phase). The SDK panics rather than hand the plugin an empty value: the
// callback fails and the plugin's on_error applies, so a guard never passes
// content it could not read.
func broken(what string, n int32) {
	panic("sdk: " + what + ": " + Error(n).Error())
}

// readString reads a value into scratch and copies it out; false when the
// host reports ABSENT.
func readString(what string, get func([]byte) int32) (string, bool) {
	b, n := scratch.read(0, get)
	if n == int32(ErrAbsent) {
		return "", false
	}
	if n < 0 {
		broken(what, n)
	}
	return recent.intern(b), true
}

// recent holds the last strings readString returned. Most values repeat
// from request to request (the model, the tenant's id and plan, a
// client's headers), and a value equal to one of them is returned without
// an allocation: strings are immutable, so sharing one is safe. Besides
// the garbage, an allocation runs a few kilobytes of the runtime's
// allocator, which costs microseconds when its code is not in the CPU's
// caches, as between one request and the next.
var recent internTable

// maxIntern is the longest value interned: the table keeps at most 16 × 256
// bytes alive.
const maxIntern = 256

type internTable struct {
	s    [16]string
	next int
}

func (t *internTable) intern(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if len(b) > maxIntern {
		return string(b) // long values seldom repeat, and would be kept alive
	}
	for _, s := range &t.s {
		if len(s) == len(b) && s == string(b) { // compared without a copy
			return s
		}
	}
	s := string(b)
	t.s[t.next] = s
	t.next = (t.next + 1) % len(t.s)
	return s
}
