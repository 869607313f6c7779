package wasmhost

import (
	"context"
	"strings"
	"testing"
)

// BenchmarkBuiltinPlugins is one non-streamed exchange through the four
// built-in plugins as policies/bench-all4.yaml configures them (request
// phase: preflight, ratelimit, budget; chunk: holdback on the whole
// reply; end), against services that answer at once. "warm" repeats it
// back to back; "cold" first evicts the CPU's caches by writing 32 MiB
// (untimed), which is how a gateway serving one request at a time on a
// busy machine finds the plugins' code and data. The gap between the two
// is the cost of the plugins' memory footprint (docs/BENCHMARKS.md,
// "Where the time goes at 1 concurrent"); "warm-uninterruptible" is "warm"
// without the deadline checks:
//
//	go test -run '^$' -bench BuiltinPlugins -count 5 ./gateway/wasm
func BenchmarkBuiltinPlugins(b *testing.B) {
	pl := builtinPipeline(b, false)
	defer pl.Close()
	exchange := builtinExchange(b, pl)
	for range 1000 {
		exchange()
	}
	b.Run("warm", func(b *testing.B) {
		defer reportCPU(b)()
		for b.Loop() {
			exchange()
		}
	})
	b.Run("cold", func(b *testing.B) {
		flush := make([]byte, 32<<20)
		for b.Loop() {
			b.StopTimer()
			for i := 0; i < len(flush); i += 64 {
				flush[i]++
			}
			b.StartTimer()
			exchange()
		}
	})
	// The same plugins without the deadline checks (interrupt.go): the
	// gap to "warm" is what the checks cost the guests' code.
	b.Run("warm-uninterruptible", func(b *testing.B) {
		benchWarm(b, builtinPipeline(b, true))
	})
}

// benchWarm times exchanges through pl, warmed by 1,000 first, in thread
// CPU, and closes pl.
func benchWarm(b *testing.B, pl *Pipeline) {
	defer pl.Close()
	exchange := builtinExchange(b, pl)
	for range 1000 {
		exchange()
	}
	defer reportCPU(b)()
	for b.Loop() {
		exchange()
	}
}

// BenchmarkBuiltinPluginsEach is BenchmarkBuiltinPlugins/warm with some of
// the plugins: none, each of them (ratelimit and budget after preflight,
// which gives them their tenant), and all four. The differences are what
// each plugin adds to an exchange:
//
//	go test -run '^$' -bench BuiltinPluginsEach -count 3 ./sdk/wasmhost
func BenchmarkBuiltinPluginsEach(b *testing.B) {
	for _, set := range [][]string{nil, {"preflight"}, {"preflight", "ratelimit"}, {"preflight", "budget"}, {"holdback"}, builtinNames} {
		name := "none"
		if len(set) > 0 {
			name = strings.Join(set, "+")
		}
		b.Run(name, func(b *testing.B) {
			benchWarm(b, builtinPipelineOf(b, false, set...))
		})
	}
}

// builtinNames are the four built-in plugins in policies/bench-all4.yaml's
// order.
var builtinNames = []string{"preflight", "ratelimit", "budget", "holdback"}

// builtinPipeline loads the four built-in plugins as
// policies/bench-all4.yaml configures them.
func builtinPipeline(b *testing.B, uninterruptible bool) *Pipeline {
	return builtinPipelineOf(b, uninterruptible, builtinNames...)
}

// builtinPipelineOf loads the built-in plugins named, configured as
// policies/bench-all4.yaml configures them.
func builtinPipelineOf(b *testing.B, uninterruptible bool, names ...string) *Pipeline {
	config := map[string]Spec{
		"preflight": {},
		"ratelimit": {Config: []byte(`{"default_max_tokens":64}`)},
		"budget":    {Config: []byte(`{"default_max_tokens":64}`)},
		"holdback": {OnError: FailClosed,
			Config: []byte(`{"markers":["oaidalleapiprodscus.blob.core.windows.net","files.oaiusercontent.com"],"case_insensitive":true}`)},
	}
	var specs []Spec
	for _, name := range names {
		spec := config[name]
		spec.Name, spec.Module, spec.Uninterruptible = name, builtModule(b, "../../plugins/"+name), uninterruptible
		specs = append(specs, spec)
	}
	pl, err := NewPipeline(context.Background(), testHost(b), specs)
	if err != nil {
		b.Fatal(err)
	}
	return pl
}

// builtinExchange returns one non-streamed exchange through pl.
func builtinExchange(b *testing.B, pl *Pipeline) func() {
	reply := []byte("Hello! This is the mock's reply of twenty tokens, more or less, as the benchmark sees it.")
	return func() {
		r := request(`{"model":"mock-1","messages":[{"role":"user","content":"hi"}],"max_tokens":64}`)
		r.ClientHeader = Headers{{Name: []byte("Authorization"), Value: []byte("Bearer tg_bench_key_0123456789")}}
		r.Services = instantServices{}
		r.MaxTokens, r.Messages, r.PromptTokens, r.PromptChars = 64, 1, 8, 2
		if err := pl.Request(r); err != nil {
			b.Fatal(err)
		}
		if res, err := pl.Chunk(r, reply, ChunkText|ChunkWhole); err != nil || res.Verdict != Continue {
			b.Fatal(res, err)
		}
		r.PromptTokensUsed, r.CompletionTokensUsed, r.Status = 8, 20, 200
		pl.End(r, 1)
		ReleaseRequest(r)
	}
}

// instantServices answers the built-in plugins' service calls as the
// gateway's in-process stores do for a tenant well within its limits.
type instantServices struct{}

func (instantServices) Call(r *Request, name string, req []byte) ([]byte, error) {
	switch name {
	case "tenant.resolve":
		r.Tenant = &Tenant{ID: "bench", KeyID: "bench-1", Plan: "bench", Status: "active",
			RPM: 50_000_000, TPM: 10_000_000_000, BudgetMicros: 1_000_000_000_000_000, MaxTokens: 4096,
			PlanRPM: 50_000_000, PlanTPM: 10_000_000_000, KeyRPM: -1, KeyTPM: -1}
		return []byte("ok\nmock-*"), nil
	case "ratelimit.admit":
		return []byte("allowed"), nil
	case "budget.reserve":
		return []byte("ok 1234 1000000000000000"), nil
	}
	return nil, ErrNoService
}
