package pg_test

import (
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/store/pg"
	"github.com/tollgate/tollgate/gateway/internal/tenant"
)

// TestAdminTokens: a token is shown once and resolves by its hash; its
// record is listed and revoked; bad options are refused; the audit log
// holds every write with its actor and neither hash nor token.
func TestAdminTokens(t *testing.T) {
	s, dsn := open(t)
	ctx := pg.WithActor(t.Context(), "bootstrap")
	expires := time.Now().Add(time.Hour).UTC().Truncate(time.Microsecond)
	plain, tok, err := s.CreateAdminToken(ctx, pg.AdminTokenOptions{Name: "ci", Scopes: []string{"cancel", "read", "read"}, ExpiresAt: expires})
	must(t, err)
	if !regexp.MustCompile(`^tgadm_[0-9A-Za-z]{43}$`).MatchString(plain) {
		t.Fatalf("token %q…: want tgadm_ and 43 base62 characters", plain[:8])
	}
	if !regexp.MustCompile(`^tok_[a-z2-7]{16}$`).MatchString(tok.ID) || tok.Prefix != plain[:14] || tok.Name != "ci" ||
		!slices.Equal(tok.Scopes, []string{"read", "cancel"}) || tok.CreatedBy != "bootstrap" || !tok.ExpiresAt.Equal(expires) ||
		!tok.RevokedAt.IsZero() || tok.CreatedAt.IsZero() {
		t.Fatalf("created %+v", tok)
	}
	got, err := s.AdminTokenByHash(t.Context(), pg.HashAdminToken(plain))
	must(t, err)
	if got.ID != tok.ID || !got.Usable(time.Now()) || got.Usable(expires) {
		t.Fatalf("by hash: %+v (usable now %v, at expiry %v)", got, got.Usable(time.Now()), got.Usable(expires))
	}
	if _, err := s.AdminTokenByHash(t.Context(), pg.HashAdminToken(plain+"x")); !errors.Is(err, tenant.ErrNotFound) {
		t.Fatalf("unknown token: %v", err)
	}

	// A token created by a token names it.
	_, second, err := s.CreateAdminToken(pg.WithActor(t.Context(), tok.ID), pg.AdminTokenOptions{Name: "ro", Scopes: []string{"read"}})
	must(t, err)
	if second.CreatedBy != tok.ID || !second.ExpiresAt.IsZero() {
		t.Fatalf("second %+v", second)
	}
	list, err := s.ListAdminTokens(t.Context())
	must(t, err)
	if len(list) != 2 || list[0].ID != tok.ID || list[1].ID != second.ID {
		t.Fatalf("list %+v", list)
	}

	rev, err := s.RevokeAdminToken(ctx, tok.ID)
	must(t, err)
	if rev.RevokedAt.IsZero() || rev.Usable(time.Now()) {
		t.Fatalf("revoked %+v", rev)
	}
	again, err := s.RevokeAdminToken(ctx, tok.ID)
	must(t, err)
	if !again.RevokedAt.Equal(rev.RevokedAt) {
		t.Fatalf("revoking again moved revoked_at from %v to %v", rev.RevokedAt, again.RevokedAt)
	}
	got, err = s.AdminTokenByHash(t.Context(), pg.HashAdminToken(plain))
	must(t, err)
	if got.Usable(time.Now()) {
		t.Fatal("a revoked token is usable on the next lookup")
	}

	for name, err := range map[string]error{
		"unknown scope": second2(s.CreateAdminToken(ctx, pg.AdminTokenOptions{Name: "x", Scopes: []string{"read", "admin"}})),
		"no scope":      second2(s.CreateAdminToken(ctx, pg.AdminTokenOptions{Name: "x"})),
		"no name":       second2(s.CreateAdminToken(ctx, pg.AdminTokenOptions{Scopes: []string{"read"}})),
		"long name":     second2(s.CreateAdminToken(ctx, pg.AdminTokenOptions{Name: strings.Repeat("n", 201), Scopes: []string{"read"}})),
		"expired":       second2(s.CreateAdminToken(ctx, pg.AdminTokenOptions{Name: "x", Scopes: []string{"read"}, ExpiresAt: time.Now().Add(-time.Second)})),
	} {
		if !errors.Is(err, pg.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	if _, err := s.RevokeAdminToken(ctx, "tok_nope"); !errors.Is(err, tenant.ErrNotFound) {
		t.Errorf("revoking an unknown token: %v", err)
	}

	// The audit log: two creations and two revocations, no failed write,
	// no hash, no token.
	entries, err := s.ListAudit(t.Context(), pg.AuditFilter{Resource: "admin_token", Limit: 100})
	must(t, err)
	var rows []string
	for _, e := range entries {
		rows = append(rows, fmt.Sprintf("%s %s %s before=%t after=%t", e.Actor, e.Action, e.ResourceID, e.Before != nil, e.After != nil))
	}
	want := []string{
		"bootstrap admin_token.revoke " + tok.ID + " before=true after=true",
		"bootstrap admin_token.revoke " + tok.ID + " before=true after=true",
		tok.ID + " admin_token.create " + second.ID + " before=false after=true",
		"bootstrap admin_token.create " + tok.ID + " before=false after=true",
	}
	if !slices.Equal(rows, want) {
		t.Fatalf("audit rows\n%q\nwant\n%q", rows, want)
	}
	if !strings.Contains(string(entries[3].After), `"prefix": "`+tok.Prefix+`"`) {
		t.Errorf("creation image %s lacks the prefix", entries[3].After)
	}
	conn := connect(t, dsn)
	h := pg.HashAdminToken(plain)
	var n int
	must(t, conn.QueryRow(t.Context(), `SELECT count(*) FROM admin_audit a WHERE strpos(a::text, $1) > 0 OR strpos(a::text, $2) > 0
    OR a.after ? 'hash' OR a.before ? 'hash'`, hex.EncodeToString(h[:]), plain[14:]).Scan(&n))
	if n != 0 {
		t.Fatalf("%d audit rows hold the token's hash or secret part", n)
	}
	must(t, conn.QueryRow(t.Context(), `SELECT count(*) FROM admin_tokens t WHERE strpos(t::text, $1) > 0`, plain[14:]).Scan(&n))
	if n != 0 {
		t.Fatalf("admin_tokens holds the token's secret part in %d rows", n)
	}
	// The scan can find what is there.
	must(t, conn.QueryRow(t.Context(), `SELECT count(*) FROM admin_tokens t WHERE strpos(t::text, $1) > 0`, hex.EncodeToString(h[:])).Scan(&n))
	if n != 1 {
		t.Fatalf("scanner broken: the hash found in %d rows of admin_tokens, want 1", n)
	}
}

func second2[A, B any](_ A, _ B, err error) error { return err }

// TestAuditEveryWrite: each store write leaves exactly one audit row with
// its action, resource and actor; key images carry no hash; ListAudit
// filters and pages newest first without gaps or repeats.
func TestAuditEveryWrite(t *testing.T) {
	s, _ := open(t)
	ctx := pg.WithActor(t.Context(), "tok_writer")
	must(t, s.CreatePlan(ctx, tenant.Plan{ID: "pro"}))
	must(t, s.UpdatePlan(ctx, tenant.Plan{ID: "pro", Limits: tenant.Limits{RPM: 5}}))
	must(t, s.CreateTenant(ctx, tenant.Tenant{ID: "acme", PlanID: "pro"}))
	must(t, s.SetTenantStatus(ctx, "acme", tenant.StatusSuspended))
	must(t, s.SetTenantPlugins(ctx, "acme", tenant.PluginOverrides{"pii": {Enabled: new(bool)}}))
	_, k, err := s.CreateKey(ctx, "acme", pg.KeyOptions{})
	must(t, err)
	_, err = s.RevokeKeyHash(ctx, k.ID)
	must(t, err)
	must(t, s.RevokeKey(ctx, k.ID))
	from := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	must(t, s.SetPrice(ctx, tenant.Price{Model: "gpt-4o", InputMicrosPerMTok: 1, OutputMicrosPerMTok: 2, EffectiveFrom: from}))
	must(t, s.SetPrice(ctx, tenant.Price{Model: "gpt-4o", InputMicrosPerMTok: 3, OutputMicrosPerMTok: 4, EffectiveFrom: from}))
	// Failed writes leave nothing.
	if err := s.CreatePlan(ctx, tenant.Plan{ID: "pro"}); !errors.Is(err, pg.ErrExists) {
		t.Fatal(err)
	}
	if err := s.SetTenantStatus(ctx, "nope", tenant.StatusActive); !errors.Is(err, tenant.ErrNotFound) {
		t.Fatal(err)
	}
	if _, _, err := s.CreateKey(ctx, "nope", pg.KeyOptions{}); !errors.Is(err, tenant.ErrNotFound) {
		t.Fatal(err)
	}

	all, err := s.ListAudit(t.Context(), pg.AuditFilter{Limit: 100})
	must(t, err)
	var got []string
	for _, e := range all {
		if e.Actor != "tok_writer" {
			t.Errorf("entry %d: actor %q", e.ID, e.Actor)
		}
		if strings.Contains(string(e.Before)+string(e.After), "key_hash") {
			t.Errorf("entry %d (%s) holds a key hash: %s / %s", e.ID, e.Action, e.Before, e.After)
		}
		got = append(got, e.Action+" "+e.Resource+" "+e.ResourceID)
	}
	slices.Reverse(got)
	want := []string{
		"plan.create plan pro", "plan.update plan pro", "tenant.create tenant acme", "tenant.update tenant acme",
		"tenant.update tenant acme", "key.create key " + k.ID, "key.revoke key " + k.ID, "key.revoke key " + k.ID,
		"price.set price gpt-4o", "price.set price gpt-4o",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("audit (oldest first)\n%q\nwant\n%q", got, want)
	}
	// Images: the status change shows before and after; the price's
	// second write shows the first's values before.
	status := all[len(all)-4]
	if !strings.Contains(string(status.Before), `"status": "active"`) || !strings.Contains(string(status.After), `"status": "suspended"`) {
		t.Errorf("status change images %s → %s", status.Before, status.After)
	}
	price := all[0]
	if !strings.Contains(string(price.Before), `"input_micros_per_mtok": 1`) || !strings.Contains(string(price.After), `"input_micros_per_mtok": 3`) {
		t.Errorf("price images %s → %s", price.Before, price.After)
	}

	// Filters.
	keyRows, err := s.ListAudit(t.Context(), pg.AuditFilter{Resource: "key", ResourceID: k.ID, Limit: 10})
	must(t, err)
	if len(keyRows) != 3 {
		t.Errorf("%d rows of key %s, want 3", len(keyRows), k.ID)
	}
	none, err := s.ListAudit(t.Context(), pg.AuditFilter{Actor: "bootstrap", Limit: 10})
	must(t, err)
	if len(none) != 0 {
		t.Errorf("%d rows of actor bootstrap, want 0", len(none))
	}
	// Pages of 3 by cursor: every row once, newest first.
	var paged []int64
	var cursor int64
	for {
		page, err := s.ListAudit(t.Context(), pg.AuditFilter{BeforeID: cursor, Limit: 3})
		must(t, err)
		if len(page) == 0 {
			break
		}
		for _, e := range page {
			paged = append(paged, e.ID)
		}
		cursor = page[len(page)-1].ID
	}
	var ids []int64
	for _, e := range all {
		ids = append(ids, e.ID)
	}
	if !slices.Equal(paged, ids) {
		t.Errorf("paged ids %v, want %v", paged, ids)
	}
	if _, err := s.ListAudit(t.Context(), pg.AuditFilter{}); !errors.Is(err, pg.ErrInvalid) {
		t.Errorf("limit 0: %v", err)
	}
}

// TestAuditConcurrentWrites: concurrent writes to one row each leave one
// entry, and the before images chain: each entry's before is the previous
// entry's after (the image lock serialises them).
func TestAuditConcurrentWrites(t *testing.T) {
	s, _ := open(t)
	must(t, s.CreatePlan(t.Context(), tenant.Plan{ID: "p"}))
	const writers = 8
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for i := range writers {
		wg.Go(func() {
			ctx := pg.WithActor(t.Context(), fmt.Sprintf("tok_%d", i))
			errs <- s.UpdatePlan(ctx, tenant.Plan{ID: "p", Limits: tenant.Limits{RPM: int64(i + 1)}})
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		must(t, err)
	}
	entries, err := s.ListAudit(t.Context(), pg.AuditFilter{Resource: "plan", ResourceID: "p", Limit: 100})
	must(t, err)
	if len(entries) != writers+1 {
		t.Fatalf("%d entries, want %d", len(entries), writers+1)
	}
	for i := 0; i+1 < len(entries); i++ {
		if string(entries[i].Before) != string(entries[i+1].After) {
			t.Errorf("entry %d before %s != entry %d after %s", entries[i].ID, entries[i].Before, entries[i+1].ID, entries[i+1].After)
		}
	}
}
