package pg_test

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/gateway/internal/limiter"
	"github.com/tollgate/tollgate/gateway/internal/store/pg"
	"github.com/tollgate/tollgate/gateway/internal/tenant"
	"github.com/tollgate/tollgate/gateway/internal/testkit/pgtest"
	"github.com/tollgate/tollgate/migrations"
)

// migrated is a database with the schema applied, copied for each test.
var migrated = &pgtest.Template{Name: "migrated", Prepare: pg.Migrate}

// open returns a Store on a fresh migrated database, and its DSN.
func open(t *testing.T, opts ...pg.Options) (*pg.Store, string) {
	t.Helper()
	db := pgtest.SharedFrom(t, migrated)
	s, err := pg.Open(t.Context(), db.DSN(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s, db.DSN()
}

// connect returns a plain connection, "another client" of the database.
func connect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// countingTracer counts the statements run through a pool.
type countingTracer struct {
	mu   sync.Mutex
	sqls []string
}

func (c *countingTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	c.mu.Lock()
	c.sqls = append(c.sqls, strings.Join(strings.Fields(d.SQL), " "))
	c.mu.Unlock()
	return ctx
}

func (c *countingTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// take returns the statements counted since the last call.
func (c *countingTracer) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.sqls
	c.sqls = nil
	return s
}

func TestMigrateUpDownUp(t *testing.T) {
	dsn := pgtest.Shared(t).DSN()
	ctx := t.Context()
	conn := connect(t, dsn)
	tables := func() []string {
		rows, _ := conn.Query(ctx, `SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1`)
		names, err := pgx.CollectRows(rows, pgx.RowTo[string])
		must(t, err)
		return names
	}
	applied := func() (n int) {
		states, err := pg.MigrateStatus(ctx, dsn)
		must(t, err)
		for _, st := range states {
			if st.Applied {
				n++
			}
		}
		if len(states) != migrationFiles {
			t.Fatalf("MigrateStatus: %d migrations, want %d: %+v", len(states), migrationFiles, states)
		}
		return n
	}
	now := time.Now().UTC()
	wantTables := []string{
		"admin_audit", "admin_tokens", "api_keys", "budget_alerts",
		"call_log",
		"call_log_" + now.Format("2006_01"),
		"call_log_" + pg.MonthStart(now).AddDate(0, 1, 0).Format("2006_01"),
		"goose_db_version", "model_prices", "plans", "spend_month", "tenants",
	}
	slices.Sort(wantTables)

	for round := 1; round <= 2; round++ {
		begin := time.Now()
		must(t, pg.Migrate(ctx, dsn))
		t.Logf("round %d: up took %v", round, time.Since(begin))
		if got := tables(); !slices.Equal(got, wantTables) {
			t.Fatalf("round %d: tables after up = %v, want %v", round, got, wantTables)
		}
		if n := applied(); n != migrationFiles {
			t.Fatalf("round %d: %d migrations applied after up, want %d", round, n, migrationFiles)
		}
		must(t, pg.Migrate(ctx, dsn)) // a no-op
		begin = time.Now()
		must(t, pg.MigrateDownTo(ctx, dsn, 0))
		t.Logf("round %d: down took %v", round, time.Since(begin))
		if got := tables(); !slices.Equal(got, []string{"goose_db_version"}) {
			t.Fatalf("round %d: tables after down = %v, want only goose_db_version", round, got)
		}
		var funcs int
		must(t, conn.QueryRow(ctx, `SELECT count(*) FROM pg_proc WHERE proname LIKE 'tollgate%'`).Scan(&funcs))
		if funcs != 0 || applied() != 0 {
			t.Fatalf("round %d: after down, %d tollgate functions and %d migrations applied", round, funcs, applied())
		}
	}
}

// migrationFiles is how many migrations the binary embeds.
var migrationFiles = func() int {
	files, err := fs.Glob(migrations.FS, "*.sql")
	if err != nil {
		panic(err)
	}
	return len(files)
}()

// A rate limit the limiter would refuse on every request is refused when
// written (00007).
func TestRPMAboveLimiterMaximumRefused(t *testing.T) {
	s, _ := open(t)
	ctx := t.Context()
	err := s.CreatePlan(ctx, tenant.Plan{ID: "huge", Limits: tenant.Limits{RPM: limiter.MaxRPM + 1}})
	if !errors.Is(err, pg.ErrInvalid) {
		t.Fatalf("plan with rpm %d: err = %v, want ErrInvalid", limiter.MaxRPM+1, err)
	}
	must(t, s.CreatePlan(ctx, tenant.Plan{ID: "max", Limits: tenant.Limits{RPM: limiter.MaxRPM}}))
	must(t, s.CreateTenant(ctx, tenant.Tenant{ID: "t", PlanID: "max"}))
	if _, _, err := s.CreateKey(ctx, "t", pg.KeyOptions{Limits: tenant.Limits{RPM: limiter.MaxRPM + 1}}); !errors.Is(err, pg.ErrInvalid) {
		t.Fatalf("key with rpm %d: err = %v, want ErrInvalid", limiter.MaxRPM+1, err)
	}
}

func TestMigrateBadDSN(t *testing.T) {
	err := pg.Migrate(t.Context(), "postgres://postgres@127.0.0.1:1/nothing?connect_timeout=2")
	if err == nil || !strings.Contains(err.Error(), "migrations") {
		t.Fatalf("Migrate against no server: %v; want an error about applying migrations", err)
	}
}

// fixture is the plans, tenants and keys most tests use.
type fixture struct {
	active, revoked, expired, suspended string // keys
	activeKey                           *tenant.Key
}

func seed(t *testing.T, s *pg.Store) fixture {
	t.Helper()
	ctx := t.Context()
	must(t, s.CreatePlan(ctx, tenant.Plan{
		ID: "pro", MonthlyBudgetMicros: 50_000_000,
		Limits:        tenant.Limits{RPM: 600, TPM: 100_000, MaxTokens: 4096},
		AllowedModels: []string{"gpt-4o*", "llama-3-8b"},
	}))
	must(t, s.CreatePlan(ctx, tenant.Plan{ID: "free"}))
	must(t, s.CreateTenant(ctx, tenant.Tenant{ID: "acme", PlanID: "pro"}))
	must(t, s.CreateTenant(ctx, tenant.Tenant{ID: "shady", PlanID: "free", Status: tenant.StatusSuspended}))
	var f fixture
	var err error
	expires := time.Now().Add(time.Hour).UTC().Truncate(time.Microsecond)
	f.active, f.activeKey, err = s.CreateKey(ctx, "acme", pg.KeyOptions{ExpiresAt: expires, Limits: tenant.Limits{RPM: 60}})
	must(t, err)
	var revoked *tenant.Key
	f.revoked, revoked, err = s.CreateKey(ctx, "acme", pg.KeyOptions{})
	must(t, err)
	must(t, s.RevokeKey(ctx, revoked.ID))
	f.expired, _, err = s.CreateKey(ctx, "acme", pg.KeyOptions{ExpiresAt: time.Now().Add(-time.Minute)})
	must(t, err)
	f.suspended, _, err = s.CreateKey(ctx, "shady", pg.KeyOptions{})
	must(t, err)
	return f
}

func TestKeyByHash(t *testing.T) {
	tracer := &countingTracer{}
	s, _ := open(t, pg.Options{Tracer: tracer})
	f := seed(t, s)
	now := time.Now()
	tests := []struct {
		name          string
		key           string
		wantErr       error
		wantStatus    string // the key's
		wantTenant    string
		tenantStatus  string
		wantPlan      string
		usable        bool
		wantEffective tenant.Limits
	}{
		{name: "active", key: f.active, wantStatus: "active", wantTenant: "acme", tenantStatus: "active",
			wantPlan: "pro", usable: true, wantEffective: tenant.Limits{RPM: 60, TPM: 100_000, MaxTokens: 4096}},
		{name: "revoked", key: f.revoked, wantStatus: "revoked", wantTenant: "acme", tenantStatus: "active",
			wantPlan: "pro", wantEffective: tenant.Limits{RPM: 600, TPM: 100_000, MaxTokens: 4096}},
		{name: "expired", key: f.expired, wantStatus: "active", wantTenant: "acme", tenantStatus: "active",
			wantPlan: "pro", wantEffective: tenant.Limits{RPM: 600, TPM: 100_000, MaxTokens: 4096}},
		{name: "suspended tenant", key: f.suspended, wantStatus: "active", wantTenant: "shady",
			tenantStatus: "suspended", wantPlan: "free"},
		{name: "unknown", key: "tg_" + strings.Repeat("x", pg.KeyDigits), wantErr: tenant.ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := tenant.HashKey(tt.key)
			tracer.take()
			snap, err := s.KeyByHash(t.Context(), h)
			if stmts := tracer.take(); len(stmts) != 1 {
				t.Errorf("KeyByHash ran %d statements, want 1: %q", len(stmts), stmts)
			}
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) || snap != nil {
					t.Fatalf("KeyByHash = %+v, %v; want %v", snap, err, tt.wantErr)
				}
				return
			}
			must(t, err)
			if snap.Key.Hash != h || snap.Key.Status != tt.wantStatus || snap.Key.TenantID != tt.wantTenant ||
				snap.Tenant.ID != tt.wantTenant || snap.Tenant.Status != tt.tenantStatus ||
				snap.Tenant.PlanID != tt.wantPlan || snap.Plan.ID != tt.wantPlan {
				t.Fatalf("snapshot = %+v", snap)
			}
			if !strings.HasPrefix(tt.key, snap.Key.Prefix) || len(snap.Key.Prefix) != 11 {
				t.Errorf("prefix %q of key %q…", snap.Key.Prefix, tt.key[:11])
			}
			if got := snap.Usable(now); got != tt.usable {
				t.Errorf("Usable = %v, want %v", got, tt.usable)
			}
			if got := snap.Effective(); got != tt.wantEffective {
				t.Errorf("Effective = %+v, want %+v", got, tt.wantEffective)
			}
			if snap.LoadedAt.IsZero() || snap.LoadedAt.After(time.Now()) {
				t.Errorf("LoadedAt = %v", snap.LoadedAt)
			}
		})
	}

	snap, err := s.KeyByHash(t.Context(), tenant.HashKey(f.active))
	must(t, err)
	if !snap.Key.ExpiresAt.Equal(f.activeKey.ExpiresAt) || snap.Key.ID != f.activeKey.ID {
		t.Errorf("key = %+v, created %+v", snap.Key, *f.activeKey)
	}
	if snap.Plan.MonthlyBudgetMicros != 50_000_000 || !slices.Equal(snap.Plan.AllowedModels, []string{"gpt-4o*", "llama-3-8b"}) {
		t.Errorf("plan = %+v", snap.Plan)
	}

	// A plan update shows in the next read. An admin write is BEGIN, the
	// row's image before, the write, its image after, the audit entry,
	// COMMIT; Price is one statement.
	tracer.take()
	must(t, s.UpdatePlan(t.Context(), tenant.Plan{ID: "pro", Limits: tenant.Limits{TPM: 5}}))
	if stmts := tracer.take(); len(stmts) != 6 {
		t.Errorf("UpdatePlan ran %d statements, want 6: %q", len(stmts), stmts)
	}
	if _, err := s.Price(t.Context(), "gpt-4o", time.Now()); !errors.Is(err, tenant.ErrNotFound) {
		t.Errorf("Price of an unpriced model: %v", err)
	}
	if stmts := tracer.take(); len(stmts) != 1 {
		t.Errorf("Price ran %d statements, want 1: %q", len(stmts), stmts)
	}
	snap, err = s.KeyByHash(t.Context(), tenant.HashKey(f.active))
	must(t, err)
	if want := (tenant.Limits{RPM: 60, TPM: 5}); snap.Effective() != want || snap.Plan.AllowedModels != nil {
		t.Errorf("after UpdatePlan: effective %+v (want %+v), models %q", snap.Effective(), want, snap.Plan.AllowedModels)
	}
}

