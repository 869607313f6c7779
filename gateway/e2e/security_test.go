package e2e

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/gateway/internal/store/pg"
	"github.com/tollgate/tollgate/gateway/internal/tenant"
	"github.com/tollgate/tollgate/gateway/internal/testkit/mockllm"
	"github.com/tollgate/tollgate/gateway/internal/testkit/pgtest"
	"github.com/tollgate/tollgate/gateway/internal/testkit/redistest"
)

// The security tests of tenancy and secrets: one tenant's key never
// reaches another tenant's models, budget or requests; the admin API wants
// its token; API keys are stored only as hashes and never logged. See
// docs/SECURITY.md.

// TestSecurityModelAllowlist: a key whose plan allows one model cannot
// reach another, however the body names it. The upstream decodes bodies
// with encoding/json, as a Go server would: it matches member names
// case-insensitively and keeps the last of repeated ones, so a body the
// gateway read differently would show here.
func TestSecurityModelAllowlist(t *testing.T) {
	rec := startRecorder(t)
	pol := policy(rec.url, "", "mock-*") + fmt.Sprintf(`
store:
  kind: memory
tenants:
  plans:
    - {id: narrow, max_tokens: 64, allowed_models: ["mock-1"]}
  tenants:
    - id: initech
      plan: narrow
      keys: [{id: i-1, key_sha256: %s}]
plugins:
  - name: preflight
    path: %s
`, sha("tg_narrow"), pluginPath(t, "preflight"))
	_, gw := startGateway(t, pol, nil)
	const msgs = `"messages":[{"role":"user","content":"x"}]`
	tests := []struct {
		name, body string
		status     int
	}{
		{"the allowed model", `{"model":"mock-1",` + msgs + `}`, 200},
		{"another model", `{"model":"mock-2",` + msgs + `}`, 403},
		{"the allowed model, then another", `{"model":"mock-1","model":"mock-2",` + msgs + `}`, 400},
		{"another model, then the allowed one", `{"model":"mock-2","model":"mock-1",` + msgs + `}`, 400},
		{"another model under an escaped key", `{"model":"mock-1","mod\u0065l":"mock-2",` + msgs + `}`, 400},
		{"another model under MODEL", `{"model":"mock-1","MODEL":"mock-2",` + msgs + `}`, 400},
		{"another model under Model, first", `{"Model":"mock-2","model":"mock-1",` + msgs + `}`, 400},
		{"the model in another case", `{"model":"MOCK-1",` + msgs + `}`, 404},
		{"the model with a NUL", `{"model":"mock-1\u0000",` + msgs + `}`, 403},
		{"the model with a space", `{"model":"mock-1 ",` + msgs + `}`, 403},
		{"the model as a pattern", `{"model":"mock-*",` + msgs + `}`, 403},
		{"max_tokens over the cap", `{"model":"mock-1","max_tokens":1000,` + msgs + `}`, 400},
		{"max_tokens over the cap under MAX_TOKENS", `{"model":"mock-1","max_tokens":10,"MAX_TOKENS":100000,` + msgs + `}`, 400},
		{"max_tokens over the cap under a Kelvin-sign key", `{"model":"mock-1","max_tokens":10,"max_to\u212aens":100000,` + msgs + `}`, 400},
		{"max_tokens twice", `{"model":"mock-1","max_tokens":100000,"max_tokens":10,` + msgs + `}`, 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, _, body := post(t, gw+"/v1/chat/completions", tt.body, "Authorization", "Bearer tg_narrow")
			got := rec.take()
			for _, r := range got {
				if r.model != "mock-1" || r.maxTokens > 64 {
					t.Fatalf("the upstream served model %q with max_tokens %d for a key allowed mock-1 up to 64 (status %d)", r.model, r.maxTokens, status)
				}
			}
			if status != tt.status || (status == 200) != (len(got) == 1) {
				t.Fatalf("status %d, %d upstream requests; want %d: %s", status, len(got), tt.status, body)
			}
			if status != 200 {
				decodeError(t, body)
			}
		})
	}
}

