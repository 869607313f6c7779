package sdk

import (
	"strconv"
	"unicode/utf8"
)

// appendf is the small printf behind Logf (see there for what it supports).
func appendf(b []byte, format string, args []any) []byte {
	next := 0
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' || i+1 == len(format) {
			b = append(b, c)
			continue
		}
		i++
		verb := format[i]
		if verb == '%' {
			b = append(b, '%')
			continue
		}
		if next >= len(args) {
			b = append(b, "%!"...)
			b = append(b, verb)
			b = append(b, "(MISSING)"...)
			continue
		}
		b = appendArg(b, verb, args[next])
		next++
	}
	if next < len(args) {
		b = append(b, "%!(EXTRA)"...)
	}
	return b
}

func appendArg(b []byte, verb byte, arg any) []byte {
	var s string
	switch v := arg.(type) {
	case nil:
		s = "<nil>"
	case string:
		s = v
	case []byte:
		s = string(v)
	case error:
		s = v.Error()
	case interface{ String() string }:
		s = v.String()
	case bool:
		s = strconv.FormatBool(v)
	case int:
		return appendInt(b, verb, int64(v))
	case int8:
		return appendInt(b, verb, int64(v))
	case int16:
		return appendInt(b, verb, int64(v))
	case int32:
		return appendInt(b, verb, int64(v))
	case int64:
		return appendInt(b, verb, v)
	case uint:
		return appendUint(b, verb, uint64(v))
	case uint8:
		return appendUint(b, verb, uint64(v))
	case uint16:
		return appendUint(b, verb, uint64(v))
	case uint32:
		return appendUint(b, verb, uint64(v))
	case uint64:
		return appendUint(b, verb, v)
	case float32:
		return strconv.AppendFloat(b, float64(v), 'g', -1, 32)
	case float64:
		return strconv.AppendFloat(b, v, 'g', -1, 64)
	default:
		b = append(b, "%!"...)
		b = append(b, verb)
		return append(b, "(unsupported)"...)
	}
	switch verb {
	case 'q':
		return strconv.AppendQuote(b, s)
	case 'x':
		const hex = "0123456789abcdef"
		for i := 0; i < len(s); i++ {
			b = append(b, hex[s[i]>>4], hex[s[i]&15])
		}
		return b
	}
	return append(b, s...)
}

func appendInt(b []byte, verb byte, n int64) []byte {
	switch verb {
	case 'x':
		return strconv.AppendInt(b, n, 16)
	case 'q':
		if n >= 0 && n <= utf8.MaxRune {
			return strconv.AppendQuoteRune(b, rune(n))
		}
	}
	return strconv.AppendInt(b, n, 10)
}

func appendUint(b []byte, verb byte, n uint64) []byte {
	if verb == 'x' {
		return strconv.AppendUint(b, n, 16)
	}
	return strconv.AppendUint(b, n, 10)
}