// TestCreateKeyPlaintextNowhere: the key resolves through its hash, and no
// text, bytea or array column of any table holds the key or its secret part.
func TestCreateKeyPlaintextNowhere(t *testing.T) {
	s, dsn := open(t)
	f := seed(t, s)
	key := f.active
	if !regexp.MustCompile(`^tg_[0-9A-Za-z]{43}$`).MatchString(key) {
		t.Fatalf("key %q…: want tg_ and 43 base62 characters", key[:6])
	}
	snap, err := s.KeyByHash(t.Context(), tenant.HashKey(key))
	must(t, err)
	if snap.Key.ID != f.activeKey.ID {
		t.Fatalf("hash of the key resolves to %q, want %q", snap.Key.ID, f.activeKey.ID)
	}

	conn := connect(t, dsn)
	rows, err := conn.Query(t.Context(), `
SELECT table_name, column_name, data_type FROM information_schema.columns
WHERE table_schema = 'public' AND data_type IN ('text', 'bytea', 'ARRAY', 'character varying', 'jsonb')
ORDER BY 1, 2`)
	must(t, err)
	type column struct{ table, name, typ string }
	var cols []column
	for rows.Next() {
		var c column
		must(t, rows.Scan(&c.table, &c.name, &c.typ))
		cols = append(cols, c)
	}
	must(t, rows.Err())
	// occurrences counts the rows whose column holds needle.
	occurrences := func(c column, needle string) int {
		expr := pgx.Identifier{c.name}.Sanitize()
		switch c.typ {
		case "bytea":
			expr = "encode(" + expr + ", 'escape')"
		case "ARRAY", "jsonb":
			expr += "::text"
		}
		var n int
		must(t, conn.QueryRow(t.Context(), fmt.Sprintf(`SELECT count(*) FROM %s WHERE strpos(%s, $1) > 0`,
			pgx.Identifier{c.table}.Sanitize(), expr), needle).Scan(&n))
		return n
	}
	secret := key[len(pg.KeyPrefix)+8:] // what the display prefix does not show
	scanned := 0
	for _, c := range cols {
		if c.table == "api_keys" {
			scanned++
		}
		for _, needle := range []string{key, secret, secret[:16]} {
			if n := occurrences(c, needle); n != 0 {
				t.Errorf("%s.%s holds the key's plaintext in %d rows", c.table, c.name, n)
			}
		}
	}
	// The scan can find what is there: the display prefix and the hash.
	if scanned < 4 || occurrences(column{"api_keys", "prefix", "text"}, snap.Key.Prefix) != 1 {
		t.Fatalf("scanner broken: %d api_keys columns, prefix not found", scanned)
	}
	var n int
	must(t, conn.QueryRow(t.Context(), `SELECT count(*) FROM api_keys t WHERE strpos(t::text, $1) > 0`,
		hex.EncodeToString(snap.Key.Hash[:])).Scan(&n))
	if n != 1 {
		t.Fatalf("whole-row scan found the key's hash in %d rows, want 1", n)
	}
	// The key's creation is audited, its image without the hash.
	must(t, conn.QueryRow(t.Context(), `SELECT count(*) FROM admin_audit a WHERE resource_id = $1 AND after->>'prefix' = $2`,
		snap.Key.ID, snap.Key.Prefix).Scan(&n))
	if n != 1 {
		t.Fatalf("%d audit rows of the key's creation, want 1", n)
	}
	must(t, conn.QueryRow(t.Context(), `SELECT count(*) FROM admin_audit a WHERE strpos(a::text, $1) > 0 OR a::text LIKE '%key_hash%'`,
		hex.EncodeToString(snap.Key.Hash[:])).Scan(&n))
	if n != 0 {
		t.Fatalf("the audit log holds a key hash in %d rows", n)
	}
	must(t, conn.QueryRow(t.Context(), `SELECT count(*) FROM api_keys t WHERE strpos(t::text, $1) > 0`, secret).Scan(&n))
	if n != 0 {
		t.Fatalf("whole-row scan found the key's plaintext in %d rows", n)
	}
}