// counterOf reads the Redis budget counter of tenant's current month (a
// plain tenant id): spent ("" when never charged) and held.
func counterOf(t *testing.T, rds *redistest.Server, tenantID string) (spent, held string) {
	t.Helper()
	k := "tollgate:budget:{" + tenantID + "}:tenant::" + time.Now().UTC().Format("2006-01")
	spent, _ = rds.Do("GET", k+":spent")
	held, _ = rds.Do("HGET", k+":holds", "")
	return spent, held
}

// ledgerOf returns tenant's call_log rows and the sum of their costs.
func ledgerOf(t *testing.T, dsn, tenantID string) (rows, sum int64) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if err := conn.QueryRow(ctx, `SELECT count(*), coalesce(sum(cost_micros), 0)::bigint FROM call_log WHERE tenant_id = $1`, tenantID).Scan(&rows, &sum); err != nil {
		t.Fatal(err)
	}
	return rows, sum
}

func waitLedger(t *testing.T, dsn, tenantID string, n int64) int64 {
	t.Helper()
	for end := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		rows, sum := ledgerOf(t, dsn, tenantID)
		if rows == n {
			return sum
		}
		if time.Now().After(end) {
			t.Fatalf("call_log has %d rows of %s, want %d", rows, tenantID, n)
		}
	}
}

// TestSecurityBudgetIsolation: each tenant pays for its own requests, once
// per request, whatever request ids the clients send. A client's
// X-Request-Id is not the budget hold's id: one id sent with many requests
// neither shares a hold (which would admit them all against one
// reservation) nor makes later requests look settled (which would serve
// them unpaid or refuse them).
func TestSecurityBudgetIsolation(t *testing.T) {
	w := newBudgetWorld(t, 1_000_000)
	ctx := context.Background()
	if err := w.store.CreatePlan(ctx, tenant.Plan{ID: "tight", MonthlyBudgetMicros: 1_500}); err != nil {
		t.Fatal(err)
	}
	keys := map[string]string{"acme": w.key}
	for id, plan := range map[string]string{"globex": "metered", "tight": "tight"} {
		if err := w.store.CreateTenant(ctx, tenant.Tenant{ID: id, PlanID: plan}); err != nil {
			t.Fatal(err)
		}
		k, _, err := w.store.CreateKey(ctx, id, pg.KeyOptions{})
		if err != nil {
			t.Fatal(err)
		}
		keys[id] = k
	}
	// Each request holds ~1,003 µ$ (3 prompt + 100 completion tokens) and
	// is charged ~53 µ$ (5 completion tokens).
	_, mockURL := startMock(t, mockllm.Config{Tokens: 5, Usage: true})
	_, gw := w.gateway(t, w.policy(t, mockURL, `{}`, ""))
	chat := func(tenantID, id string, hdr ...string) (int, []byte) {
		status, _, body := post(t, gw+"/v1/chat/completions", chatMax100,
			append([]string{"Authorization", "Bearer " + keys[tenantID], "X-Request-Id", id}, hdr...)...)
		return status, body
	}

	// One id, three requests in turn: three holds, three charges.
	for i := 0; i < 3; i++ {
		if status, body := chat("acme", "same-id", "X-Mock-Tokens", "5"); status != 200 {
			t.Fatalf("request %d with a repeated X-Request-Id: %d %s", i+1, status, body)
		}
	}
	sum := waitLedger(t, w.dsn, "acme", 3)
	if spent, held := counterOf(t, w.redis, "acme"); spent != fmt.Sprint(sum) || sum <= 0 || (held != "0" && held != "") {
		t.Fatalf("acme's counter says spent %s (held %s); its three requests cost %d µ$", spent, held, sum)
	}

	// One id, four requests at once against a budget that holds one.
	var wg sync.WaitGroup
	statuses := make([]int, 4)
	for i := range statuses {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			statuses[i], _ = chat("tight", "same-id", "X-Mock-TTFT", "500ms")
		}(i)
	}
	wg.Wait()
	ok := 0
	for _, s := range statuses {
		if s == 200 {
			ok++
		} else if s != 429 {
			t.Fatalf("statuses %v: want one 200 and 429s", statuses)
		}
	}
	if ok != 1 {
		t.Fatalf("statuses %v: %d requests admitted against a budget that holds one", statuses, ok)
	}

	// Another tenant, with the ids acme used: charged to itself only.
	acmeBefore, _ := counterOf(t, w.redis, "acme")
	tightBefore, _ := counterOf(t, w.redis, "tight")
	for i := 0; i < 2; i++ {
		if status, body := chat("globex", "same-id"); status != 200 {
			t.Fatalf("globex: %d %s", status, body)
		}
	}
	globexSum := waitLedger(t, w.dsn, "globex", 2)
	if spent, _ := counterOf(t, w.redis, "globex"); spent != fmt.Sprint(globexSum) {
		t.Fatalf("globex's counter %s, its requests cost %d", spent, globexSum)
	}
	if after, _ := counterOf(t, w.redis, "acme"); after != acmeBefore {
		t.Fatalf("acme's counter moved from %s to %s on globex's requests", acmeBefore, after)
	}
	if after, _ := counterOf(t, w.redis, "tight"); after != tightBefore {
		t.Fatalf("tight's counter moved from %s to %s on globex's requests", tightBefore, after)
	}
	// tight cannot hold a larger request; globex still can.
	big := strings.Replace(chatMax100, `"max_tokens":100`, `"max_tokens":200`, 1)
	if status, _, body := post(t, gw+"/v1/chat/completions", big, "Authorization", "Bearer "+keys["tight"]); status != 429 {
		t.Fatalf("tight over its budget: %d %s", status, body)
	}
	if status, _, body := post(t, gw+"/v1/chat/completions", big, "Authorization", "Bearer "+keys["globex"]); status != 200 {
		t.Fatalf("globex after tight ran out: %d %s", status, body)
	}
}

