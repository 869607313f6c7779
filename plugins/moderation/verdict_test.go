package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// omni is an answer in omni-moderation's shape (as mockllm writes it).
const omni = `{"id":"modr-1","model":"omni-moderation-latest","results":[{"flagged":true,
	"categories":{"harassment":false,"hate":true,"violence":true,"self-harm":false,"illicit":null},
	"category_scores":{"harassment":0.01,"hate":0.62,"violence":0.91,"self-harm":0.3,"illicit":0},
	"category_applied_input_types":{"hate":["text"],"violence":["text"]}}]}`

func TestParseAnswer(t *testing.T) {
	a, err := parseAnswer([]byte(omni))
	if err != nil {
		t.Fatal(err)
	}
	if !a.flagged || !reflect.DeepEqual(a.categories, []string{"hate", "violence"}) || len(a.scores) != 5 || a.scores[2] != (score{"violence", 0.91}) {
		t.Fatalf("got %+v", a)
	}
	for _, bad := range []string{``, `{"results": [{"flagged": tru`, `{"results":[]}`, `{"error":{"message":"x"}}`,
		`{"results":{"flagged":true}}`, `{"results":[{"category_scores":{"hate":"high"}}]}`, `[1]`, `{"results":[1]}`} {
		if _, err := parseAnswer([]byte(bad)); err == nil {
			t.Errorf("parseAnswer(%q) accepted", bad)
		}
	}
}

func TestFlaggedCategories(t *testing.T) {
	a, _ := parseAnswer([]byte(omni))
	tests := []struct {
		name       string
		thresholds []threshold
		a          answer
		want       []string
	}{
		{"the classifier's own", nil, a, []string{"hate", "violence"}},
		{"thresholds below", []threshold{{"violence", 0.9}, {"self-harm", 0.3}}, a, []string{"violence", "self-harm"}},
		{"thresholds above", []threshold{{"violence", 0.95}, {"hate", 0.7}}, a, nil},
		{"a category not scored", []threshold{{"sexual", 0.1}}, a, nil},
		{"flagged without categories", nil, answer{flagged: true}, []string{"flagged"}},
		{"clean", nil, answer{}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &config{thresholds: tt.thresholds}
			if got := c.flaggedCategories(tt.a); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestAppendRequest(t *testing.T) {
	c := &config{model: "omni-moderation-latest"}
	text := "quote \" back\\slash\nnew\tline \x01 é \xff end"
	b := c.appendRequest(nil, []byte(text))
	var got struct{ Model, Input string }
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	want := strings.ToValidUTF8(text, "\ufffd")
	if got.Model != c.model || got.Input != want {
		t.Errorf("got %+v, want input %q", got, want)
	}
}

// FuzzAppendJSONString cross-checks the encoder against encoding/json's
// decoder: what it writes decodes to the input (invalid UTF-8 as U+FFFD).
func FuzzAppendJSONString(f *testing.F) {
	f.Add([]byte("hello \"world\"\n"))
	f.Add([]byte{0xff, 0x00, '\\', 0xe2, 0x80})
	f.Fuzz(func(t *testing.T, s []byte) {
		b := appendJSONString(nil, s)
		var got string
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("%q → %s: %v", s, b, err)
		}
		if want := strings.ToValidUTF8(string(s), "\ufffd"); got != want && got != invalidEach(s) {
			t.Fatalf("%q decoded as %q", s, got)
		}
	})
}

// invalidEach is s with each invalid byte replaced by U+FFFD (what
// appendJSONString does; ToValidUTF8 replaces a run with one).
func invalidEach(s []byte) string {
	var out []rune
	for _, r := range string(s) {
		out = append(out, r)
	}
	return string(out)
}

func TestCacheKey(t *testing.T) {
	a := (&config{model: "m1"}).cacheKey(nil, []byte("hello"))
	b := (&config{model: "m2"}).cacheKey(nil, []byte("hello"))
	c := (&config{model: "m1"}).cacheKey(nil, []byte("hello!"))
	if string(a) == string(b) || string(a) == string(c) || !strings.HasPrefix(string(a), "moderation:") || len(a) != len("moderation:")+64 {
		t.Errorf("keys %s %s %s", a, b, c)
	}
	if strings.Contains(string(a), "hello") {
		t.Errorf("the key shows the text")
	}
	if again := (&config{model: "m1"}).cacheKey(nil, []byte("hello")); string(again) != string(a) {
		t.Errorf("the key is not stable")
	}
}

// The cache key is the hex SHA-256 of model, NUL, text: keys the host
// cached before stay valid.
func TestCacheKeyValue(t *testing.T) {
	sum := sha256.Sum256([]byte("omni-moderation-latest\x00hello"))
	want := "moderation:" + hex.EncodeToString(sum[:])
	if got := (&config{model: "omni-moderation-latest"}).cacheKey([]byte("x"), []byte("hello")); string(got) != "x"+want {
		t.Errorf("got %s, want x%s", got, want)
	}
}

// appendJSONStringBytewise is the encoder as it was, byte by byte: the
// one that copies runs must write the same bytes.
func appendJSONStringBytewise(dst, s []byte) []byte {
	const hexDigits = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			switch {
			case b == '"' || b == '\\':
				dst = append(dst, '\\', b)
			case b == '\n':
				dst = append(dst, '\\', 'n')
			case b == '\r':
				dst = append(dst, '\\', 'r')
			case b == '\t':
				dst = append(dst, '\\', 't')
			case b < 0x20:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xf])
			default:
				dst = append(dst, b)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRune(s[i:])
		if r == utf8.RuneError && n == 1 {
			dst = append(dst, `\ufffd`...)
		} else {
			dst = append(dst, s[i:i+n]...)
		}
		i += n
	}
	return append(dst, '"')
}

