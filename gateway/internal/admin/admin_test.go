package admin_test

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/gateway/internal/admin"
	"github.com/tollgate/tollgate/gateway/internal/store/pg"
	"github.com/tollgate/tollgate/gateway/internal/tenant"
	"github.com/tollgate/tollgate/gateway/internal/testkit/pgtest"
)

var migrated = &pgtest.Template{Name: "migrated", Prepare: pgtest.Migrate}

const token = "s3cret-admin-token"

// evictions records the Evictor's calls as "kind:value".
type evictions struct {
	mu    sync.Mutex
	calls []string
}

func (e *evictions) add(s string) { e.mu.Lock(); e.calls = append(e.calls, s); e.mu.Unlock() }

func (e *evictions) EvictKey(h tenant.KeyHash) { e.add("key:" + hex.EncodeToString(h[:])) }
func (e *evictions) EvictTenant(id string)     { e.add("tenant:" + id) }
func (e *evictions) EvictPlan(id string)       { e.add("plan:" + id) }
func (e *evictions) EvictPrice(model string)   { e.add("price:" + model) }

// take returns the calls so far and forgets them.
func (e *evictions) take() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	c := e.calls
	e.calls = nil
	return c
}

type env struct {
	srv   *httptest.Server
	store *pg.Store
	dsn   string
	evict *evictions
	log   *bytes.Buffer
}

// newEnv serves the admin API with configured token tok on a migrated
// database of its own.
func newEnv(t *testing.T, tok string, opts ...admin.Option) *env {
	t.Helper()
	db := pgtest.SharedFrom(t, migrated)
	s, err := pg.Open(t.Context(), db.DSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	e := &env{store: s, dsn: db.DSN(), evict: &evictions{}, log: &bytes.Buffer{}}
	log := slog.New(slog.NewTextHandler(&lockedWriter{w: e.log}, nil))
	e.srv = httptest.NewServer(admin.NewHandler(s, e.evict, tok, log, opts...))
	t.Cleanup(e.srv.Close)
	return e
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// do sends a request with the right token and returns status and body.
func (e *env) do(t *testing.T, method, path, body string) (int, string) {
	t.Helper()
	return e.doAuth(t, method, path, body, "Bearer "+token)
}

func (e *env) doAuth(t *testing.T, method, path, body, auth string) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, e.srv.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s %s: Content-Type %q, want application/json", method, path, ct)
	}
	// Every answer of these tests matches openapi.json.
	checkAnswer(t, method, path, resp.StatusCode, b)
	return resp.StatusCode, string(b)
}

// jsonEqual reports whether a and b are the same JSON value.
func jsonEqual(t *testing.T, a, b string) bool {
	t.Helper()
	var va, vb any
	if err := json.Unmarshal([]byte(a), &va); err != nil {
		t.Fatalf("bad JSON %q: %v", a, err)
	}
	if err := json.Unmarshal([]byte(b), &vb); err != nil {
		t.Fatalf("bad JSON %q: %v", b, err)
	}
	return reflect.DeepEqual(va, vb)
}

// apiError is the OpenAI-style error body.
type apiError struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

