package main

import (
	"bytes"
	"regexp"
	"regexp/syntax"
	"unicode/utf8"
)

// Go's regexp reads every byte of a text for every pattern, at some 50 MB/s
// on amd64 and several times slower in wasm: five patterns over a 2 KB
// prompt cost milliseconds per request in the plugin. Most patterns require
// a literal, though ("(?i)ignore (all )?previous instructions" cannot match
// a text without "previous instructions" in some case), and a prompt that
// does not contain it is ruled out by a substring search, which is much
// faster. A rule runs its regexp only when its literal is present.
type rule struct {
	re *regexp.Regexp
	// lit is a string every match contains; nil when the pattern has none
	// the prefilter can use. With fold, lit is lower-case ASCII and is
	// searched for in the text lowered to ASCII lower case.
	lit  []byte
	fold bool
	// ks: lit has a k or an s, which (?i) also matches with the non-ASCII
	// KELVIN SIGN and LATIN SMALL LETTER LONG S.
	ks bool
}

func newRule(re *regexp.Regexp) rule {
	r := rule{re: re}
	// regexp.Compile parsed the pattern with syntax.Perl already; parsing
	// it again cannot fail.
	if t, err := syntax.Parse(re.String(), syntax.Perl); err == nil {
		r.lit, r.fold = required(t.Simplify())
	}
	if r.fold {
		r.ks = bytes.ContainsAny(r.lit, "ks")
	}
	return r
}

// required returns the longest literal that every match of t contains, and
// whether it is matched case-insensitively (then as lower-case ASCII); nil
// when there is none the prefilter can search for.
func required(t *syntax.Regexp) ([]byte, bool) {
	switch t.Op {
	case syntax.OpLiteral:
		fold := t.Flags&syntax.FoldCase != 0
		var b []byte
		for _, r := range t.Rune {
			switch {
			case r == utf8.RuneError:
				// Matches invalid UTF-8 too, which a byte search would miss.
				return nil, false
			case fold && r >= utf8.RuneSelf:
				// Non-ASCII folding is Unicode's; keep to ASCII.
				return nil, false
			case fold && 'A' <= r && r <= 'Z':
				r += 'a' - 'A'
			}
			b = utf8.AppendRune(b, r)
		}
		return b, fold
	case syntax.OpCapture, syntax.OpPlus:
		return required(t.Sub[0])
	case syntax.OpRepeat:
		if t.Min >= 1 {
			return required(t.Sub[0])
		}
	case syntax.OpConcat:
		// Every part of a concatenation is in every match: take the longest.
		var best []byte
		var fold bool
		for _, s := range t.Sub {
			if b, f := required(s); len(b) > len(best) {
				best, fold = b, f
			}
		}
		return best, fold
	}
	return nil, false
}

// lowerASCII appends text lowered to ASCII lower case to dst.
func lowerASCII(dst, text []byte) []byte {
	dst = append(dst[:0], text...)
	for i, c := range dst {
		if 'A' <= c && c <= 'Z' {
			dst[i] = c + 'a' - 'A'
		}
	}
	return dst
}

var kelvin, longS = []byte("\u212a"), []byte("\u017f")

// mayMatch reports whether the rule's literal rules out a match in text:
// false only when r.re cannot match. lower is text lowered by lowerASCII,
// or nil when not computed yet (it is then computed into *lowerBuf).
func (r *rule) mayMatch(text []byte, lower *[]byte, lowered *bool) bool {
	switch {
	case r.lit == nil:
		return true
	case !r.fold:
		return bytes.Contains(text, r.lit)
	}
	if !*lowered {
		*lower, *lowered = lowerASCII(*lower, text), true
	}
	if bytes.Contains(*lower, r.lit) {
		return true
	}
	return r.ks && (bytes.Contains(text, kelvin) || bytes.Contains(text, longS))
}
