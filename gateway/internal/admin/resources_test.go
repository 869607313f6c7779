package admin_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/gateway/internal/admin"
	"github.com/tollgate/tollgate/gateway/internal/store/pg"
	"github.com/tollgate/tollgate/gateway/internal/tenant"
)

// get sends a request and decodes its answer, failing t unless the
// status is want.
func (e *env) get(t *testing.T, method, path, body string, want int) map[string]any {
	t.Helper()
	status, out := e.do(t, method, path, body)
	if status != want {
		t.Fatalf("%s %s: %d, want %d: %s", method, path, status, want, out)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("%s %s: %v: %s", method, path, err, out)
	}
	return m
}

// ids returns the "id" (or field) of each item of a list answer.
func ids(t *testing.T, list map[string]any, field string) []string {
	t.Helper()
	var out []string
	for _, it := range list["data"].([]any) {
		out = append(out, fmt.Sprint(it.(map[string]any)[field]))
	}
	return out
}

// walk pages through a list with limit per page and returns every id.
func (e *env) walk(t *testing.T, path string, limit int, field string) []string {
	t.Helper()
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	var all []string
	cursor := ""
	for range 100 {
		p := fmt.Sprintf("%s%slimit=%d", path, sep, limit)
		if cursor != "" {
			p += "&cursor=" + url.QueryEscape(cursor)
		}
		page := e.get(t, "GET", p, "", 200)
		got := ids(t, page, field)
		if len(got) > limit {
			t.Fatalf("%s: %d items, limit %d", p, len(got), limit)
		}
		all = append(all, got...)
		if page["has_more"] != true {
			if _, has := page["next_cursor"]; has {
				t.Errorf("%s: last page with a next_cursor", p)
			}
			return all
		}
		cursor = page["next_cursor"].(string)
	}
	t.Fatalf("%s: more than 100 pages", path)
	return nil
}

func seedAPI(t *testing.T, e *env) (activeKey string, keyID string) {
	t.Helper()
	e.get(t, "POST", "/v1/admin/plans", `{"id":"pro","monthly_budget_usd":"50","rpm":600,"allowed_models":["gpt-4o*"]}`, 201)
	e.get(t, "POST", "/v1/admin/plans", `{"id":"free"}`, 201)
	e.get(t, "POST", "/v1/admin/plans", `{"id":"spare"}`, 201)
	for _, tn := range []string{"acme", "acorn", "beta"} {
		e.get(t, "POST", "/v1/admin/tenants", `{"id":"`+tn+`","plan_id":"pro"}`, 201)
	}
	e.get(t, "POST", "/v1/admin/tenants", `{"id":"shady","plan_id":"free","status":"suspended"}`, 201)
	k := e.get(t, "POST", "/v1/admin/tenants/acme/keys", `{"rpm":60}`, 201)
	e.get(t, "POST", "/v1/admin/tenants/acme/keys", ``, 201)
	e.get(t, "POST", "/v1/admin/tenants/beta/keys", ``, 201)
	e.evict.take()
	return k["key"].(string), k["id"].(string)
}

func TestPlansAPI(t *testing.T) {
	t.Parallel()
	e := newEnv(t, token)
	seedAPI(t, e)
	if got, want := e.walk(t, "/v1/admin/plans", 2, "id"), []string{"free", "pro", "spare"}; !slices.Equal(got, want) {
		t.Errorf("plans %v, want %v", got, want)
	}
	p := e.get(t, "GET", "/v1/admin/plans/pro", "", 200)
	if p["tenants"] != 3.0 || p["monthly_budget_usd"] != "50" || p["rpm"] != 600.0 {
		t.Errorf("plan pro: %v", p)
	}
	e.get(t, "DELETE", "/v1/admin/plans/spare", "", 200)
	if got := e.evict.take(); !slices.Equal(got, []string{"plan:spare"}) {
		t.Errorf("evictions %v", got)
	}
	e.get(t, "GET", "/v1/admin/plans/spare", "", 404)
	if m := e.get(t, "DELETE", "/v1/admin/plans/free", "", 409); !strings.Contains(fmt.Sprint(m), "plan_in_use") {
		t.Errorf("delete free: %v", m)
	}
}

func TestListQueryErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t, token)
	for _, tc := range []struct{ path, code, param string }{
		{"/v1/admin/plans?limit=0", "invalid_value", "limit"},
		{"/v1/admin/plans?limit=501", "invalid_value", "limit"},
		{"/v1/admin/plans?limit=x", "invalid_value", "limit"},
		{"/v1/admin/plans?cursor=%%%", "invalid_query", ""},
		{"/v1/admin/plans?cursor=!!", "invalid_value", "cursor"},
		{"/v1/admin/plans?cursor=YWJj", "invalid_value", "cursor"},
		{"/v1/admin/plans?plan=x", "invalid_query", "plan"},
		{"/v1/admin/tenants?status=active&status=suspended", "invalid_query", "status"},
		{"/v1/admin/keys?tenant=acme", "invalid_query", "tenant"},
		{"/v1/admin/keys?status=gone", "invalid_value", ""},
		{"/v1/admin/usage?from=2026-13-01", "invalid_value", "from"},
		{"/v1/admin/usage?from=2026-02-01&to=2026-01-01", "invalid_value", "from"},
		{"/v1/admin/usage?from=2020-01-01&to=2026-01-01", "invalid_value", "from"},
		{"/v1/admin/usage?group_by=week", "invalid_value", "group_by"},
		{"/v1/admin/guard-actions?cursor=YWJj", "invalid_value", "cursor"},
		{"/v1/admin/overview?x=1", "invalid_query", "x"},
		{"/v1/admin/policy?x=1", "invalid_query", "x"},
	} {
		status, body := e.do(t, "GET", tc.path, "")
		if status != 400 {
			t.Errorf("GET %s: %d %s, want 400", tc.path, status, body)
			continue
		}
		got := parseError(t, body)
		if status != 400 || got.Error.Code == nil || *got.Error.Code != tc.code ||
			(tc.param != "" && (got.Error.Param == nil || *got.Error.Param != tc.param)) {
			t.Errorf("GET %s: %d %s, want 400 %s param %q", tc.path, status, body, tc.code, tc.param)
		}
	}
}

func TestTenantsAPI(t *testing.T) {
	t.Parallel()
	e := newEnv(t, token)
	key, _ := seedAPI(t, e)
	if got, want := e.walk(t, "/v1/admin/tenants", 1, "id"), []string{"acme", "acorn", "beta", "shady"}; !slices.Equal(got, want) {
		t.Errorf("tenants %v, want %v", got, want)
	}
	for q, want := range map[string][]string{
		"q=ac": {"acme", "acorn"}, "plan_id=free": {"shady"}, "status=suspended": {"shady"}, "q=ac&status=suspended": nil,
	} {
		if got := e.walk(t, "/v1/admin/tenants?"+q, 10, "id"); !slices.Equal(got, want) {
			t.Errorf("tenants?%s: %v, want %v", q, got, want)
		}
	}
	a := e.get(t, "GET", "/v1/admin/tenants/acme", "", 200)
	if a["keys_active"] != 2.0 || a["plan_id"] != "pro" || a["status"] != "active" || a["spend_month_usd"] != "0" {
		t.Errorf("tenant acme: %v", a)
	}
	a = e.get(t, "PATCH", "/v1/admin/tenants/acme", `{"plan_id":"free","status":"suspended"}`, 200)
	if a["plan_id"] != "free" || a["status"] != "suspended" {
		t.Errorf("patched acme: %v", a)
	}
	a = e.get(t, "PATCH", "/v1/admin/tenants/acme", `{"plugins":{"guard":{"enabled":false}}}`, 200)
	if toJSON(a["plugins"]) != `{"guard":{"enabled":false}}` || a["plan_id"] != "free" {
		t.Errorf("patched plugins: %v", a)
	}
	a = e.get(t, "PATCH", "/v1/admin/tenants/acme", `{"plugins":null}`, 200)
	if toJSON(a["plugins"]) != `{}` {
		t.Errorf("plugins null: %v", a)
	}
	e.get(t, "PATCH", "/v1/admin/tenants/acme", `{"plan_id":"nope"}`, 404)
	e.get(t, "PATCH", "/v1/admin/tenants/acme", `{"status":"gone"}`, 400)
	e.get(t, "PATCH", "/v1/admin/tenants/acme", `{"name":"x"}`, 400)
	e.get(t, "PATCH", "/v1/admin/tenants/nope", `{"status":"active"}`, 404)
	if got := e.evict.take(); !slices.Equal(got, []string{"tenant:acme", "tenant:acme", "tenant:acme"}) {
		t.Errorf("evictions after the patches: %v (only the one that wrote)", got)
	}
	// The key works until its tenant is deleted, then not at all.
	if snap, err := e.store.KeyByHash(t.Context(), tenant.HashKey(key)); err != nil || snap.Tenant.ID != "acme" {
		t.Fatalf("the key before: %v %v", snap, err)
	}
	e.get(t, "DELETE", "/v1/admin/tenants/acme", "", 200)
	ev := e.evict.take()
	if len(ev) != 3 || ev[2] != "tenant:acme" || !slices.Contains(ev, "key:"+hexHash(key)) {
		t.Errorf("evictions of the delete %v: want both keys, then the tenant", ev)
	}
	if _, err := e.store.KeyByHash(t.Context(), tenant.HashKey(key)); err == nil {
		t.Error("the deleted tenant's key is still found")
	}
	e.get(t, "GET", "/v1/admin/tenants/acme", "", 404)
	e.get(t, "DELETE", "/v1/admin/tenants/acme", "", 404)
}

