package gemini

import (
	"github.com/valyala/fastjson"

	"github.com/tollgate/tollgate/gateway/internal/openai"
)

// JSON writing. Every string this package writes goes through
// openai.AppendJSONString, which yields valid JSON whatever the input
// bytes (fastjson's encoder writes Go escapes such as \x01).

// appendValue appends v re-encoded as compact JSON. Strings and keys are
// re-escaped; numbers are copied as written, so v must come from input
// that passed fastjson.Validate.
func appendValue(dst []byte, v *fastjson.Value) []byte {
	switch v.Type() {
	case fastjson.TypeObject:
		o, _ := v.Object()
		dst = append(dst, '{')
		first := true
		o.Visit(func(key []byte, vv *fastjson.Value) {
			if !first {
				dst = append(dst, ',')
			}
			first = false
			dst = openai.AppendJSONString(dst, key)
			dst = append(dst, ':')
			dst = appendValue(dst, vv)
		})
		return append(dst, '}')
	case fastjson.TypeArray:
		a, _ := v.Array()
		dst = append(dst, '[')
		for i, vv := range a {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendValue(dst, vv)
		}
		return append(dst, ']')
	case fastjson.TypeString:
		s, _ := v.StringBytes()
		return openai.AppendJSONString(dst, s)
	default: // numbers, true, false, null
		return v.MarshalTo(dst)
	}
}

// isNull reports an absent or null member.
func isNull(v *fastjson.Value) bool {
	return v == nil || v.Type() == fastjson.TypeNull
}

// stringOf returns v's unescaped string and true, or nil and false when v
// is not a string.
func stringOf(v *fastjson.Value) ([]byte, bool) {
	if v == nil || v.Type() != fastjson.TypeString {
		return nil, false
	}
	s, _ := v.StringBytes()
	return s, true
}

// intOf returns v as an int64, 0 when v is absent or not an integer.
// Google's JSON writes int64 fields as strings ("123"); both are read.
func intOf(v *fastjson.Value) int64 {
	if v == nil {
		return 0
	}
	switch v.Type() {
	case fastjson.TypeNumber:
		n, _ := v.Int64()
		return n
	case fastjson.TypeString:
		s, _ := v.StringBytes()
		var n int64
		for _, c := range s {
			if c < '0' || c > '9' || n > (1<<62)/10 {
				return 0
			}
			n = n*10 + int64(c-'0')
		}
		return n
	}
	return 0
}
