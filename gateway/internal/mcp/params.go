package mcp

import (
	"bytes"
	"encoding/base64"

	"github.com/valyala/fastjson"
)

// Argument headers (SEP-2243): a client may mirror a tool's arguments
// into Mcp-Param-{Name} headers (the tool's input schema names them with
// x-mcp-header), and a server checks each header against the body. When a
// plugin rewrites a tools/call's argument strings (a redaction), those
// headers would still carry the client's values: the secret the plugin
// removed from the body would reach the server in a header, and the
// server would refuse the call for the mismatch. ParamRewrites follows
// the rewrite into the headers.

// ParamRewrites pairs each string of a tools/call's params.arguments
// before a rewrite with the same string after it. Its zero value is
// empty; it is not safe for concurrent use.
type ParamRewrites struct {
	before, after fastjson.Parser
	pairs         [][2][]byte
	// broken: the two bodies do not have the same arguments' shape (not
	// expected: a rewrite changes strings' contents only). Every
	// argument header is then dropped.
	broken bool
}

// Diff pairs the argument strings of before and after, two bodies of the
// same tools/call. The pairs borrow the parsers' values until the next
// Diff.
func (r *ParamRewrites) Diff(before, after []byte) {
	r.pairs, r.broken = r.pairs[:0], false
	vb, err1 := r.before.ParseBytes(before)
	va, err2 := r.after.ParseBytes(after)
	if err1 != nil || err2 != nil {
		r.broken = true
		return
	}
	ab, aa := vb.Get("params", "arguments"), va.Get("params", "arguments")
	if (ab == nil) != (aa == nil) {
		r.broken = true
		return
	}
	if ab != nil && !r.walk(ab, aa, 0) {
		r.broken = true
	}
}

// maxDepth bounds the walk (fastjson's own parse depth is bounded too).
const maxDepth = 128

// walk pairs the strings of b and a, false when their shapes differ.
func (r *ParamRewrites) walk(b, a *fastjson.Value, depth int) bool {
	if depth > maxDepth || b.Type() != a.Type() {
		return false
	}
	switch b.Type() {
	case fastjson.TypeString:
		sb, _ := b.StringBytes()
		sa, _ := a.StringBytes()
		r.pairs = append(r.pairs, [2][]byte{sb, sa})
	case fastjson.TypeArray:
		eb, _ := b.Array()
		ea, _ := a.Array()
		if len(eb) != len(ea) {
			return false
		}
		for i := range eb {
			if !r.walk(eb[i], ea[i], depth+1) {
				return false
			}
		}
	case fastjson.TypeObject:
		ob, _ := b.Object()
		oa, _ := a.Object()
		if ob.Len() != oa.Len() {
			return false
		}
		// Members are paired in order, duplicates included (the
		// rewrite keeps every member where it was).
		var kb, ka []string
		var vb, va []*fastjson.Value
		ob.Visit(func(k []byte, v *fastjson.Value) { kb, vb = append(kb, string(k)), append(vb, v) })
		oa.Visit(func(k []byte, v *fastjson.Value) { ka, va = append(ka, string(k)), append(va, v) })
		for i := range kb {
			if kb[i] != ka[i] || !r.walk(vb[i], va[i], depth+1) {
				return false
			}
		}
	}
	return true
}

// Header returns what an Mcp-Param-* header whose value is value becomes
// after the rewrite: value itself when the rewrite changed no string it
// mirrors, the rewritten string (base64-wrapped, =?base64?...?=, which a
// server decodes whatever the string holds), or drop when it cannot be
// told which string it mirrors (one value rewritten two ways, or kept in
// one place and rewritten in another) or a value fails to decode: a
// dropped header lets the server refuse the call, a kept one could carry
// what the plugin removed.
func (r *ParamRewrites) Header(dst, value []byte) (out []byte, drop bool) {
	if r.broken {
		return dst, true
	}
	decoded, ok := decodeParam(value)
	if !ok {
		return dst, true
	}
	var to []byte
	found := false
	for _, p := range r.pairs {
		if !bytes.Equal(p[0], decoded) {
			continue
		}
		if found && !bytes.Equal(p[1], to) {
			return dst, true
		}
		to, found = p[1], true
	}
	if !found || bytes.Equal(to, decoded) {
		return append(dst, value...), false
	}
	dst = append(dst, paramB64Prefix...)
	dst = base64.StdEncoding.AppendEncode(dst, to)
	return append(dst, paramB64Suffix...), false
}

const (
	paramB64Prefix = "=?base64?"
	paramB64Suffix = "?="
)

// decodeParam reads an Mcp-Param-* header's value: as sent, or the
// string a =?base64?...?= wrapper encodes.
func decodeParam(v []byte) ([]byte, bool) {
	if !bytes.HasPrefix(v, []byte(paramB64Prefix)) || !bytes.HasSuffix(v, []byte(paramB64Suffix)) || len(v) < len(paramB64Prefix)+len(paramB64Suffix) {
		return v, true
	}
	enc := v[len(paramB64Prefix) : len(v)-len(paramB64Suffix)]
	out, err := base64.StdEncoding.AppendDecode(nil, enc)
	return out, err == nil
}
