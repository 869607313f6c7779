package wasmhost

import (
	"context"
	"runtime"
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
// "Where the time goes at 1 concurrent"):
//
//	go test -run '^$' -bench BuiltinPlugins -count 5 ./gateway/wasm
func BenchmarkBuiltinPlugins(b *testing.B) {
	load := func(name string) []byte { return builtModule(b, "../../plugins/"+name) }
	specs := []Spec{
		{Name: "preflight", Module: load("preflight")},
		{Name: "ratelimit", Module: load("ratelimit"), Config: []byte(`{"default_max_tokens":64}`)},
		{Name: "budget", Module: load("budget"), Config: []byte(`{"default_max_tokens":64}`)},
		{Name: "holdback", Module: load("holdback"), OnError: FailClosed,
			Config: []byte(`{"markers":["oaidalleapiprodscus.blob.core.windows.net","files.oaiusercontent.com"],"case_insensitive":true}`)},
	}
	pl, err := NewPipeline(context.Background(), testHost(b), specs)
	if err != nil {
		b.Fatal(err)
	}
	defer pl.Close()
	reply := []byte("Hello! This is the mock's reply of twenty tokens, more or less, as the benchmark sees it.")
	exchange := func() {
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
	for range 1000 {
		exchange()
	}
	b.Run("warm", func(b *testing.B) {
		// The services answer inline: the work is this thread's, and
		// cpu-ns/op its CPU time (waits for a CPU on a loaded machine
		// not counted).
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		cpu0, cpuOK := threadCPUTime()
		for b.Loop() {
			exchange()
		}
		if cpu1, ok := threadCPUTime(); ok && cpuOK {
			b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "cpu-ns/op")
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
