package main

import (
	"strings"
	"testing"

	"github.com/tollgate/tollgate/sdk"
	"github.com/tollgate/tollgate/sdk/plugintest"
)

// benchText is prose with the odd URL, cut into LLM-sized tokens.
var benchText = strings.Repeat("The quick brown fox jumps over the lazy dog; see https://example.com/a/b.png for more. ", 64)

// benchTokens cuts benchText as LLM tokenizers do, a space before each
// word (" quick"), so the run of URL bytes at the end of each event is not
// empty and the state is written after every event.
func benchTokens() []string {
	var toks []string
	for _, w := range strings.Fields(benchText) {
		toks = append(toks, " "+w)
	}
	return toks
}

const benchConfig = `{"markers":["oaidalleapiprodscus.blob.core.windows.net", "files.oaiusercontent.com", "storage.googleapis.com"]}`

// BenchmarkHoldbackAutomaton is the automaton alone: one step per byte.
func BenchmarkHoldbackAutomaton(b *testing.B) {
	g := mustGuard(b, benchConfig)
	text := []byte(benchText)
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	var s uint16
	for b.Loop() {
		for _, c := range text {
			s = g.ac.step(s, c)
		}
	}
	_ = s
}

// BenchmarkHoldbackEvent is the guard's whole work for one streamed token
// natively, as the plugin does it: decode the state, scan, decide, encode.
func BenchmarkHoldbackEvent(b *testing.B) {
	g := mustGuard(b, benchConfig)
	toks := benchTokens()
	var st reqState
	var state []byte
	n := 0
	for _, t := range toks {
		n += len(t)
	}
	b.SetBytes(int64(n / len(toks)))
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		tok := toks[i%len(toks)]
		i++
		if err := decodeState(&st, state); err != nil {
			b.Fatal(err)
		}
		g.onEvent(&st, []byte(tok), sdk.ChunkText, nil)
		state = st.encode(state[:0])
	}
}

// BenchmarkHoldbackPluginChunk is one chunk callback of the built plugin
// through the gateway's plugin host: "prose" per streamed token (the host's
// call, the guest's state_get, chunk_text, state_set and, where a token
// ends in a marker prefix, emit); "no text" an event the guard passes on
// its flags alone, the floor of any callback. Compare them with
// BenchmarkPhaseCall/chunk in gateway/wasm (a no-op on_chunk).
func BenchmarkHoldbackPluginChunk(b *testing.B) {
	p := plugintest.Load(b, plugintest.Build(b, "."), benchConfig)
	b.Run("prose", func(b *testing.B) {
		toks := benchTokens()
		s := p.Session(plugintest.Request{Body: `{}`})
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if i%len(toks) == 0 && i > 0 {
				s.Close()
				s = p.Session(plugintest.Request{Body: `{}`})
			}
			if st := s.Send(plugintest.Event{Text: toks[i%len(toks)]}); st.Err != nil {
				b.Fatal(st.Err)
			}
			i++
		}
	})
	b.Run("no text", func(b *testing.B) {
		s := p.Session(plugintest.Request{Body: `{}`})
		b.ReportAllocs()
		for b.Loop() {
			if st := s.Send(plugintest.Event{Flags: sdk.ChunkUsage}); st.Err != nil {
				b.Fatal(st.Err)
			}
		}
	})
}