func FuzzAppendJSONStringRuns(f *testing.F) {
	for _, s := range []string{"", "plain", "a\"b\\c\nd\re\tf\x00g\x1f\x7f", "é€😀 \xff\xe2\x80 end", "\xf0\x9f\x98"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, s []byte) {
		if got, want := appendJSONString([]byte("x"), s), appendJSONStringBytewise([]byte("x"), s); !bytes.Equal(got, want) {
			t.Fatalf("%q: got %s, want %s", s, got, want)
		}
	})
}

// Parsing into a reused answer leaves nothing of the previous one, and
// category names it does not know are copied, not aliased.
func TestParseReuses(t *testing.T) {
	var a answer
	if err := a.parse([]byte(`{"results":[{"flagged":true,"categories":{"hate":true,"new/kind":true},"category_scores":{"hate":0.9,"new/kind":0.8}}]}`), true); err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"results":[{"flagged":false,"categories":{"hate":false,"other":true},"category_scores":{"other":0.7}}]}`)
	if err := a.parse(body, true); err != nil {
		t.Fatal(err)
	}
	copy(body, bytes.Repeat([]byte("#"), len(body)))
	want := answer{categories: []string{"other"}, scores: []score{{"other", 0.7}}}
	if !reflect.DeepEqual(a, want) {
		t.Errorf("got %+v, want %+v", a, want)
	}
	for _, withScores := range []bool{true, false} {
		if err := a.parse([]byte(`{"results":[{"category_scores":{"hate":1e999}}]}`), withScores); err != errAnswer {
			t.Errorf("a score out of range, withScores %v: %v", withScores, err)
		}
	}
	if err := a.parse([]byte(`{"results":[{"flagged":true,"categories":{"hate":true}}],`), true); err == nil || a.flagged || len(a.categories) != 0 {
		t.Errorf("a malformed answer: %v, %+v", err, a)
	}
}

// FuzzParseAnswer: any body either fails with errAnswer and leaves an
// empty answer, or is valid JSON; parsing into a reused answer reads the
// same as into a new one.
func FuzzParseAnswer(f *testing.F) {
	f.Add([]byte(omni))
	f.Add([]byte(omniAnswer("hate", "violence/graphic")))
	f.Add([]byte(`{"results": [{"flagged": tru`))
	f.Add([]byte(`{"results":[{"categories":{"hate":null},"category_scores":{"hate":1e999}}]}`))
	f.Add([]byte(`{"results":[{"category_scores":{"hate":-0.5e-400,"x":12345678901234567890}}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		fresh, freshErr := parseAnswer(body)
		var a answer
		a.flagged, a.categories, a.scores = true, []string{"stale"}, []score{{"stale", 1}}
		err := a.parse(body, true)
		if (err == nil) != (freshErr == nil) {
			t.Fatalf("%q: reused %v, new %v", body, err, freshErr)
		}
		var unscored answer
		if err := unscored.parse(body, false); (err == nil) != (freshErr == nil) || len(unscored.scores) != 0 ||
			unscored.flagged != fresh.flagged || !slices.Equal(unscored.categories, fresh.categories) {
			t.Fatalf("%q: without scores %v %+v, with %v %+v", body, err, unscored, freshErr, fresh)
		}
		if err != nil {
			if err != errAnswer || a.flagged || len(a.categories) != 0 || len(a.scores) != 0 {
				t.Fatalf("%q: %v, %+v", body, err, a)
			}
			return
		}
		if !json.Valid(body) {
			t.Fatalf("%q accepted, not JSON", body)
		}
		if a.flagged != fresh.flagged || !slices.Equal(a.categories, fresh.categories) || !slices.Equal(a.scores, fresh.scores) {
			t.Fatalf("%q: reused %+v, new %+v", body, a, fresh)
		}
	})
}
