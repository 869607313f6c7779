package anthropic

import (
	"github.com/valyala/fastjson"

	"github.com/tollgate/tollgate/gateway/internal/openai"
)

// JSON writing. Every string this package writes goes through
// openai.AppendJSONString, which yields valid JSON whatever the input bytes:
// fastjson's own encoder is not used because it writes Go escapes such as
// \x01 for control characters, which JSON does not have.

// appendValue appends v re-encoded as compact JSON. Strings and keys are
// re-escaped with appendString; numbers are copied as written, so v must
// come from input that passed fastjson.Validate (the lenient parser alone
// accepts "nan" and "+1").
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

// appendUsage appends the OpenAI usage object for u.
func appendUsage(dst []byte, u Usage) []byte { return openai.AppendUsage(dst, u.OpenAI()) }
