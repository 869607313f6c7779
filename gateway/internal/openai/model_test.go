package openai

import (
	"encoding/json"
	"errors"
	"testing"
)

func TestAppendWithModel(t *testing.T) {
	tests := []struct {
		name, body, model, want string
	}{
		{"first member", `{"model":"gpt-4o","messages":[]}`, "mini", `{"model":"mini","messages":[]}`},
		{"last member, spaces kept", ` { "stream" : true , "model" : "a" } `, "b", ` { "stream" : true , "model" : "b" } `},
		{"nested model untouched", `{"metadata":{"model":"keep"},"model":"a","x":"model"}`, "b", `{"metadata":{"model":"keep"},"model":"b","x":"model"}`},
		{"escaped key", `{"mod\u0065l":"a"}`, "b", `{"mod\u0065l":"b"}`},
		{"every duplicate", `{"model":"a","model":"c"}`, "b", `{"model":"b","model":"b"}`},
		{"escaped value", `{"model":"a"}`, `we"ird\`, `{"model":"we\"ird\\"}`},
		{"absent: added", `{"messages":[]}`, "b", `{"messages":[],"model":"b"}`},
		{"empty object", `{}`, "b", `{"model":"b"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := AppendWithModel([]byte("pre:"), []byte(tt.body), tt.model)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != "pre:"+tt.want {
				t.Errorf("got  %s\nwant pre:%s", got, tt.want)
			}
		})
	}
	for _, bad := range []string{``, `[]`, `{"model"}`, `{"model":}`, `{"a":1,}`, `{"a":1 "b":2}`, `{"a":"x}`, `"model"`} {
		got, err := AppendWithModel([]byte("pre"), []byte(bad), "b")
		if !errors.Is(err, ErrNotObject) || string(got) != "pre" {
			t.Errorf("%q: %q, %v; want dst unchanged and ErrNotObject", bad, got, err)
		}
	}
}

func TestAppendWithModelAllocatesNothing(t *testing.T) {
	body := []byte(`{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	dst := make([]byte, 0, 256)
	if n := testing.AllocsPerRun(1000, func() { AppendWithModel(dst[:0], body, "gpt-4o-mini") }); n != 0 {
		t.Errorf("%v allocations", n)
	}
}

func FuzzAppendWithModel(f *testing.F) {
	for _, s := range []string{`{"model":"a","messages":[]}`, `{}`, `{"mod\u0065l":"a","x":{"model":1}}`, `{"model":"a","model":"b"}`, ` {"a" : [1,{"b":"}"}]} `} {
		f.Add([]byte(s), "fallback")
	}
	f.Fuzz(func(t *testing.T, body []byte, model string) {
		var in map[string]json.RawMessage
		if json.Unmarshal(body, &in) != nil {
			return // only objects the request parser would accept matter
		}
		out, err := AppendWithModel(nil, body, model)
		if err != nil {
			t.Fatalf("valid object %q refused: %v", body, err)
		}
		var got map[string]json.RawMessage
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("result %q is not JSON: %v", out, err)
		}
		var m string
		if err := json.Unmarshal(got["model"], &m); err != nil || m != toValidUTF8(model) {
			t.Fatalf("model %q, want %q (%q)", got["model"], model, out)
		}
		for k, v := range in {
			if k != "model" && string(got[k]) != string(v) {
				t.Fatalf("member %q changed: %s → %s", k, v, got[k])
			}
		}
	})
}

// toValidUTF8 is what encoding/json decodes an escaped string into.
func toValidUTF8(s string) string {
	b, _ := json.Marshal(s)
	var out string
	json.Unmarshal(b, &out)
	return out
}
