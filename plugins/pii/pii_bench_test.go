package main

import (
	"strconv"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/sdk"
	"github.com/tollgate/tollgate/sdk/plugintest"
)

// benchPrompt is about n bytes of prose with personal data, ids, dates
// and versions in it, as a JSON string's contents.
func benchPrompt(n int, pii bool) string {
	parts := []string{
		"Hello, I am writing about my order ORD-2024-000123 placed on 2024-01-15 at 12:30. ",
		"The service runs version 1.2.3 on 10.0.0.1 and logs every 15 minutes. ",
		"The quick brown fox jumps over the lazy dog, and then it sleeps for a while in the sun. ",
	}
	if pii {
		parts = append(parts, "Please contact me at john.doe@example.com or call +1 415 555 0100 after 5 pm. ",
			"My card 4111 1111 1111 1111 was charged twice; refund to GB82 WEST 1234 5698 7654 32. ")
	}
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		b.WriteString(parts[i%len(parts)])
	}
	return b.String()[:n]
}

// BenchmarkPluginRequest10KB is the request phase of the built plugin
// through the gateway's plugin host on a 10 KB user message: "clean" has
// nothing to find (scan only); "redact" has some 60 findings to replace
// (scan, rewrite, state).
func BenchmarkPluginRequest10KB(b *testing.B) {
	p := plugintest.Load(b, plugintest.Build(b, "."), `{"mode":"mask-and-restore"}`)
	for _, tc := range []struct {
		name string
		pii  bool
	}{{"clean", false}, {"redact", true}} {
		body := `{"model":"m","messages":[{"role":"user","content":` + strconv.Quote(benchPrompt(10<<10, tc.pii)) + `}]}`
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if res := p.Request(plugintest.Request{Body: body}); res.Err != nil || res.Rewritten != tc.pii {
					b.Fatalf("%+v", res)
				}
			}
		})
	}
}

// BenchmarkRestoreEvent is the plugin's work for one streamed token
// natively: decode the state, restore, encode.
func BenchmarkRestoreEvent(b *testing.B) {
	p, err := parseConfig([]byte(`{"mode":"mask-and-restore"}`))
	if err != nil {
		b.Fatal(err)
	}
	var toks []string
	for _, w := range strings.Fields(strings.Repeat("Sure, I will write to [EMAIL_1] and call [PHONE_1] about it today. ", 16)) {
		toks = append(toks, " "+w)
	}
	var w replyWork
	var st replyState
	state, next := encodeState(nil, testEntries, nil), []byte(nil)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		entries, held, err := decodeState(st.entries, state)
		if err != nil {
			b.Fatal(err)
		}
		st.entries, st.held = entries, append(st.held[:0], held...)
		p.onEvent(&w, &st, []byte(toks[i%len(toks)]), sdk.ChunkText)
		// Encoded into another buffer: the entries alias this one.
		next = encodeState(next[:0], st.entries, st.held)
		state, next = next, state
		i++
	}
}

// BenchmarkPluginChunk is one chunk callback of the built plugin through
// the host, restoring a masked request's reply token by token.
func BenchmarkPluginChunk(b *testing.B) {
	p := plugintest.Load(b, plugintest.Build(b, "."), `{"mode":"mask-and-restore"}`)
	var toks []string
	for _, w := range strings.Fields(strings.Repeat("Sure, I will write to [EMAIL_1] and call [PHONE_1] about it today. ", 16)) {
		toks = append(toks, " "+w)
	}
	start := func() *plugintest.Session {
		s := p.Session(plugintest.Request{Body: `{"messages":[{"role":"user","content":"mail john@example.com or call +1 415 555 0100"}]}`})
		if res := s.Request(); !res.Rewritten {
			b.Fatalf("%+v", res)
		}
		return s
	}
	s := start()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if i%len(toks) == 0 && i > 0 {
			s.Close()
			s = start()
		}
		if st := s.Send(plugintest.Event{Text: toks[i%len(toks)]}); st.Err != nil {
			b.Fatal(st.Err)
		}
		i++
	}
}
