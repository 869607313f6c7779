package main

import (
	"regexp"
	"testing"
)

func TestRequiredLiteral(t *testing.T) {
	for _, c := range []struct {
		pattern, lit string
		fold         bool
	}{
		{`(?i)ignore (all )?previous instructions`, "previous instructions", true},
		{`(?i)\bjailbreak\b`, "jailbreak", true},
		{`\b\d{3}-\d{2}-\d{4}\b`, "-", false},
		{`secret(s)+ key`, "secret", false},
		{`x(abcd)+ y`, "abcd", false},
		{`(?i:API)_KEY=\w+`, "_KEY=", false},
		{`(x+y){2}`, "x", false},
		{`foo|bar`, "", false},
		{`a*`, "", false},
		{`(?i)café`, "", false},
		{`\x{FFFD}`, "", false},
		{`^\s*$`, "", false},
	} {
		r := newRule(regexp.MustCompile(c.pattern))
		if string(r.lit) != c.lit || r.fold != c.fold {
			t.Errorf("%s: got %q fold=%v, want %q fold=%v", c.pattern, r.lit, r.fold, c.lit, c.fold)
		}
	}
}

func TestPrefilterFolding(t *testing.T) {
	// (?i)k and (?i)s also match KELVIN SIGN and LONG S.
	for _, c := range []struct{ pattern, text string }{
		{`(?i)kill`, "\u212aILL"},
		{`(?i)password`, "pa\u017f\u017fword"},
		{`(?i)ignore previous`, "IGNORE PREVIOUS"},
		{`(?i)résumé now`, "RÉSUMÉ NOW"},
	} {
		re := regexp.MustCompile(c.pattern)
		r := newRule(re)
		var lower []byte
		var lowered bool
		if !re.MatchString(c.text) || !r.mayMatch([]byte(c.text), &lower, &lowered) {
			t.Errorf("%s on %q: prefilter rules out a match", c.pattern, c.text)
		}
	}
}

// FuzzPrefilter checks that the prefilter never rules out a text the
// pattern matches: it may only save time, never let text through.
func FuzzPrefilter(f *testing.F) {
	f.Add(`(?i)ignore (all )?previous instructions`, "Please IGNORE previous Instructions now")
	f.Add(`(?i)\bkey\b`, "the \u212aEY is")
	f.Add(`\b\d{3}-\d{2}-\d{4}\b`, "ssn 123-45-6789")
	f.Add(`(?i)pa(ss)+word`, "PA\u017fSWORD")
	f.Add(`a\x{FFFD}b`, "a\xffb")
	f.Fuzz(func(t *testing.T, pattern, text string) {
		re, err := regexp.Compile(pattern)
		if err != nil {
			return
		}
		r := newRule(re)
		var lower []byte
		var lowered bool
		if re.MatchString(text) && !r.mayMatch([]byte(text), &lower, &lowered) {
			t.Fatalf("%q matches %q, but the prefilter (lit %q, fold %v) rules it out", pattern, text, r.lit, r.fold)
		}
	})
}
