package hostsvc

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/budget"
	"github.com/tollgate/tollgate/gateway/internal/limiter"

	"github.com/tollgate/tollgate/sdk/wasmbuild"
	"github.com/tollgate/tollgate/sdk/wasmhost"
)

// A plugin can dispatch the host's services instead of calling them: the
// Session has no Dispatcher, so the host calls them after the guest
// returned, with no instance checked out, and hands the result to
// on_call_response with status 0.
func TestDispatchedHostService(t *testing.T) {
	path, err := wasmbuild.Cached("../../../sdk/wasmhost/testdata/testplugin")
	if err != nil {
		t.Fatal(err)
	}
	mod, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	h, err := wasmhost.NewHost("", slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	cfg := `{"request":["dispatch:ratelimit.admit=fail_closed 1 0\nanon 1 100","dispatch:budget.reserve=10 100 60000","pause"],` +
		`"call_response":["record_response","pause_until:2"]}`
	pl, err := wasmhost.NewPipeline(context.Background(), h, []wasmhost.Spec{{Name: "d", Module: mod, Config: []byte(cfg)}})
	if err != nil {
		t.Fatal(err)
	}
	defer pl.Close()
	// The limiter's clock stands still: the refusal's retry-after is the
	// whole minute however long the first subtest took.
	now := time.Unix(1_800_000_000, 0)
	set := NewSet(Config{
		Log:     slog.New(slog.NewTextHandler(io.Discard, nil)),
		Tenants: fuzzTenants{}, Prices: fuzzPrices{},
		Limiter: limiter.NewMemory(func() time.Time { return now }), Budget: budget.NewMemory(nil, nil),
	})
	tests := []struct{ name, want string }{
		{"admitted", "0:0:allowed:;1:0:notenant:;"},
		{"limited", "0:0:limited requests 1 60000:;1:0:notenant:;"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var sv Session
			sv.Bind(set)
			r := wasmhost.AcquireRequest()
			defer wasmhost.ReleaseRequest(r)
			r.Model, r.RequestID, r.Services = []byte("mock-1"), []byte("req-"+tt.name), &sv
			if err := pl.Request(r); err != nil {
				t.Fatal(err)
			}
			got, _ := r.Fact("responses")
			if string(got) != tt.want {
				t.Fatalf("responses %q, want %q", got, tt.want)
			}
			// ratelimit.admit set its headers, as through `call`.
			if !strings.Contains(headerNames(r.SetClientHeaders), "x-ratelimit-limit-requests") {
				t.Errorf("client headers %q", headerNames(r.SetClientHeaders))
			}
		})
	}
}

func headerNames(hs []wasmhost.Header) string {
	var b strings.Builder
	for _, h := range hs {
		b.WriteString(strings.ToLower(string(h.Name)) + ",")
	}
	return b.String()
}