func parseError(t *testing.T, body string) apiError {
	t.Helper()
	var e apiError
	dec := json.NewDecoder(strings.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil || e.Error.Message == "" || e.Error.Type == "" {
		t.Fatalf("not an OpenAI error body (%v): %s", err, body)
	}
	return e
}

func TestAuth(t *testing.T) {
	t.Parallel()
	e := newEnv(t, token)
	off := newEnv(t, "")
	if err := e.store.CreatePlan(t.Context(), tenant.Plan{ID: "free"}); err != nil {
		t.Fatal(err)
	}
	if err := e.store.CreateTenant(t.Context(), tenant.Tenant{ID: "acme", PlanID: "free"}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		env      *env
		auth     string
		want     int
		wantCode string
	}{
		{"missing", e, "", 401, "invalid_admin_token"},
		{"wrong", e, "Bearer nope", 401, "invalid_admin_token"},
		{"prefix of the right one", e, "Bearer " + token[:5], 401, "invalid_admin_token"},
		{"not bearer", e, "Basic " + token, 401, "invalid_admin_token"},
		{"bare token", e, token, 401, "invalid_admin_token"},
		{"right", e, "Bearer " + token, 200, ""},
		{"none configured, none given", off, "", 503, "admin_disabled"},
		{"none configured, empty bearer", off, "Bearer ", 503, "admin_disabled"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := tt.env.doAuth(t, "GET", "/v1/admin/tenants/acme/keys", "", tt.auth)
			if status != tt.want {
				t.Fatalf("status %d, want %d: %s", status, tt.want, body)
			}
			if tt.wantCode == "" {
				if !jsonEqual(t, body, `{"object":"list","data":[]}`) {
					t.Errorf("body %s", body)
				}
				return
			}
			if got := parseError(t, body); got.Error.Code == nil || *got.Error.Code != tt.wantCode {
				t.Errorf("error %+v, want code %q", got.Error, tt.wantCode)
			}
			if status == 503 && !strings.Contains(body, "admin API has no token configured") {
				t.Errorf("body %s", body)
			}
		})
	}
	for _, en := range []*env{e, off} {
		if strings.Contains(en.log.String(), token) {
			t.Errorf("the log holds the token:\n%s", en.log)
		}
	}
}

// step is one request of a scenario run in order against one database.
type step struct {
	name   string
	method string
	path   string
	body   string
	status int
	// want is the exact JSON answer if it starts with '{', else the error
	// code of an error answer.
	want      string
	wantParam string   // for errors: the param, if any
	evicts    []string // the Evictor calls the request makes
}

func runSteps(t *testing.T, e *env, steps []step) {
	t.Helper()
	for _, s := range steps {
		status, body := e.do(t, s.method, s.path, s.body)
		if status != s.status {
			t.Errorf("%s: %s %s: status %d, want %d: %s", s.name, s.method, s.path, status, s.status, body)
			continue
		}
		if strings.HasPrefix(s.want, "{") {
			if !jsonEqual(t, body, s.want) {
				t.Errorf("%s: body\n %s\nwant\n %s", s.name, body, s.want)
			}
		} else {
			got := parseError(t, body)
			if got.Error.Code == nil || *got.Error.Code != s.want {
				t.Errorf("%s: error %+v, want code %q", s.name, got.Error, s.want)
			}
			if s.wantParam != "" && (got.Error.Param == nil || *got.Error.Param != s.wantParam) {
				t.Errorf("%s: error %+v, want param %q", s.name, got.Error, s.wantParam)
			}
		}
		if got := e.evict.take(); !slices.Equal(got, s.evicts) {
			t.Errorf("%s: evictions %q, want %q", s.name, got, s.evicts)
		}
	}
}

