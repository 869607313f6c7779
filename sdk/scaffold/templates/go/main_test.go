package main

import (
	"strings"
	"testing"

	"github.com/tollgate/tollgate/sdk/plugintest"
)

// The cases shared with other languages are in plugin_test.json, run by
// `tollgate plugin test`; these tests check the Go code on its own.

const config = `{"deny": ["secret", "p@ssw0rd"], "replacement": "[blocked]"}`

func TestConfig(t *testing.T) {
	tests := []struct {
		name, config, err string // err: "" when the config loads
	}{
		{"good", config, ""},
		{"default replacement", `{"deny": ["a"]}`, ""},
		{"not JSON", `{"deny": `, "the config is not JSON"},
		{"not an object", `["secret"]`, "the config is not an object"},
		{"no deny", `{}`, `"deny" is missing`},
		{"empty deny", `{"deny": []}`, `"deny" is empty`},
		{"deny not an array", `{"deny": "secret"}`, `"deny" is not an array`},
		{"empty term", `{"deny": [""]}`, "deny[0] is 0 bytes long"},
		{"term not a string", `{"deny": ["a", 1]}`, "deny[1] is not a string"},
		{"long term", `{"deny": ["` + strings.Repeat("x", maxTerm+1) + `"]}`, "deny[0] is 257 bytes long"},
		{"replacement not a string", `{"deny": ["a"], "replacement": 1}`, `"replacement" is not a string`},
		{"unknown field", `{"deny": ["a"], "mode": "x"}`, `unknown config field "mode"`},
		{"data after the object", `{"deny": ["a"]} x`, "the config is not JSON"},
		{"bad value of an unknown field", `{"mode": tru}`, "the config is not JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseConfig([]byte(tt.config))
			switch {
			case tt.err == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err) || !strings.HasPrefix(err.Error(), "denyguard: ")):
				t.Fatalf("error %v, want one containing %q", err, tt.err)
			}
		})
	}
}

func FuzzParseConfig(f *testing.F) {
	for _, seed := range []string{config, `{"deny": ["A\u00e9"], "replacement": ""}`, `{"deny": []}`, `[1]`, `{"deny": ["a"], "deny": ["bb"]}`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		g, err := parseConfig(raw)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "denyguard: ") {
				t.Fatalf("error without the plugin's name: %v", err)
			}
			return
		}
		if len(g.deny) == 0 {
			t.Fatal("accepted without terms")
		}
		longest := 0
		for _, term := range g.deny {
			if len(term) == 0 || len(term) > maxTerm || string(term) != string(lowerASCII(term)) {
				t.Fatalf("term %q", term)
			}
			longest = max(longest, len(term))
		}
		if longest != g.longest {
			t.Fatalf("longest %d, want %d", g.longest, longest)
		}
	})
}

func TestContainsFold(t *testing.T) {
	tests := []struct {
		text, term string
		want       bool
	}{
		{"a SeCrEt b", "secret", true},
		{"secre", "secret", false},
		{"", "a", false},
		{"p@SSW0RD", "p@ssw0rd", true},
		{"\u212aey", "key", false}, // the Kelvin sign is not ASCII
	}
	for _, tt := range tests {
		if got := containsFold([]byte(tt.text), []byte(tt.term)); got != tt.want {
			t.Errorf("containsFold(%q, %q) = %v, want %v", tt.text, tt.term, got, tt.want)
		}
	}
}

func TestPlugin(t *testing.T) {
	p := plugintest.Load(t, plugintest.Build(t, "."), config)

	res := p.Request(plugintest.Request{Body: `{"model":"m","messages":[{"role":"user","content":"the SECRET"}]}`})
	if !res.Rejected || res.Status != 400 || res.Code != "content_blocked" || strings.Contains(res.Message, "secret") {
		t.Errorf("blocked request: %+v", res)
	}
	res = p.Request(plugintest.Request{Body: `{"model":"m","messages":[{"role":"user","content":"hello"}]}`})
	if res.Rejected || res.Err != nil {
		t.Errorf("clean request: %+v", res)
	}

	// The term split over three events is stopped at its last byte.
	st := p.Stream(plugintest.Request{}, []string{"a se", "cr", "et b"})
	if !st.Stopped || st.Text != "a secr[blocked]" || st.FinishReason != "content_filter" {
		t.Errorf("split term: %+v", st)
	}
	st = p.Stream(plugintest.Request{}, []string{"a se", "cond"})
	if st.Stopped || st.Text != "a second" {
		t.Errorf("clean stream: %+v", st)
	}
}