// TestSecurityCancelIsolation: request ids are not secret and a client may
// choose its own, so two tenants' requests can share one. A cancel reaches
// only the caller's own request, on the same replica and across replicas,
// and a tenant whose id looks like a wildcard gets no more.
func TestSecurityCancelIsolation(t *testing.T) {
	rds := redistest.Start(t)
	_, mockURL := startMock(t, mockllm.Config{Tokens: 60, InterToken: 20 * time.Millisecond})
	pol := cancelPolicy(t, mockURL, rds.Addr())
	pol = strings.Replace(pol, "    - {id: globex,", fmt.Sprintf("    - {id: \"*\", plan: p, keys: [{id: s1, key_sha256: %s}]}\n    - {id: globex,", sha("tg_star_c")), 1)
	_, gw1 := startGateway(t, pol, nil)
	_, gw2 := startGateway(t, pol, nil)

	finished := func(t *testing.T, who string, br *bufio.Reader) {
		t.Helper()
		if out := rest(br); !strings.Contains(out, "[DONE]") || strings.Contains(out, "request_cancelled") {
			t.Fatalf("%s's stream was cancelled by another tenant:\n%s", who, tail(out, 300))
		}
	}
	cancelled := func(t *testing.T, who string, br *bufio.Reader) {
		t.Helper()
		if out := rest(br); !strings.Contains(out, "request_cancelled") {
			t.Fatalf("%s's stream was not cancelled:\n%s", who, tail(out, 300))
		}
	}

	t.Run("same replica", func(t *testing.T) {
		g, gbr := openStream(t, gw1, "tg_globex_c", "shared-1")
		defer g.Body.Close()
		a, abr := openStream(t, gw1, "tg_acme_c", "shared-1")
		defer a.Body.Close()
		if st, body := cancelCall(t, gw1, "tg_globex_c", "shared-1"); st != 200 {
			t.Fatalf("globex cancelling its own request: %d %s", st, body)
		}
		cancelled(t, "globex", gbr)
		finished(t, "acme", abr)
	})

	t.Run("across replicas", func(t *testing.T) {
		for i := 0; i < 3; i++ {
			id := fmt.Sprintf("shared-2-%d", i)
			a, abr := openStream(t, gw1, "tg_acme_c", id)
			g, gbr := openStream(t, gw2, "tg_globex_c", id)
			// Both replicas announce the id; a cancel through gw2 for acme
			// goes through Redis. It may read 404 while globex's
			// announcement is the newer one: retry until acme's is.
			st, body := 0, ""
			for end := time.Now().Add(3 * time.Second); st != 200 && time.Now().Before(end); time.Sleep(30 * time.Millisecond) {
				st, body = cancelCall(t, gw2, "tg_acme_c", id)
			}
			if st != 200 {
				t.Fatalf("acme cancelling its own request through the other replica: %d %s", st, body)
			}
			cancelled(t, "acme", abr)
			finished(t, "globex", gbr)
			a.Body.Close()
			g.Body.Close()
		}
	})

	t.Run("a tenant named *", func(t *testing.T) {
		a, abr := openStream(t, gw1, "tg_acme_c", "star-1")
		defer a.Body.Close()
		time.Sleep(2 * pollInterval)
		for _, gw := range []string{gw1, gw2} {
			if st, body := cancelCall(t, gw, "tg_star_c", "star-1"); st != 404 {
				t.Fatalf("tenant * cancelling acme's request: %d %s", st, body)
			}
		}
		finished(t, "acme", abr)
	})
}