func TestPlansTenantsPrices(t *testing.T) {
	t.Parallel()
	e := newEnv(t, token)
	runSteps(t, e, []step{
		{"create plan", "POST", "/v1/admin/plans",
			`{"id":"pro","monthly_budget_usd":"50.25","rpm":600,"tpm":100000,"max_tokens":4096,"allowed_models":["gpt-4o*"]}`, 201,
			`{"id":"pro","monthly_budget_usd":"50.25","rpm":600,"tpm":100000,"max_tokens":4096,"allowed_models":["gpt-4o*"]}`, "", []string{"plan:pro"}},
		{"create plan, budget as a number", "POST", "/v1/admin/plans", `{"id":"tiny","monthly_budget_usd":0.1}`, 201,
			`{"id":"tiny","monthly_budget_usd":"0.1","rpm":0,"tpm":0,"max_tokens":0,"allowed_models":null}`, "", []string{"plan:tiny"}},
		{"duplicate plan", "POST", "/v1/admin/plans", `{"id":"pro"}`, 409, "already_exists", "", nil},
		{"empty plan id", "POST", "/v1/admin/plans", `{"id":""}`, 400, "invalid_value", "", nil},
		{"negative limit", "POST", "/v1/admin/plans", `{"id":"neg","rpm":-1}`, 400, "invalid_value", "", nil},
		{"budget past micros", "POST", "/v1/admin/plans", `{"id":"x","monthly_budget_usd":"1.0000001"}`, 400, "invalid_body", "", nil},
		{"negative budget", "POST", "/v1/admin/plans", `{"id":"x","monthly_budget_usd":"-1"}`, 400, "invalid_body", "", nil},
		{"budget with exponent", "POST", "/v1/admin/plans", `{"id":"x","monthly_budget_usd":1e3}`, 400, "invalid_body", "", nil},
		{"unknown field", "POST", "/v1/admin/plans", `{"id":"x","budget":5}`, 400, "invalid_body", "budget", nil},
		{"wrong type", "POST", "/v1/admin/plans", `{"id":"x","rpm":"many"}`, 400, "invalid_body", "rpm", nil},
		{"empty body", "POST", "/v1/admin/plans", ``, 400, "invalid_body", "", nil},
		{"trailing data", "POST", "/v1/admin/plans", `{"id":"x"} {}`, 400, "invalid_body", "", nil},
		{"update plan", "PUT", "/v1/admin/plans/pro", `{"monthly_budget_usd":"100","rpm":60}`, 200,
			`{"id":"pro","monthly_budget_usd":"100","rpm":60,"tpm":0,"max_tokens":0,"allowed_models":null}`, "", []string{"plan:pro"}},
		{"create plan with budgets", "POST", "/v1/admin/plans",
			`{"id":"team","budgets":[{"scope":"tenant","window":"month","usd":"100","alerts":[80,100]},{"scope":"key","window":"day","usd":5},{"scope":"user","usd":"0.5"}]}`, 201,
			`{"id":"team","monthly_budget_usd":"0","rpm":0,"tpm":0,"max_tokens":0,"allowed_models":null,"budgets":[{"scope":"tenant","window":"month","usd":"100","alerts":[80,100]},{"scope":"key","window":"day","usd":"5"},{"scope":"user","window":"month","usd":"0.5"}]}`,
			"", []string{"plan:team"}},
		{"budget of unknown scope", "POST", "/v1/admin/plans", `{"id":"x","budgets":[{"scope":"team","usd":1}]}`, 400, "invalid_value", "", nil},
		{"budget twice", "POST", "/v1/admin/plans", `{"id":"x","budgets":[{"scope":"key","usd":1},{"scope":"key","window":"month","usd":2}]}`, 400, "invalid_value", "", nil},
		{"monthly budget twice", "POST", "/v1/admin/plans", `{"id":"x","monthly_budget_usd":3,"budgets":[{"scope":"tenant","usd":1}]}`, 400, "invalid_value", "", nil},
		{"update unknown plan", "PUT", "/v1/admin/plans/nope", `{}`, 404, "not_found", "", nil},
		{"update names the id", "PUT", "/v1/admin/plans/pro", `{"id":"pro"}`, 400, "invalid_body", "id", nil},

		{"create tenant", "POST", "/v1/admin/tenants", `{"id":"acme","plan_id":"pro"}`, 201,
			`{"id":"acme","plan_id":"pro","status":"active"}`, "", []string{"tenant:acme"}},
		{"create suspended tenant", "POST", "/v1/admin/tenants", `{"id":"shady","plan_id":"tiny","status":"suspended"}`, 201,
			`{"id":"shady","plan_id":"tiny","status":"suspended"}`, "", []string{"tenant:shady"}},
		{"duplicate tenant", "POST", "/v1/admin/tenants", `{"id":"acme","plan_id":"tiny"}`, 409, "already_exists", "", nil},
		{"tenant on unknown plan", "POST", "/v1/admin/tenants", `{"id":"new","plan_id":"nope"}`, 404, "not_found", "", nil},
		{"tenant with bad status", "POST", "/v1/admin/tenants", `{"id":"new","plan_id":"pro","status":"gone"}`, 400, "invalid_value", "", nil},
		{"suspend", "PUT", "/v1/admin/tenants/acme/status", `{"status":"suspended"}`, 200,
			`{"id":"acme","status":"suspended"}`, "", []string{"tenant:acme"}},
		{"reactivate", "PUT", "/v1/admin/tenants/acme/status", `{"status":"active"}`, 200,
			`{"id":"acme","status":"active"}`, "", []string{"tenant:acme"}},
		{"status of unknown tenant", "PUT", "/v1/admin/tenants/nope/status", `{"status":"suspended"}`, 404, "not_found", "", nil},
		{"status revoked", "PUT", "/v1/admin/tenants/acme/status", `{"status":"revoked"}`, 400, "invalid_value", "", nil},
		{"status, unknown field", "PUT", "/v1/admin/tenants/acme/status", `{"status":"active","why":"x"}`, 400, "invalid_body", "why", nil},

		{"set price", "PUT", "/v1/admin/prices",
			`{"model":"gpt-4o","input_usd_per_mtok":"2.50","output_usd_per_mtok":10,"effective_from":"2026-01-01T00:00:00Z"}`, 200,
			`{"model":"gpt-4o","input_usd_per_mtok":"2.5","output_usd_per_mtok":"10","effective_from":"2026-01-01T00:00:00Z"}`, "", []string{"price:gpt-4o"}},
		{"set a later price", "PUT", "/v1/admin/prices",
			`{"model":"gpt-4o","input_usd_per_mtok":"0.000001","output_usd_per_mtok":"0","effective_from":"2026-02-01T00:00:00Z"}`, 200,
			`{"model":"gpt-4o","input_usd_per_mtok":"0.000001","output_usd_per_mtok":"0","effective_from":"2026-02-01T00:00:00Z"}`, "", []string{"price:gpt-4o"}},
		{"price without model", "PUT", "/v1/admin/prices", `{"input_usd_per_mtok":"1"}`, 400, "invalid_value", "", nil},
		{"negative price", "PUT", "/v1/admin/prices", `{"model":"m","input_usd_per_mtok":"-1"}`, 400, "invalid_body", "", nil},

		{"usage without spend", "GET", "/v1/admin/tenants/acme/usage", "", 200,
			`{"tenant_id":"acme","month":"` + time.Now().UTC().Format("2006-01") + `","spend_usd":"0","spend_micros":0,"budget_usd":"100","budget_micros":100000000,"remaining_usd":"100","remaining_micros":100000000}`, "", nil},
		{"usage of unknown tenant", "GET", "/v1/admin/tenants/nope/usage", "", 404, "not_found", "", nil},
		{"unknown route", "GET", "/v1/admin/nothing", "", 404, "unknown_route", "", nil},
		{"wrong method", "POST", "/v1/admin/plans/pro", "", 404, "unknown_route", "", nil},
		{"delete a plan with tenants", "DELETE", "/v1/admin/plans/pro", "", 409, "plan_in_use", "", nil},
	})

	// The amounts reached the store exactly.
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, e.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var tiny, pro int64
	if err := conn.QueryRow(ctx, `SELECT (SELECT monthly_budget_micros FROM plans WHERE id = 'tiny'),
		(SELECT monthly_budget_micros FROM plans WHERE id = 'pro')`).Scan(&tiny, &pro); err != nil {
		t.Fatal(err)
	}
	if tiny != 100_000 || pro != 100_000_000 {
		t.Errorf("budgets tiny %d, pro %d micros; want 100000, 100000000", tiny, pro)
	}
	p, err := e.store.Price(ctx, "gpt-4o", time.Date(2026, 1, 15, 0, 0, 0, 0, time.UTC))
	if err != nil || p.InputMicrosPerMTok != 2_500_000 || p.OutputMicrosPerMTok != 10_000_000 {
		t.Errorf("January price %+v (%v), want 2500000/10000000", p, err)
	}
	p, err = e.store.Price(ctx, "gpt-4o", time.Date(2026, 2, 15, 0, 0, 0, 0, time.UTC))
	if err != nil || p.InputMicrosPerMTok != 1 || p.OutputMicrosPerMTok != 0 {
		t.Errorf("February price %+v (%v), want 1/0", p, err)
	}

	// Spend of this month shows; last month's does not.
	month := pg.MonthStart(time.Now())
	if _, err := conn.Exec(ctx, `INSERT INTO spend_month (tenant_id, month, cost_micros) VALUES
		('acme', $1, 1234567), ('acme', $2, 999)`, month.Format(time.DateOnly), month.AddDate(0, -1, 0).Format(time.DateOnly)); err != nil {
		t.Fatal(err)
	}
	runSteps(t, e, []step{
		{"usage with spend", "GET", "/v1/admin/tenants/acme/usage", "", 200,
			`{"tenant_id":"acme","month":"` + month.Format("2006-01") + `","spend_usd":"1.234567","spend_micros":1234567,"budget_usd":"100","budget_micros":100000000,"remaining_usd":"98.765433","remaining_micros":98765433}`, "", nil},
	})
}

