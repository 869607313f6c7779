package main

import (
	"testing"

	"github.com/tollgate/tollgate/sdk/plugintest"
)

// BenchmarkPluginRequest is the request callback of the built plugin
// through the gateway's plugin host, for the 2 KB chat request of
// BenchmarkCheck and its five patterns: the host's call, the guest's reads
// of the request and the scan. The request passes.
func BenchmarkPluginRequest(b *testing.B) {
	cfg := `{"deny": [`
	for i, d := range benchDeny {
		if i > 0 {
			cfg += ","
		}
		cfg += jsonString(d)
	}
	cfg += `]}`
	p := plugintest.Load(b, plugintest.Build(b, "."), cfg)
	req := plugintest.Request{Body: string(benchBody)}
	b.ReportAllocs()
	for b.Loop() {
		if res := p.Request(req); res.Err != nil || res.Rejected {
			b.Fatalf("%+v", res)
		}
	}
}

func jsonString(s string) string {
	out := []byte{'"'}
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' || s[i] == '"' {
			out = append(out, '\\')
		}
		out = append(out, s[i])
	}
	return string(append(out, '"'))
}
