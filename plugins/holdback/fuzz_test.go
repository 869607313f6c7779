package main

import (
	"bytes"
	"testing"
)

func FuzzHoldbackConfig(f *testing.F) {
	f.Add([]byte(`{"markers":["oaidalleapiprodscus.blob.core.windows.net"],"case_insensitive":true,"mode":"buffer","correction":"x"}`))
	f.Add([]byte(`{"markers":[]}`))
	f.Add([]byte(`{"markers":["a","a","ab"],"mode":"holdback"}`))
	f.Add([]byte(`{"markers":["\u0041"]} `))
	f.Fuzz(func(t *testing.T, cfg []byte) {
		g, err := parseConfig(cfg)
		if err != nil {
			return
		}
		if len(g.markers) == 0 || g.ac == nil {
			t.Fatalf("accepted %q without markers", cfg)
		}
		for _, m := range g.markers {
			for i := 0; i < len(m); i++ {
				if !isURLByte[m[i]] {
					t.Fatalf("accepted marker %q", m)
				}
			}
		}
	})
}

// FuzzHoldbackEvidence reads any body: no panic, and every evidence URL is
// a run of URL bytes within the limits.
func FuzzHoldbackEvidence(f *testing.F) {
	f.Add([]byte(`{"messages":[{"role":"tool","content":"see https://x.net/a.png"}]}`))
	f.Add([]byte(`{"messages":[{"role":"tool","content":"{\"u\":\"https:\\/\\/x.net\\/a\"}"}]}`))
	f.Add([]byte(`{"messages":[{"role":"assistant","tool_calls":[{"function":{"arguments":"x.net/y"}}]}]}`))
	f.Add([]byte(`{"input":[{"type":"function_call_output","output":["x.net"]}]}`))
	g := mustGuard(f, `{"markers":["x.net", "net/a"]}`)
	f.Fuzz(func(t *testing.T, body []byte) {
		ev, _ := g.collectEvidence(body, nil)
		total := 0
		ev.each(func(u []byte) bool {
			total += 4 + len(u)
			if len(u) == 0 || len(u) > maxURL {
				t.Fatalf("URL of %d bytes", len(u))
			}
			for _, c := range u {
				if !isURLByte[c] {
					t.Fatalf("URL %q has a byte that ends URLs", u)
				}
			}
			return true
		})
		if total != len(ev) || total > maxEvidenceBytes {
			t.Fatalf("evidence of %d bytes, %d read", len(ev), total)
		}
	})
}

// FuzzHoldbackStream cuts a text into events at the bytes of cuts: the
// client's text and the held text always make up the upstream text, no
// marker reaches the client, and without a marker the reply is the text.
func FuzzHoldbackStream(f *testing.F) {
	f.Add("see https://oaidalle.blob/x.png ok", []byte{3, 9, 1})
	f.Add("oaidalle.bl oaidalle.blob", []byte{1, 1, 1, 1})
	f.Add("", []byte{})
	f.Fuzz(func(t *testing.T, text string, cuts []byte) {
		g := mustGuard(t, `{"markers":["oaidalle.blob", "dallex", "b/x"], "correction":"!"}`)
		s := newSim(g, `{}`)
		fed := 0
		for i := 0; fed < len(text) && !s.stopped; i++ {
			n := len(text) - fed
			if i < len(cuts) {
				n = min(n, int(cuts[i]))
			}
			s.send(t, text[fed:fed+n], 0)
			fed += n
			if s.stopped {
				break
			}
			if out := s.out.String(); out+s.heldText(t) != text[:fed] || firstMarkerEnd(g.markers, out, false) >= 0 {
				t.Fatalf("%q after %d: out %q held %q", text, fed, out, s.heldText(t))
			}
		}
		got := s.stream(t, nil)
		if firstMarkerEnd(g.markers, text, false) < 0 && got != text {
			t.Fatalf("%q: got %q", text, got)
		}
		if e := firstMarkerEnd(g.markers, text, false); e >= 0 && !bytes.HasSuffix([]byte(got), []byte("!")) {
			t.Fatalf("%q: got %q", text, got)
		}
	})
}