// TestPriceDefaultsToNow: a price without effective_from is in force from
// the request on.
func TestPriceDefaultsToNow(t *testing.T) {
	t.Parallel()
	e := newEnv(t, token)
	before := time.Now().Add(-time.Millisecond)
	status, body := e.do(t, "PUT", "/v1/admin/prices", `{"model":"m","input_usd_per_mtok":"3","output_usd_per_mtok":"4"}`)
	if status != 200 {
		t.Fatalf("status %d: %s", status, body)
	}
	var got struct {
		EffectiveFrom time.Time `json:"effective_from"`
	}
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatal(err)
	}
	if got.EffectiveFrom.Before(before) || got.EffectiveFrom.After(time.Now()) {
		t.Errorf("effective_from %v, want about now (%v)", got.EffectiveFrom, before)
	}
	if _, err := e.store.Price(t.Context(), "m", before); err == nil {
		t.Errorf("price in force before the request")
	}
	if p, err := e.store.Price(t.Context(), "m", time.Now()); err != nil || p.InputMicrosPerMTok != 3_000_000 {
		t.Errorf("price now %+v (%v)", p, err)
	}
}

// TestStoreFailure: an error that is not the client's is a 500 whose body
// tells nothing, logged.
func TestStoreFailure(t *testing.T) {
	t.Parallel()
	e := newEnv(t, token)
	e.store.Close()
	status, body := e.do(t, "POST", "/v1/admin/plans", `{"id":"pro"}`)
	if status != 500 {
		t.Fatalf("status %d, want 500: %s", status, body)
	}
	if got := parseError(t, body); got.Error.Type != "server_error" || strings.Contains(got.Error.Message, "closed") {
		t.Errorf("error %+v", got.Error)
	}
	if log := e.log.String(); !strings.Contains(log, "admin request failed") || !strings.Contains(log, "/v1/admin/plans") {
		t.Errorf("log:\n%s", log)
	}
	if got := e.evict.take(); got != nil {
		t.Errorf("evicted %q after a failed write", got)
	}
}