func TestKeysAPI(t *testing.T) {
	t.Parallel()
	e := newEnv(t, token)
	key, id := seedAPI(t, e)
	all := e.walk(t, "/v1/admin/keys", 2, "id")
	if len(all) != 3 || !slices.IsSorted(all) {
		t.Errorf("keys %v: want 3, by id", all)
	}
	if got := e.walk(t, "/v1/admin/keys?tenant_id=beta", 10, "tenant_id"); !slices.Equal(got, []string{"beta"}) {
		t.Errorf("beta's keys: %v", got)
	}
	k := e.get(t, "GET", "/v1/admin/keys/"+id, "", 200)
	if k["rpm"] != 60.0 || k["tenant_id"] != "acme" || k["created_at"] == nil || k["revoked_at"] != nil || k["key"] != nil {
		t.Errorf("key: %v", k)
	}
	k = e.get(t, "PATCH", "/v1/admin/keys/"+id, `{"rpm":0,"tpm":500,"expires_at":"2030-01-01T00:00:00Z","budget_usd":"2.5"}`, 200)
	if k["rpm"] != 0.0 || k["tpm"] != 500.0 || k["expires_at"] != "2030-01-01T00:00:00Z" || k["budget_usd"] != "2.5" || k["budget_window"] != "month" {
		t.Errorf("patched key: %v", k)
	}
	k = e.get(t, "PATCH", "/v1/admin/keys/"+id, `{"budget_window":"day","expires_at":null}`, 200)
	if k["budget_usd"] != "2.5" || k["budget_window"] != "day" || k["expires_at"] != nil || k["tpm"] != 500.0 {
		t.Errorf("patched window: %v", k)
	}
	k = e.get(t, "PATCH", "/v1/admin/keys/"+id, `{"budget_usd":0}`, 200)
	if _, has := k["budget_usd"]; has {
		t.Errorf("budget 0 should drop the key's own budget: %v", k)
	}
	e.get(t, "PATCH", "/v1/admin/keys/"+id, `{"rpm":-1}`, 400)
	e.get(t, "PATCH", "/v1/admin/keys/"+id, `{"expires_at":"soon"}`, 400)
	e.get(t, "PATCH", "/v1/admin/keys/key_nope", `{"rpm":1}`, 404)
	if got := e.evict.take(); len(got) != 3 || got[0] != "key:"+hexHash(key) {
		t.Errorf("evictions of the patches: %v", got)
	}
	e.get(t, "POST", "/v1/admin/keys/"+id+"/revoke", ``, 200)
	if got := e.walk(t, "/v1/admin/keys?status=revoked", 10, "id"); !slices.Equal(got, []string{id}) {
		t.Errorf("revoked keys: %v", got)
	}
	e.evict.take()
	e.get(t, "DELETE", "/v1/admin/keys/"+id, "", 200)
	if got := e.evict.take(); !slices.Equal(got, []string{"key:" + hexHash(key)}) {
		t.Errorf("evictions of the delete: %v", got)
	}
	e.get(t, "GET", "/v1/admin/keys/"+id, "", 404)
	e.get(t, "DELETE", "/v1/admin/keys/"+id, "", 404)
}

