package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate/tollgate/gateway/internal/config"
	"github.com/tollgate/tollgate/gateway/internal/proxy"
	"github.com/tollgate/tollgate/gateway/internal/store/pg"
	"github.com/tollgate/tollgate/gateway/internal/tenant"
	"github.com/tollgate/tollgate/gateway/internal/testkit/mockllm"
	"github.com/tollgate/tollgate/gateway/internal/testkit/pgtest"
	"github.com/tollgate/tollgate/sdk/wasmbuild"
)

// Statement budget of one request through preflight with the Postgres
// store: a warm request (key cached) does no Postgres work before its first
// byte; a cold one reads the key, its tenant and plan in one statement.
const (
	budgetWarm = 0
	budgetCold = 1
)

// countingTracer counts the statements the gateway's pool runs and the
// connections it acquires (pgxpool calls TraceAcquireStart on a
// ConnConfig.Tracer that implements it).
type countingTracer struct{ n, acquires atomic.Int64 }

func (c *countingTracer) TraceAcquireStart(ctx context.Context, _ *pgxpool.Pool, _ pgxpool.TraceAcquireStartData) context.Context {
	c.acquires.Add(1)
	return ctx
}

func (c *countingTracer) TraceAcquireEnd(context.Context, *pgxpool.Pool, pgxpool.TraceAcquireEndData) {
}

func (c *countingTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	// The eviction listener's LISTEN (at start, and after a reconnect) is
	// no request's work.
	if !strings.HasPrefix(strings.TrimSpace(d.SQL), "LISTEN") {
		c.n.Add(1)
	}
	return ctx
}

func (c *countingTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

var migrated = &pgtest.Template{Name: "migrated", Prepare: pgtest.Migrate}

// seedTenant creates a plan, a tenant and a key, and returns the key.
func seedTenant(t *testing.T, st *pg.Store, id string) (string, *tenant.Key) {
	ctx := context.Background()
	if err := st.CreatePlan(ctx, tenant.Plan{ID: "plan-" + id, Limits: tenant.Limits{MaxTokens: 512}}); err != nil {
		t.Fatal(err)
	}
	if err := st.CreateTenant(ctx, tenant.Tenant{ID: id, PlanID: "plan-" + id}); err != nil {
		t.Fatal(err)
	}
	key, k, err := st.CreateKey(ctx, id, pg.KeyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return key, k
}

// pgGateway runs a gateway on the Postgres store with preflight.
func pgGateway(t *testing.T, mockURL, dsn string, tr pgx.QueryTracer) string {
	_, url := pgGatewayServer(t, mockURL, dsn, "{ttl: 30s}", tr)
	return url
}

// pgGatewayWith is pgGateway with the given store.cache section.
func pgGatewayWith(t *testing.T, mockURL, dsn, cache string, tr pgx.QueryTracer) string {
	_, url := pgGatewayServer(t, mockURL, dsn, cache, tr)
	return url
}

func pgGatewayServer(t *testing.T, mockURL, dsn, cache string, tr pgx.QueryTracer) (*proxy.Server, string) {
	wasm, err := wasmbuild.Cached(repoRoot(t) + "/plugins/preflight")
	if err != nil {
		t.Fatal(err)
	}
	// These tests count the tenant store's statements; the call log's
	// (after the reply, on its own pool) would blur them.
	yaml := policy(mockURL, "") + fmt.Sprintf(`
store:
  kind: postgres
  cache: %s
call_log: {enabled: false}
plugins:
  - name: preflight
    path: %s
`, cache, wasm)
	p, err := config.Parse([]byte(yaml), func(k string) (string, bool) {
		switch k {
		case "TOLLGATE_DATABASE_URL":
			return dsn, true
		case "TOLLGATE_ADMIN_TOKEN":
			return adminToken, true
		}
		return "", false
	})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := proxy.New(p, slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})), proxy.WithPGTracer(tr))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { srv.Serve(ln); close(done) }()
	t.Cleanup(func() { srv.Shutdown(0, 2*time.Second); <-done })
	return srv, "http://" + ln.Addr().String()
}

const adminToken = "admin-secret-for-tests"