// TestSecurityAdminAuth: the admin API answers only to its token, compared
// in constant time (SHA-256 digests), and the public listener serves none
// of it, nor /metrics.
func TestSecurityAdminAuth(t *testing.T) {
	db := pgtest.SharedFrom(t, migrated)
	st, err := pg.Open(context.Background(), db.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	key, _ := seedTenant(t, st, "acme-admin")
	_, mockURL := startMock(t, mockllm.Config{Tokens: 1})
	srv, gw := pgGatewayServer(t, mockURL, db.DSN(), "{ttl: 30s}", nil)
	adm := httptest.NewServer(srv.AdminHandler())
	defer adm.Close()

	get := func(url, auth string) (int, http.Header, string) {
		req, _ := http.NewRequest("GET", url, nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b strings.Builder
		bufio.NewReader(resp.Body).WriteTo(&b)
		return resp.StatusCode, resp.Header, b.String()
	}
	usage := adm.URL + "/v1/admin/tenants/acme-admin/usage"
	for _, auth := range []string{
		"",
		"Bearer",
		"Bearer ",
		"Bearer wrong",
		"Bearer " + adminToken[:len(adminToken)-1],
		"Bearer " + adminToken + "x",
		"Bearer  " + adminToken,
		"bearer " + adminToken,
		"Basic " + adminToken,
		adminToken,
		"Bearer " + strings.ToUpper(adminToken),
		"Bearer " + key, // a tenant's API key
	} {
		status, hdr, body := get(usage, auth)
		if status != 401 || hdr.Get("WWW-Authenticate") == "" || !strings.Contains(body, `"code":"invalid_admin_token"`) || strings.Contains(body, "spend") {
			t.Errorf("Authorization %q: %d %s", auth, status, body)
		}
	}
	if status, _, body := get(usage, "Bearer "+adminToken); status != 200 || !strings.Contains(body, `"tenant_id":"acme-admin"`) {
		t.Fatalf("the right token: %d %s", status, body)
	}
	// The public listener: no admin routes, no metrics, whatever the
	// credentials.
	for _, path := range []string{"/v1/admin/tenants/acme-admin/usage", "/metrics", "/v1/admin/tenants/acme-admin/keys"} {
		for _, auth := range []string{"Bearer " + adminToken, "Bearer " + key} {
			if status, _, body := get(gw+path, auth); status != 404 || !strings.Contains(body, "unknown_url") {
				t.Errorf("public %s with %q: %d %s", path, auth[:10], status, body)
			}
		}
	}
}

// TestSecurityKeysHashedAndNotLogged runs the gateway binary with the
// Postgres store, the admin API, the access log and debug logging, creates
// keys with `tollgate keys` and the admin API, uses them (right, wrong,
// revoked) and the admin token (right and wrong), then checks that no part
// of a key past its display prefix — no 8 characters of it in a row — and
// no 8 characters of the admin token appear in any table, in any Redis key
// or value, in the gateway's log, in /metrics or in `tollgate keys list`,
// and that api_keys holds their SHA-256.
func TestSecurityKeysHashedAndNotLogged(t *testing.T) {
	w := newBudgetWorld(t, 1_000_000)
	_, mockURL := startMock(t, mockllm.Config{Tokens: 3, Usage: true})
	adminAddr := freeAddr(t)
	// Random secrets, so that no 8 characters of them can appear by
	// chance (adminToken is words other text may hold).
	adminToken := "adm_" + randomBase62(t, 32)
	t.Setenv("TOLLGATE_ADMIN_TOKEN", adminToken)
	pol := strings.Replace(w.policy(t, mockURL, `{}`, ""), "drain_timeout: 2s", "drain_timeout: 2s\n  access_log: true", 1) +
		fmt.Sprintf("admin: {listen: %q}\n", adminAddr)
	r := w.startReplica(t, "r0", pol, "-log-level", "debug")
	r.waitReady(t)
	adminURL := "http://" + adminAddr

	cli := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(filepath.Join(binDir, "tollgate"), append([]string{"keys"}, append(args, "-admin", adminURL)...)...)
		cmd.Env = append(os.Environ(), "TOLLGATE_ADMIN_TOKEN="+adminToken)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("tollgate keys %v: %v", args, err)
		}
		return string(out)
	}
	key1 := strings.TrimSpace(cli("create", "-tenant", "acme"))
	req, _ := http.NewRequest("POST", adminURL+"/v1/admin/tenants/acme/keys", nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var created struct{ ID, Key, Prefix string }
	json.NewDecoder(resp.Body).Decode(&created)
	resp.Body.Close()
	key2 := created.Key
	if !strings.HasPrefix(key1, pg.KeyPrefix) || !strings.HasPrefix(key2, created.Prefix) || len(created.Prefix) >= len(key2)-16 {
		t.Fatalf("keys %q, %+v", key1, created)
	}
	wrong := pg.KeyPrefix + randomBase62(t, 43)
	// A wrong admin token that shares all but its last character with
	// the right one: logging what was presented would show the right one.
	last := "x"
	if strings.HasSuffix(adminToken, last) {
		last = "y"
	}
	wrongAdmin := adminToken[:len(adminToken)-1] + last
	for _, c := range []struct {
		token  string
		status int
	}{{adminToken, 200}, {wrongAdmin, 401}} {
		req, _ := http.NewRequest("GET", adminURL+"/v1/admin/tenants/acme/keys", nil)
		req.Header.Set("Authorization", "Bearer "+c.token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.status {
			t.Fatalf("admin API with the token %.6s…: %d, want %d", c.token, resp.StatusCode, c.status)
		}
	}

	chat := func(hdr ...string) int {
		status, _, _ := post(t, r.url+"/v1/chat/completions", chatMax100, hdr...)
		return status
	}
	for _, c := range []struct {
		hdr    []string
		status int
	}{
		{[]string{"Authorization", "Bearer " + key1}, 200},
		{[]string{"Authorization", "bearer " + key1}, 200},
		{[]string{"X-Api-Key", key2}, 200},
		{[]string{"Authorization", "Bearer " + w.key}, 200},
		{[]string{"Authorization", "Bearer " + wrong}, 401},
		{[]string{"Authorization", key1}, 401}, // no scheme
	} {
		if got := chat(c.hdr...); got != c.status {
			t.Fatalf("%s %.12s…: %d, want %d", c.hdr[0], c.hdr[1], got, c.status)
		}
	}
	if st, _ := cancelCall(t, r.url, key2, "no-such-request"); st != 404 {
		t.Fatalf("cancel with a key: %d", st)
	}
	if out := cli("revoke", "-id", created.ID, "-tenant", "acme"); !strings.Contains(out, created.ID) {
		t.Fatalf("revoke: %q", out)
	}
	if got := chat("X-Api-Key", key2); got != 401 {
		t.Fatalf("revoked key: %d", got)
	}
	list := cli("list", "-tenant", "acme")
	w.waitRows(t, 4)
	time.Sleep(200 * time.Millisecond) // the access log line of the last request

	// Stored: the SHA-256 of each key, and no key.
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, w.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, k := range []string{key1, key2, w.key} {
		h := sha256.Sum256([]byte(k))
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM api_keys WHERE key_hash = $1`, h[:]).Scan(&n); err != nil || n != 1 {
			t.Fatalf("api_keys rows with the key's SHA-256: %d %v", n, err)
		}
	}
	var dump strings.Builder
	tables, err := conn.Query(ctx, `SELECT quote_ident(table_name) FROM information_schema.tables WHERE table_schema = 'public'`)
	if err != nil {
		t.Fatal(err)
	}
	names, err := pgx.CollectRows(tables, pgx.RowTo[string])
	if err != nil || len(names) < 5 {
		t.Fatalf("tables %v %v", names, err)
	}
	for _, tbl := range names {
		var s string
		if err := conn.QueryRow(ctx, `SELECT coalesce(string_agg(t::text, E'\n'), '') FROM `+tbl+` t`).Scan(&s); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&dump, "%s:\n%s\n", tbl, s)
	}
	redisDump, err := w.redis.Dump()
	if err != nil || !strings.Contains(redisDump, "acme") {
		t.Fatalf("Redis holds nothing of acme's traffic (%v):\n%s", err, redisDump)
	}
	metrics, err := httpGet(adminURL + "/metrics")
	if err != nil || !strings.Contains(metrics, "tollgate_requests_total") {
		t.Fatalf("metrics: %v", err)
	}
	logs := r.logText()
	if strings.Count(logs, `"msg":"request"`) < 7 || !strings.Contains(logs, `"level":"DEBUG"`) {
		t.Fatalf("the access log or debug logging is off:\n%s", tail(logs, 2000))
	}
	places := map[string]string{"the database": dump.String(), "Redis": redisDump, "the log": logs, "/metrics": metrics, "keys list": list}
	// A key's display prefix is shown on purpose (keys list, api_keys):
	// every 8 characters of it in a row that reach past the prefix must
	// be nowhere. Of the admin token, no 8 characters in a row.
	prefix := len(created.Prefix)
	secrets := []struct {
		name, text string
		from       int // the first window start to look for
	}{
		{"key1", key1, prefix - 7}, {"key2", key2, prefix - 7}, {"the world's key", w.key, prefix - 7},
		{"the wrong key", wrong, prefix - 7}, {"the admin token", adminToken, 0}, {"the wrong admin token", wrongAdmin, 0},
	}
	for _, sec := range secrets {
		for where, text := range places {
			if frag, ok := fragmentIn(text, sec.text, sec.from, 8); ok {
				t.Errorf("%s (%.6s…): %q, %d characters of it, is in %s", sec.name, sec.text, frag, len(frag), where)
			}
		}
	}
}

// fragmentIn reports the first n-byte substring of secret, starting at
// from or later, that text contains.
func fragmentIn(text, secret string, from, n int) (string, bool) {
	for i := max(from, 0); i+n <= len(secret); i++ {
		if strings.Contains(text, secret[i:i+n]) {
			return secret[i : i+n], true
		}
	}
	return "", false
}

// randomBase62 returns n random letters and digits.
func randomBase62(t *testing.T, n int) string {
	t.Helper()
	const digits = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	for i := range b {
		b[i] = digits[int(b[i])%len(digits)]
	}
	return string(b)
}