func TestPricesAPI(t *testing.T) {
	t.Parallel()
	e := newEnv(t, token)
	e.get(t, "PUT", "/v1/admin/prices", `{"model":"openai/gpt-4o","input_usd_per_mtok":"2.5","output_usd_per_mtok":"10"}`, 200)
	e.get(t, "PUT", "/v1/admin/prices", `{"model":"llama","input_usd_per_mtok":"0.1","output_usd_per_mtok":"0.2","effective_from":"2020-01-01T00:00:00Z"}`, 200)
	e.get(t, "PUT", "/v1/admin/prices", `{"model":"later","input_usd_per_mtok":"1","output_usd_per_mtok":"1","effective_from":"2099-01-01T00:00:00Z"}`, 200)
	e.evict.take()
	if got, want := e.walk(t, "/v1/admin/prices", 1, "model"), []string{"llama", "openai/gpt-4o"}; !slices.Equal(got, want) {
		t.Errorf("prices %v, want %v (not the later one)", got, want)
	}
	l := e.get(t, "GET", "/v1/admin/prices?model=llama", "", 200)
	if d := l["data"].([]any); len(d) != 1 || d[0].(map[string]any)["source"] != "admin" || d[0].(map[string]any)["input_usd_per_mtok"] != "0.1" {
		t.Errorf("llama: %v", l)
	}
	e.get(t, "DELETE", "/v1/admin/prices/openai/gpt-4o", "", 200)
	if got := e.evict.take(); !slices.Equal(got, []string{"price:openai/gpt-4o"}) {
		t.Errorf("evictions %v", got)
	}
	e.get(t, "DELETE", "/v1/admin/prices/openai/gpt-4o", "", 404)
}

func TestUsageOverviewGuardActionsAPI(t *testing.T) {
	t.Parallel()
	e := newEnv(t, token)
	seedAPI(t, e)
	conn := connectDB(t, e.dsn)
	now := time.Now().UTC()
	if dayStart := now.Truncate(24 * time.Hour); now.Sub(dayStart) < 10*time.Second {
		now = dayStart.Add(10 * time.Second) // the rows below all fall today
	}
	for i := range 5 {
		guard := any(nil)
		if i%2 == 0 {
			guard = "block:kw"
		}
		status := 200
		if i == 4 {
			status = 502
		}
		_, err := conn.Exec(t.Context(), `INSERT INTO call_log (request_id, tenant_id, model, status, started_at, prompt_tokens, completion_tokens, cost_micros, guard_action)
VALUES ($1, $2, $3, $4, $5, 10, 20, 1500000, $6)`, fmt.Sprintf("req_%d", i), []string{"acme", "beta"}[i%2], "m", status, now.Add(-time.Duration(i)*time.Second), guard)
		if err != nil {
			t.Fatal(err)
		}
	}
	_, err := conn.Exec(t.Context(), `INSERT INTO spend_month (tenant_id, month, cost_micros) VALUES ('acme', $1, 4500000), ('beta', $1, 3000000)`, pg.MonthStart(now))
	if err != nil {
		t.Fatal(err)
	}
	u := e.get(t, "GET", "/v1/admin/usage", "", 200)
	d := u["data"].([]any)
	if len(d) != 1 {
		t.Fatalf("usage by day: %v", u)
	}
	row := d[0].(map[string]any)
	if row["day"] != now.Format(time.DateOnly) || row["requests"] != 5.0 || row["errors"] != 1.0 || row["cost_usd"] != "7.5" ||
		row["guard_actions"] != 3.0 || row["prompt_tokens"] != 50.0 {
		t.Errorf("today: %v", row)
	}
	if got := e.walk(t, "/v1/admin/usage?group_by=tenant,model", 1, "tenant_id"); !slices.Equal(got, []string{"acme", "beta"}) {
		t.Errorf("by tenant: %v", got)
	}
	if got := e.walk(t, "/v1/admin/usage?group_by=&tenant_id=beta", 1, "requests"); !slices.Equal(got, []string{"2"}) {
		t.Errorf("beta in one group: %v", got)
	}
	o := e.get(t, "GET", "/v1/admin/overview", "", 200)
	if o["requests"] != 5.0 || o["errors"] != 1.0 || o["error_rate"] != 0.2 || o["guard_actions"] != 3.0 || o["spend_month_usd"] != "7.5" ||
		o["read_only"] != false || o["in_flight"] != nil {
		t.Errorf("overview: %v", o)
	}
	if top := o["top_tenants"].([]any); len(top) != 2 || top[0].(map[string]any)["tenant_id"] != "acme" || top[0].(map[string]any)["requests"] != 3.0 {
		t.Errorf("top tenants: %v", top)
	}
	if got := e.walk(t, "/v1/admin/guard-actions", 2, "request_id"); !slices.Equal(got, []string{"req_0", "req_2", "req_4"}) {
		t.Errorf("guard actions newest first: %v", got)
	}
	if got := e.walk(t, "/v1/admin/guard-actions?tenant_id=acme", 2, "request_id"); !slices.Equal(got, []string{"req_0", "req_2", "req_4"}) {
		t.Errorf("acme's guard actions: %v", got)
	}
	if got := e.walk(t, "/v1/admin/guard-actions?tenant_id=beta", 2, "request_id"); got != nil {
		t.Errorf("beta's guard actions: %v", got)
	}
}

