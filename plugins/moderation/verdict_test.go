package main

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
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
