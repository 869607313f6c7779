package hostsvc

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/gateway/internal/budget"
	"github.com/tollgate/tollgate/gateway/internal/limiter"
	"github.com/tollgate/tollgate/gateway/internal/respcache"
	"github.com/tollgate/tollgate/gateway/internal/tenant"
	"github.com/tollgate/tollgate/sdk/wasmhost"
)

// fuzzKey is the one API key the fuzzed tenant store knows.
const fuzzKey = "tg_fuzzkey"

type fuzzTenants struct{}

func (fuzzTenants) Key(_ context.Context, h tenant.KeyHash) (*tenant.Snapshot, error) {
	if h != tenant.HashKey(fuzzKey) {
		return nil, tenant.ErrNotFound
	}
	return &tenant.Snapshot{
		Key:    tenant.Key{ID: "k1", TenantID: "acme", Hash: h, Status: tenant.StatusActive},
		Tenant: tenant.Tenant{ID: "acme", PlanID: "p", Status: tenant.StatusActive},
		Plan:   tenant.Plan{ID: "p", MonthlyBudgetMicros: 1_000_000, AllowedModels: []string{"mock-*"}, Limits: tenant.Limits{RPM: 60, TPM: 10_000}},
	}, nil
}

type fuzzPrices struct{}

func (fuzzPrices) Price(_ context.Context, model string) (*tenant.Price, error) {
	if !strings.HasPrefix(model, "mock-") {
		return nil, tenant.ErrNotFound
	}
	return &tenant.Price{Model: model, InputMicrosPerMTok: 1_000_000, OutputMicrosPerMTok: 10_000_000}, nil
}

func fuzzServices() *Set { return fuzzServicesWith(nil) }

// fuzzServicesWith is fuzzServices with the cache services on cache (nil:
// without them).
func fuzzServicesWith(cache *respcache.Store) *Set {
	return NewSet(Config{
		Log:     slog.New(slog.NewTextHandler(io.Discard, nil)),
		Tenants: fuzzTenants{}, Prices: fuzzPrices{},
		Limiter: limiter.NewMemory(nil), Budget: budget.NewMemory(nil, nil),
		Cache: cache,
	})
}

// FuzzServiceCall sends a plugin's `call` requests — service names and
// payloads straight from guest memory — to the host services (tenant
// resolution, rate limits, budget, the response cache) on a request with or without a tenant.
// A payload must never panic the host; an answer is a short line of text
// or one of the errors the ABI maps to codes; the headers a service sets
// for the client are well-formed; only the one known key resolves.
func FuzzServiceCall(f *testing.F) {
	f.Add("tenant.resolve", []byte(fuzzKey), false, "mock-1")
	f.Add("tenant.resolve", []byte(fuzzKey+" "), false, "mock-1")
	f.Add("ratelimit.admit", []byte("fail_closed 3 100\ntenant\nkey\nmodel mock-* 10 1000\nanon 5 50"), true, "mock-1")
	f.Add("ratelimit.admit", []byte("fail_open 1 0\nanon 1 1\n\n"), false, "gpt")
	f.Add("ratelimit.admit", []byte("fail_open 1 9223372036854775807\nmodel [ 1 1"), true, "mock-1")
	f.Add("budget.reserve", []byte("10 100 60000"), true, "mock-1")
	f.Add("budget.reserve", []byte("9223372036854775807 9223372036854775807 1"), true, "mock-1")
	f.Add("budget.extend", []byte("1024 60000"), true, "mock-1")
	f.Add("budget.extend", []byte("-1 0"), true, "other")
	f.Add("cache.lookup", []byte("60000 tenant coalesce,refresh 250000"), true, "mock-1")
	f.Add("cache.lookup", []byte("1 shared:team - 0"), false, "mock-1")
	f.Add("cache.lookup", []byte("86400001 shared: coalesce, -1 x"), true, "mock-1")
	f.Add("cache.skip", []byte("no-store"), true, "mock-1")
	f.Add("cache.skip", []byte("a b"), false, "")
	f.Add("nope", []byte{}, false, "")
	// One store for every input: a lookup may find what an earlier one
	// stored.
	cache, err := respcache.New(respcache.Config{})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(cache.Close)
	f.Fuzz(func(t *testing.T, name string, req []byte, withTenant bool, model string) {
		var sv Session
		sv.Bind(fuzzServicesWith(cache))
		defer sv.Reset()
		r := wasmhost.AcquireRequest()
		defer wasmhost.ReleaseRequest(r)
		r.Model, r.RequestID = []byte(model), []byte("req-fuzz")
		r.Endpoint, r.Body = []byte("chat/completions"), []byte(`{"model":"mock-1","messages":[{"role":"user","content":"hi"}]}`)
		if withTenant && name != "tenant.resolve" {
			r.Tenant = &wasmhost.Tenant{ID: "acme", KeyID: "k1", PlanRPM: 60, PlanTPM: 10_000, KeyRPM: 5, KeyTPM: -1, BudgetMicros: 1_000_000}
		}
		orig := bytes.Clone(req)
		out, err := sv.Call(r, name, req)
		if !bytes.Equal(req, orig) {
			t.Fatal("a service changed its request")
		}
		if err != nil {
			if !errors.Is(err, wasmhost.ErrBadServiceRequest) && !errors.Is(err, wasmhost.ErrNoService) && !errors.Is(err, budget.ErrInvalid) {
				t.Fatalf("%s(%q): unexpected error %v", name, req, err)
			}
		} else if len(out) == 0 || len(out) > 4096 || bytes.ContainsAny(out, "\r\x00") {
			t.Fatalf("%s(%q) = %q", name, req, out)
		}
		if name == "tenant.resolve" && err == nil {
			resolved := bytes.HasPrefix(out, []byte("ok"))
			if resolved != (string(req) == fuzzKey) || resolved != (r.Tenant != nil && r.Tenant.ID == "acme") {
				t.Fatalf("key %q resolved %v (answer %q)", req, resolved, out)
			}
		}
		if strings.HasPrefix(name, "cache.") && err == nil {
			// A lookup that answered a miss stores what the request got.
			if sv.CacheWantsReply() {
				sv.CacheStore(context.Background(), &respcache.Entry{Body: []byte(`{"fuzz":1}`), PromptTokens: 3, CompletionTokens: 2})
			}
			hit := bytes.HasPrefix(out, []byte("hit "))
			if hit != (r.Answer.Status == 200) || hit != (sv.CacheOutcome() == CacheHit) {
				t.Fatalf("%s(%q) = %q: answer %d, outcome %v", name, req, out, r.Answer.Status, sv.CacheOutcome())
			}
			if p, q := sv.CacheHitTokens(3, 2); p < 0 || p > 3 || q < 0 || q > 2 || sv.CacheSaved(r) < 0 {
				t.Fatalf("%s(%q): hit tokens %d %d", name, req, p, q)
			}
		}
		for _, h := range r.SetClientHeaders {
			if len(h.Name) == 0 || bytes.ContainsAny(h.Name, "\r\n\x00: ") || bytes.ContainsAny(h.Value, "\r\n\x00") {
				t.Fatalf("%s set header %q: %q", name, h.Name, h.Value)
			}
		}
	})
}
