package e2e

import (
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/store/pg"
)

// TestTenantCacheOutlastsPostgres keeps Postgres down for five times the
// tenant cache's TTL (300 ms here, so the test stays short; the drill's
// short form is down for less than its 3 s TTL and never gets there).
// Promised (docs/POLICY.md, store.cache; docs/RELIABILITY.md, Postgres
// killed): a key the cache holds is served stale while its reloads fail,
// for as long as the outage lasts (up to the 30 s cap on staleness);
// reloads are retried in the background, and fail. A key the cache does
// not hold — a real key never used, or an unknown one no longer
// remembered — cannot be checked: it is refused with 503
// tenant_service_unavailable, neither let through nor called invalid.
// When Postgres returns, the real key is served.
func TestTenantCacheOutlastsPostgres(t *testing.T) {
	const ttl = 300 * time.Millisecond
	w := newDrillWorld(t)
	known := w.tenant(t, "outage-known")
	cold := w.tenant(t, "outage-cold")
	unknown := pg.KeyPrefix + "unknownkeyunknownkeyunknownkey000"
	srv, gw := w.gateway(t, w.policy(t, drillPolicy{cache: "{ttl: 300ms, negative_ttl: 300ms}"}))
	metrics := srv.MetricsHandler()
	chat := func(key string) (int, string) {
		t.Helper()
		status, _, body := post(t, gw+"/v1/chat/completions", chatMax100, "Authorization", "Bearer "+key)
		if status == 200 {
			return status, ""
		}
		if e := decodeError(t, body).Error; e.Code != nil {
			return status, *e.Code
		}
		return status, ""
	}

	if st, _ := chat(known); st != 200 {
		t.Fatalf("before the outage, the known key: %d", st)
	}
	if st, code := chat(unknown); st != 401 || code != "invalid_api_key" {
		t.Fatalf("before the outage, an unknown key: %d %s", st, code)
	}
	stale0 := metric(t, metrics, "tollgate_tenant_cache_lookups_total", `result="stale"`)
	errs0 := metric(t, metrics, "tollgate_tenant_cache_load_errors_total", "")

	if err := w.pg.Kill(); err != nil {
		t.Fatal(err)
	}
	down := time.Now()
	served := 0
	for time.Since(down) < 5*ttl {
		if st, code := chat(known); st != 200 {
			t.Fatalf("%s into the outage (TTL %s), the cached key: %d %s; want it served stale", dur(time.Since(down)), ttl, st, code)
		}
		served++
		time.Sleep(50 * time.Millisecond)
	}
	stale := metric(t, metrics, "tollgate_tenant_cache_lookups_total", `result="stale"`) - stale0
	errs := metric(t, metrics, "tollgate_tenant_cache_load_errors_total", "") - errs0
	// Each stale entry (the key, the model's price) is reloaded at most
	// once a TTL while its reloads fail: over 5 TTLs, at least two failed
	// reloads, and stale lookups for the requests past the first TTL.
	if errs < 2 || stale < float64(served)/2 {
		t.Errorf("over %s of outage, %d requests: %v failed reloads, %v stale lookups; want ≥ 2 and ≥ %d",
			dur(time.Since(down)), served, errs, stale, served/2)
	}
	for _, c := range []struct{ name, key string }{{"a real key not in the cache", cold}, {"an unknown key no longer remembered", unknown}} {
		if st, code := chat(c.key); st != 503 || code != "tenant_service_unavailable" {
			t.Errorf("during the outage, %s: %d %s; want 503 tenant_service_unavailable", c.name, st, code)
		}
	}
	if st, code := chat(known); st != 200 {
		t.Errorf("%s into the outage, the cached key: %d %s", dur(time.Since(down)), st, code)
	}

	if err := w.pg.Start(); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		st, code := chat(cold)
		if st == 200 {
			break
		}
		if st != 503 || time.Now().After(end) {
			t.Fatalf("after Postgres returned, the real key not cached before: %d %s", st, code)
		}
	}
	if st, code := chat(unknown); st != 401 || code != "invalid_api_key" {
		t.Errorf("after Postgres returned, the unknown key: %d %s", st, code)
	}
}