func TestBodyTooLarge(t *testing.T) {
	t.Parallel()
	e := newEnv(t, token)
	big := `{"id":"` + strings.Repeat("x", 2<<20) + `"}`
	status, body := e.do(t, "POST", "/v1/admin/plans", big)
	if status != 413 {
		t.Fatalf("status %d, want 413: %.200s", status, body)
	}
}

// createdKey is the answer to a key's creation.
type createdKey struct {
	ID        string     `json:"id"`
	Key       string     `json:"key"`
	TenantID  string     `json:"tenant_id"`
	Prefix    string     `json:"prefix"`
	Status    string     `json:"status"`
	ExpiresAt *time.Time `json:"expires_at"`
	RPM       int64      `json:"rpm"`
	TPM       int64      `json:"tpm"`
	MaxTokens int64      `json:"max_tokens"`
}

func TestKeys(t *testing.T) {
	t.Parallel()
	e := newEnv(t, token)
	ctx := t.Context()
	if err := e.store.CreatePlan(ctx, tenant.Plan{ID: "pro", Limits: tenant.Limits{RPM: 600}}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"acme", "other"} {
		if err := e.store.CreateTenant(ctx, tenant.Tenant{ID: id, PlanID: "pro"}); err != nil {
			t.Fatal(err)
		}
	}

	status, body := e.do(t, "POST", "/v1/admin/tenants/acme/keys",
		`{"expires_at":"2030-12-31T00:00:00Z","rpm":60,"tpm":1000,"max_tokens":256}`)
	if status != 201 {
		t.Fatalf("create: status %d: %s", status, body)
	}
	var k createdKey
	if err := json.Unmarshal([]byte(body), &k); err != nil {
		t.Fatal(err)
	}
	wantExp := time.Date(2030, 12, 31, 0, 0, 0, 0, time.UTC)
	if !strings.HasPrefix(k.Key, pg.KeyPrefix) || len(k.Key) != len(pg.KeyPrefix)+pg.KeyDigits ||
		!strings.HasPrefix(k.Key, k.Prefix) || len(k.Prefix) >= len(k.Key) || !strings.HasPrefix(k.ID, "key_") ||
		k.TenantID != "acme" || k.Status != "active" || k.ExpiresAt == nil || !k.ExpiresAt.Equal(wantExp) ||
		k.RPM != 60 || k.TPM != 1000 || k.MaxTokens != 256 {
		t.Fatalf("created key %+v", k)
	}
	h := tenant.HashKey(k.Key)
	if got := e.evict.take(); !slices.Equal(got, []string{"key:" + hex.EncodeToString(h[:])}) {
		t.Errorf("create evicted %q, want the new hash (a cached miss)", got)
	}
	if strings.Contains(e.log.String(), k.Key) {
		t.Errorf("the log holds the key:\n%s", e.log)
	}

	// The key works: its hash resolves to its record.
	snap, err := e.store.KeyByHash(ctx, h)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Key.ID != k.ID || snap.Tenant.ID != "acme" || !snap.Usable(time.Now()) ||
		snap.Effective() != (tenant.Limits{RPM: 60, TPM: 1000, MaxTokens: 256}) || !snap.Key.ExpiresAt.Equal(wantExp) {
		t.Errorf("snapshot %+v", snap)
	}

	// The key itself is stored nowhere.
	conn, err := pgx.Connect(ctx, e.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var dump string
	if err := conn.QueryRow(ctx, `SELECT string_agg(row_to_json(k)::text, ' ') FROM api_keys k`).Scan(&dump); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(dump, k.Key) || strings.Contains(dump, k.Key[len(k.Prefix):]) {
		t.Errorf("api_keys holds the key: %s", dump)
	}

	// A second key with an empty body: no expiry, inherited limits.
	status, body = e.do(t, "POST", "/v1/admin/tenants/acme/keys", "")
	if status != 201 {
		t.Fatalf("create with empty body: status %d: %s", status, body)
	}
	var k2 createdKey
	if err := json.Unmarshal([]byte(body), &k2); err != nil {
		t.Fatal(err)
	}
	if k2.Key == "" || k2.Key == k.Key || k2.ExpiresAt != nil || k2.RPM != 0 {
		t.Errorf("second key %+v", k2)
	}
	// A third with its own daily budget.
	status, body = e.do(t, "POST", "/v1/admin/tenants/acme/keys", `{"budget_usd":"2.5","budget_window":"day"}`)
	if status != 201 {
		t.Fatalf("create with a budget: status %d: %s", status, body)
	}
	var k3 createdKey
	if err := json.Unmarshal([]byte(body), &k3); err != nil {
		t.Fatal(err)
	}
	e.evict.take()

	// Listing shows records and prefixes, never keys or hashes.
	status, body = e.do(t, "GET", "/v1/admin/tenants/acme/keys", "")
	if status != 200 {
		t.Fatalf("list: status %d: %s", status, body)
	}
	want := `{"object":"list","data":[
		{"id":"` + k.ID + `","tenant_id":"acme","prefix":"` + k.Prefix + `","status":"active","expires_at":"2030-12-31T00:00:00Z","rpm":60,"tpm":1000,"max_tokens":256},
		{"id":"` + k2.ID + `","tenant_id":"acme","prefix":"` + k2.Prefix + `","status":"active","expires_at":null,"rpm":0,"tpm":0,"max_tokens":0},
		{"id":"` + k3.ID + `","tenant_id":"acme","prefix":"` + k3.Prefix + `","status":"active","expires_at":null,"rpm":0,"tpm":0,"max_tokens":0,"budget_usd":"2.5","budget_window":"day"}]}`
	if !jsonEqual(t, body, want) {
		t.Errorf("list\n %s\nwant\n %s", body, want)
	}
	if strings.Contains(body, k.Key) || strings.Contains(body, hex.EncodeToString(h[:])) || strings.Contains(body, "hash") {
		t.Errorf("list shows a key or hash: %s", body)
	}

	h2 := tenant.HashKey(k2.Key)
	runSteps(t, e, []step{
		{"key of unknown tenant", "POST", "/v1/admin/tenants/nope/keys", `{}`, 404, "not_found", "", nil},
		{"key with negative limit", "POST", "/v1/admin/tenants/acme/keys", `{"tpm":-5}`, 400, "invalid_value", "", nil},
		{"key with a budget per year", "POST", "/v1/admin/tenants/acme/keys", `{"budget_usd":1,"budget_window":"year"}`, 400, "invalid_value", "", nil},
		{"key with a window and no budget", "POST", "/v1/admin/tenants/acme/keys", `{"budget_window":"day"}`, 400, "invalid_value", "", nil},
		{"key with bad expiry", "POST", "/v1/admin/tenants/acme/keys", `{"expires_at":"tomorrow"}`, 400, "invalid_body", "", nil},
		{"key, unknown field", "POST", "/v1/admin/tenants/acme/keys", `{"hash":"00"}`, 400, "invalid_body", "hash", nil},
		{"list of unknown tenant", "GET", "/v1/admin/tenants/nope/keys", "", 404, "not_found", "", nil},
		{"revoke naming another tenant", "POST", "/v1/admin/keys/" + k.ID + "/revoke", `{"tenant_id":"other"}`, 404, "not_found", "tenant_id", nil},
		{"revoke naming an unknown tenant", "POST", "/v1/admin/keys/" + k.ID + "/revoke", `{"tenant_id":"nope"}`, 404, "not_found", "", nil},
		{"revoke with tenant", "POST", "/v1/admin/keys/" + k.ID + "/revoke", `{"tenant_id":"acme"}`, 200,
			`{"id":"` + k.ID + `","status":"revoked"}`, "", []string{"key:" + hex.EncodeToString(h[:])}},
		{"revoke again", "POST", "/v1/admin/keys/" + k.ID + "/revoke", `{"tenant_id":"acme"}`, 200,
			`{"id":"` + k.ID + `","status":"revoked"}`, "", []string{"key:" + hex.EncodeToString(h[:])}},
		{"revoke without tenant", "POST", "/v1/admin/keys/" + k2.ID + "/revoke", "", 200,
			`{"id":"` + k2.ID + `","status":"revoked"}`, "", []string{"key:" + hex.EncodeToString(h2[:])}},
		{"revoke unknown key", "POST", "/v1/admin/keys/key_nope/revoke", "", 404, "not_found", "", nil},
		{"revoke, unknown field", "POST", "/v1/admin/keys/" + k.ID + "/revoke", `{"tenant":"acme"}`, 400, "invalid_body", "tenant", nil},
	})
	for _, hh := range []tenant.KeyHash{h, h2} {
		snap, err := e.store.KeyByHash(ctx, hh)
		if err != nil || snap.Key.Status != tenant.StatusRevoked || snap.Usable(time.Now()) {
			t.Errorf("after revoke: %+v (%v)", snap, err)
		}
	}
}