func TestPrice(t *testing.T) {
	s, _ := open(t)
	ctx := t.Context()
	jan := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	mar := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	must(t, s.SetPrice(ctx, tenant.Price{Model: "gpt-4o", InputMicrosPerMTok: 5, OutputMicrosPerMTok: 15, EffectiveFrom: jan}))
	must(t, s.SetPrice(ctx, tenant.Price{Model: "gpt-4o", InputMicrosPerMTok: 2, OutputMicrosPerMTok: 8, EffectiveFrom: mar}))
	must(t, s.SetPrice(ctx, tenant.Price{Model: "other", InputMicrosPerMTok: 99, OutputMicrosPerMTok: 99, EffectiveFrom: jan}))
	// Setting the same (model, EffectiveFrom) again replaces the price.
	must(t, s.SetPrice(ctx, tenant.Price{Model: "gpt-4o", InputMicrosPerMTok: 3, OutputMicrosPerMTok: 10, EffectiveFrom: mar}))

	tests := []struct {
		name     string
		model    string
		at       time.Time
		wantFrom time.Time // zero: ErrNotFound
		wantIn   int64
	}{
		{"before any", "gpt-4o", jan.Add(-time.Microsecond), time.Time{}, 0},
		{"at the first", "gpt-4o", jan, jan, 5},
		{"between", "gpt-4o", mar.Add(-time.Microsecond), jan, 5},
		{"at the second", "gpt-4o", mar, mar, 3},
		{"long after", "gpt-4o", mar.AddDate(5, 0, 0), mar, 3},
		{"other time zone", "gpt-4o", mar.In(time.FixedZone("UTC-5", -5*3600)), mar, 3},
		{"unknown model", "nope", mar, time.Time{}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := s.Price(t.Context(), tt.model, tt.at)
			if tt.wantFrom.IsZero() {
				if !errors.Is(err, tenant.ErrNotFound) {
					t.Fatalf("Price = %+v, %v; want ErrNotFound", p, err)
				}
				return
			}
			must(t, err)
			if !p.EffectiveFrom.Equal(tt.wantFrom) || p.InputMicrosPerMTok != tt.wantIn || p.Model != tt.model {
				t.Fatalf("Price = %+v; want from %v, input %d", p, tt.wantFrom, tt.wantIn)
			}
		})
	}
}