// TestAdminKeyLifecycle creates a key through the admin API, uses it, and
// revokes it: the replica that took the write evicts at once.
func TestAdminKeyLifecycle(t *testing.T) {
	db := pgtest.SharedFrom(t, migrated)
	_, mockURL := startMock(t, mockllm.Config{Tokens: 1})
	srv, gw := pgGatewayServer(t, mockURL, db.DSN(), "{ttl: 30s}", nil)
	adm := httptest.NewServer(srv.AdminHandler())
	defer adm.Close()
	call := func(method, path, body string) (int, map[string]any) {
		req, _ := http.NewRequest(method, adm.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+adminToken)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		json.NewDecoder(resp.Body).Decode(&m)
		return resp.StatusCode, m
	}
	if st, m := call("POST", "/v1/admin/plans", `{"id":"pro","max_tokens":100}`); st != 201 {
		t.Fatalf("plan: %d %v", st, m)
	}
	if st, m := call("POST", "/v1/admin/tenants", `{"id":"hooli","plan_id":"pro"}`); st != 201 {
		t.Fatalf("tenant: %d %v", st, m)
	}
	st, m := call("POST", "/v1/admin/tenants/hooli/keys", ``)
	key, _ := m["key"].(string)
	if st != 201 || !strings.HasPrefix(key, "tg_") {
		t.Fatalf("key: %d %v", st, m)
	}
	if status, _, body := post(t, gw+"/v1/chat/completions", chatOnce, "Authorization", "Bearer "+key); status != 200 {
		t.Fatalf("new key: %d %s", status, body)
	}
	if status, _, _ := post(t, gw+"/v1/chat/completions", `{"model":"mock-1","max_tokens":500,"messages":[{"role":"user","content":"x"}]}`,
		"Authorization", "Bearer "+key); status != 400 {
		t.Errorf("plan cap not applied: %d", status)
	}
	if st, m := call("POST", "/v1/admin/keys/"+m["id"].(string)+"/revoke", `{"tenant_id":"hooli"}`); st != 200 {
		t.Fatalf("revoke: %d %v", st, m)
	}
	// No wait: the writing replica evicted before answering.
	if status, _, body := post(t, gw+"/v1/chat/completions", chatOnce, "Authorization", "Bearer "+key); status != 401 {
		t.Fatalf("revoked key still works on the writing replica: %d %s", status, body)
	}
	if st, _ := call("GET", "/v1/admin/tenants/hooli/usage", ""); st != 200 {
		t.Errorf("usage: %d", st)
	}
	req, _ := http.NewRequest("GET", adm.URL+"/v1/admin/tenants/hooli/keys", nil)
	req.Header.Set("Authorization", "Bearer wrong")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 401 {
		t.Errorf("wrong admin token: %v %v", resp.StatusCode, err)
	}
}