func TestRequestsAndPolicyAPI(t *testing.T) {
	t.Parallel()
	e0 := newEnv(t, token)
	e0.get(t, "GET", "/v1/admin/requests", "", 501)
	p := e0.get(t, "GET", "/v1/admin/policy", "", 200)
	if p["store"] != "postgres" {
		t.Errorf("policy without info: %v", p)
	}
	started := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var reqs []admin.InflightRequest
	for i := range 5 {
		reqs = append(reqs, admin.InflightRequest{ID: fmt.Sprintf("r%d", i), TenantID: []string{"acme", "beta"}[i%2], Model: "m",
			StartedAt: started.Add(time.Duration(5-i) * time.Second), Stream: i == 1, Replica: "gw-1"})
	}
	e := newEnv(t, token,
		admin.WithInflight(func(context.Context) ([]admin.InflightRequest, error) { return slices.Clone(reqs), nil }),
		admin.WithPolicy(func() admin.PolicyInfo {
			msg := "policy.yaml: bad"
			return admin.PolicyInfo{Generation: 3, Reloads: 2, LoadedAt: started, Store: "postgres", LastReloadError: &msg,
				Plugins: []admin.PluginInfo{{Name: "kw", Phases: []string{"request"}, Instances: 2, OnError: "closed", Calls: 9, Events: map[string]int64{"blocked": 1}}}}
		}))
	if got := e.walk(t, "/v1/admin/requests", 2, "id"); !slices.Equal(got, []string{"r4", "r3", "r2", "r1", "r0"}) {
		t.Errorf("requests oldest first: %v", got)
	}
	if got := e.walk(t, "/v1/admin/requests?tenant_id=beta", 1, "id"); !slices.Equal(got, []string{"r3", "r1"}) {
		t.Errorf("beta's: %v", got)
	}
	o := e.get(t, "GET", "/v1/admin/overview", "", 200)
	if o["in_flight"] != 5.0 {
		t.Errorf("overview in_flight %v, want 5", o["in_flight"])
	}
	p = e.get(t, "GET", "/v1/admin/policy", "", 200)
	if p["generation"] != 3.0 || p["last_reload_error"] != "policy.yaml: bad" || len(p["plugins"].([]any)) != 1 {
		t.Errorf("policy: %v", p)
	}
}

func hexHash(key string) string {
	h := tenant.HashKey(key)
	return hex.EncodeToString(h[:])
}

func connectDB(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func toJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
