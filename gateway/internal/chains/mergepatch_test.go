package chains

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
)

// The examples of RFC 7386, appendix A, whose target and patch are
// objects (a plugin's config always is).
func TestMergePatchRFC7386(t *testing.T) {
	tests := []struct{ target, patch, want string }{
		{`{"a":"b"}`, `{"a":"c"}`, `{"a":"c"}`},
		{`{"a":"b"}`, `{"b":"c"}`, `{"a":"b","b":"c"}`},
		{`{"a":"b"}`, `{"a":null}`, `{}`},
		{`{"a":"b","b":"c"}`, `{"a":null}`, `{"b":"c"}`},
		{`{"a":["b"]}`, `{"a":"c"}`, `{"a":"c"}`},
		{`{"a":"c"}`, `{"a":["b"]}`, `{"a":["b"]}`},
		{`{"a":{"b":"c"}}`, `{"a":{"b":"d","c":null}}`, `{"a":{"b":"d"}}`},
		{`{"a":[{"b":"c"}]}`, `{"a":[1]}`, `{"a":[1]}`},
		{`{"e":null}`, `{"a":1}`, `{"a":1,"e":null}`},
		{`{}`, `{"a":{"bb":{"ccc":null}}}`, `{"a":{"bb":{}}}`},
		// Beyond the RFC: keys come out sorted, numbers exact, no HTML escaping.
		{`{"z":1,"a":2}`, `{}`, `{"a":2,"z":1}`},
		{`{"n":1}`, `{"big":12345678901234567890}`, `{"big":12345678901234567890,"n":1}`},
		{``, `{"m":"<x>"}`, `{"m":"<x>"}`},
	}
	for _, tt := range tests {
		got, err := MergePatch([]byte(tt.target), []byte(tt.patch))
		if err != nil || string(got) != tt.want {
			t.Errorf("MergePatch(%s, %s) = %s, %v; want %s", tt.target, tt.patch, got, err, tt.want)
		}
	}
}

func TestMergePatchRefuses(t *testing.T) {
	tests := []struct{ target, patch string }{
		{`{}`, `[1]`},
		{`{}`, `"x"`},
		{`[]`, `{}`},
		{`{}`, `{"a":1} {}`},
		{`{}`, `{"a":`},
	}
	for _, tt := range tests {
		if got, err := MergePatch([]byte(tt.target), []byte(tt.patch)); err == nil {
			t.Errorf("MergePatch(%s, %s) = %s, want an error", tt.target, tt.patch, got)
		}
	}
	if _, err := MergePatch([]byte(`{}`), []byte(`[1]`)); !errors.Is(err, ErrNotObject) {
		t.Errorf("an array patch: %v, want ErrNotObject", err)
	}
}

// FuzzMergePatch: a patch applied twice changes nothing more (RFC 7386
// patches are idempotent), and the result is a JSON object whose members
// named by the patch are the patch's (or absent for null).
func FuzzMergePatch(f *testing.F) {
	f.Add([]byte(`{"a":{"b":1},"c":[1]}`), []byte(`{"a":{"b":null,"d":2},"c":null}`))
	f.Add([]byte(`{}`), []byte(`{"x":"y"}`))
	f.Fuzz(func(t *testing.T, target, patch []byte) {
		once, err := MergePatch(target, patch)
		if err != nil {
			return
		}
		twice, err := MergePatch(once, patch)
		if err != nil || !bytes.Equal(once, twice) {
			t.Fatalf("patch %s over %s: once %s, twice %s (%v)", patch, target, once, twice, err)
		}
		var got, p map[string]json.RawMessage
		if err := json.Unmarshal(once, &got); err != nil {
			t.Fatalf("result %s: %v", once, err)
		}
		if err := json.Unmarshal(patch, &p); err != nil {
			t.Fatalf("patch %s accepted but not an object: %v", patch, err)
		}
		for k, v := range p {
			if string(bytes.TrimSpace(v)) == "null" {
				if _, ok := got[k]; ok {
					t.Fatalf("member %q set to null is still there: %s", k, once)
				}
			} else if _, ok := got[k]; !ok {
				t.Fatalf("member %q of the patch is missing: %s", k, once)
			}
		}
	})
}