func TestQueryBudget(t *testing.T) {
	db := pgtest.SharedFrom(t, migrated)
	st, err := pg.Open(context.Background(), db.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	key, _ := seedTenant(t, st, "acme")
	_, mockURL := startMock(t, mockllm.Config{Tokens: 2})
	var tr countingTracer
	gw := pgGateway(t, mockURL, db.DSN(), &tr)

	request := func() (stmts, acquires int64) {
		before, beforeAcq := tr.n.Load(), tr.acquires.Load()
		status, _, body := post(t, gw+"/v1/chat/completions", chatOnce, "Authorization", "Bearer "+key)
		if status != 200 {
			t.Fatalf("status %d: %s", status, body)
		}
		return tr.n.Load() - before, tr.acquires.Load() - beforeAcq
	}
	cold, coldAcq := request()
	warm, warmAcq := request()
	for i := 0; i < 20; i++ {
		s, a := request()
		warm, warmAcq = max(warm, s), max(warmAcq, a)
	}
	line := fmt.Sprintf("HOTPATH-BUDGET pg_statements_warm=%d pg_statements_cold=%d pg_acquires_warm=%d pg_acquires_cold=%d", warm, cold, warmAcq, coldAcq)
	t.Log(line)
	fmt.Println(line)
	if warm > budgetWarm || cold > budgetCold || warmAcq > budgetWarm || coldAcq > budgetCold {
		t.Errorf("Postgres work before the first byte: warm %d statements / %d acquires (budget %d), cold %d / %d (budget %d)",
			warm, warmAcq, budgetWarm, cold, coldAcq, budgetCold)
	}
	// A flood of one bad key reaches Postgres once (negative caching).
	before := tr.n.Load()
	for i := 0; i < 20; i++ {
		if status, _, _ := post(t, gw+"/v1/chat/completions", chatOnce, "Authorization", "Bearer tg_bad"); status != 401 {
			t.Fatalf("bad key: status %d", status)
		}
	}
	if n := tr.n.Load() - before; n > 1 {
		t.Errorf("20 requests with one unknown key ran %d statements, want ≤ 1", n)
	}
}

// TestEvictionReachesOtherReplica revokes a key in Postgres and measures
// how long two gateway processes, whose caches hold the key for 30 s, keep
// accepting it: NOTIFY must evict it within 100 ms.
func TestEvictionReachesOtherReplica(t *testing.T) {
	db := pgtest.SharedFrom(t, migrated)
	st, err := pg.Open(context.Background(), db.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	key, k := seedTenant(t, st, "globex")
	_, mockURL := startMock(t, mockllm.Config{Tokens: 1})
	wasm, err := wasmbuild.Cached(repoRoot(t) + "/plugins/preflight")
	if err != nil {
		t.Fatal(err)
	}
	pol := policy(mockURL, "") + fmt.Sprintf("store:\n  kind: postgres\n  cache: {ttl: 30s}\nplugins:\n  - name: preflight\n    path: %s\n", wasm)
	_, gwA, _ := gatewayProcess(t, pol, "TOLLGATE_DATABASE_URL="+db.DSN())
	_, gwB, _ := gatewayProcess(t, pol, "TOLLGATE_DATABASE_URL="+db.DSN())
	for _, gw := range []string{gwA, gwB} {
		if status, _, body := post(t, gw+"/v1/chat/completions", chatOnce, "Authorization", "Bearer "+key); status != 200 {
			t.Fatalf("warm-up: %d %s", status, body)
		}
	}
	waitListeners(t, db.DSN(), 2)
	if err := st.RevokeKey(context.Background(), k.ID); err != nil {
		t.Fatal(err)
	}
	// From the commit (NOTIFY waits for it; its own time is Postgres's).
	t0 := time.Now()
	for _, gw := range []string{gwA, gwB} {
		for {
			status, _, _ := post(t, gw+"/v1/chat/completions", chatOnce, "Authorization", "Bearer "+key)
			if status == 401 {
				break
			}
			if time.Since(t0) > 2*time.Second {
				t.Fatalf("%s still accepts the revoked key after 2s", gw)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	took := time.Since(t0)
	t.Logf("revocation reached both replicas' caches %v after commit", took)
	if took > 100*time.Millisecond {
		t.Errorf("eviction took %v, want < 100ms", took)
	}
}

// TestCacheAgainstPostgres: with ttl 0s every request reads the key; with
// a short TTL a stale entry is served while one reload runs; 100
// concurrent first requests for one key read it once.
func TestCacheAgainstPostgres(t *testing.T) {
	db := pgtest.SharedFrom(t, migrated)
	st, err := pg.Open(context.Background(), db.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	key, _ := seedTenant(t, st, "umbrella")
	_, mockURL := startMock(t, mockllm.Config{Tokens: 1})
	ok := func(gw string) {
		t.Helper()
		if status, _, body := post(t, gw+"/v1/chat/completions", chatOnce, "Authorization", "Bearer "+key); status != 200 {
			t.Fatalf("status %d: %s", status, body)
		}
	}

	t.Run("ttl 0s reads through", func(t *testing.T) {
		var tr countingTracer
		gw := pgGatewayWith(t, mockURL, db.DSN(), "{ttl: 0s}", &tr)
		for i := 0; i < 5; i++ {
			ok(gw)
		}
		if n := tr.n.Load(); n != 5 {
			t.Errorf("5 requests with ttl 0s ran %d statements, want 5", n)
		}
	})
	t.Run("stale entry served, one reload", func(t *testing.T) {
		var tr countingTracer
		gw := pgGatewayWith(t, mockURL, db.DSN(), "{ttl: 300ms}", &tr)
		ok(gw)
		ok(gw)
		if n := tr.n.Load(); n != 1 {
			t.Fatalf("fresh: %d statements, want 1", n)
		}
		time.Sleep(400 * time.Millisecond)
		for i := 0; i < 5; i++ {
			ok(gw) // the first finds it stale: served, one reload in the background
		}
		time.Sleep(50 * time.Millisecond)
		if n := tr.n.Load(); n != 2 {
			t.Errorf("after the TTL: %d statements in all, want 2 (one reload)", n)
		}
	})
	t.Run("100 concurrent cold requests, one read", func(t *testing.T) {
		var tr countingTracer
		gw := pgGatewayWith(t, mockURL, db.DSN(), "{ttl: 30s}", &tr)
		var wg sync.WaitGroup
		var failed atomic.Int64
		for i := 0; i < 100; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				req, _ := http.NewRequest("POST", gw+"/v1/chat/completions", strings.NewReader(chatOnce))
				req.Header.Set("Authorization", "Bearer "+key)
				resp, err := http.DefaultClient.Do(req)
				if err != nil || resp.StatusCode != 200 {
					failed.Add(1)
				}
				if resp != nil {
					resp.Body.Close()
				}
			}()
		}
		wg.Wait()
		if failed.Load() != 0 || tr.n.Load() != 1 {
			t.Errorf("failed %d, statements %d; want 0 and 1", failed.Load(), tr.n.Load())
		}
	})
}
