package main

import (
	"bytes"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/admin"
	"github.com/tollgate/tollgate/gateway/internal/store/pg"
	"github.com/tollgate/tollgate/gateway/internal/tenant"
	"github.com/tollgate/tollgate/gateway/internal/testkit/pgtest"
)

var keysMigrated = &pgtest.Template{Name: "migrated", Prepare: pgtest.Migrate}

// keysServer runs the admin API on a migrated database holding tenant
// "acme", with $TOLLGATE_ADMIN_URL and $TOLLGATE_ADMIN_TOKEN pointing at it.
func keysServer(t *testing.T) *pg.Store {
	t.Helper()
	db := pgtest.SharedFrom(t, keysMigrated)
	s, err := pg.Open(t.Context(), db.DSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	if err := s.CreatePlan(t.Context(), tenant.Plan{ID: "pro"}); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateTenant(t.Context(), tenant.Tenant{ID: "acme", PlanID: "pro"}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(admin.NewHandler(s, nil, "cli-token", slog.New(slog.NewTextHandler(io.Discard, nil))))
	t.Cleanup(srv.Close)
	t.Setenv("TOLLGATE_ADMIN_URL", srv.URL)
	t.Setenv("TOLLGATE_ADMIN_TOKEN", "cli-token")
	return s
}

func runKeys(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = keys(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestKeysCreateListRevoke(t *testing.T) {
	s := keysServer(t)

	code, out, errOut := runKeys(t, "create", "-tenant", "acme", "-expires", "2030-12-31T00:00:00Z", "-rpm", "60")
	if code != 0 {
		t.Fatalf("create: exit %d: %s", code, errOut)
	}
	key := strings.TrimSpace(out)
	if !strings.HasPrefix(key, pg.KeyPrefix) || strings.Contains(key, "\n") {
		t.Fatalf("create printed %q, want the key alone", out)
	}
	if !strings.Contains(errOut, "will not be shown again") {
		t.Errorf("no warning: %q", errOut)
	}
	snap, err := s.KeyByHash(t.Context(), tenant.HashKey(key))
	if err != nil {
		t.Fatal(err)
	}
	if snap.Key.Limits.RPM != 60 || !snap.Key.ExpiresAt.Equal(time.Date(2030, 12, 31, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("key %+v", snap.Key)
	}
	id, prefix := snap.Key.ID, snap.Key.Prefix
	if !strings.Contains(errOut, id) || !strings.Contains(errOut, prefix) {
		t.Errorf("create did not name id %s and prefix %s: %q", id, prefix, errOut)
	}

	row := func(status string) *regexp.Regexp {
		return regexp.MustCompile(`(?m)^` + id + ` +` + prefix + ` +` + status + ` +2030-12-31T00:00:00Z$`)
	}
	code, out, errOut = runKeys(t, "list", "-tenant", "acme")
	if code != 0 || !strings.HasPrefix(out, "ID ") || !row("active").MatchString(out) || strings.Count(out, "\n") != 2 {
		t.Fatalf("list: exit %d, stdout:\n%s\nstderr: %s", code, out, errOut)
	}
	if strings.Contains(out, key) {
		t.Errorf("list shows the key:\n%s", out)
	}

	code, out, errOut = runKeys(t, "revoke", "-id", id)
	if code != 0 || out != "revoked "+id+"\n" {
		t.Fatalf("revoke: exit %d, %q, %q", code, out, errOut)
	}
	code, out, errOut = runKeys(t, "list", "-tenant", "acme")
	if code != 0 || !row("revoked").MatchString(out) {
		t.Fatalf("list after revoke: exit %d, stdout:\n%s\nstderr: %s", code, out, errOut)
	}
	// Revoking with the tenant named works too (it lets the gateway evict
	// the key's hash at once).
	code, _, errOut = runKeys(t, "revoke", "-id", id, "-tenant", "acme")
	if code != 0 {
		t.Fatalf("revoke -tenant: exit %d: %s", code, errOut)
	}
}

func TestKeysErrors(t *testing.T) {
	keysServer(t)
	// A port nothing listens on.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + l.Addr().String()
	l.Close()

	tests := []struct {
		name     string
		env      map[string]string
		args     []string
		wantCode int
		wantErr  string
	}{
		{"no command", nil, nil, 2, "usage:"},
		{"unknown command", nil, []string{"delete"}, 2, `unknown command "delete"`},
		{"create without tenant", nil, []string{"create"}, 2, "-tenant is required"},
		{"bad expiry", nil, []string{"create", "-tenant", "acme", "-expires", "tomorrow"}, 2, "want RFC 3339"},
		{"revoke without id", nil, []string{"revoke"}, 2, "-id is required"},
		{"list without tenant", nil, []string{"list"}, 2, "-tenant is required"},
		{"no token", map[string]string{"TOLLGATE_ADMIN_TOKEN": ""}, []string{"list", "-tenant", "acme"}, 2, "$TOLLGATE_ADMIN_TOKEN is not set"},
		{"wrong token", map[string]string{"TOLLGATE_ADMIN_TOKEN": "nope"}, []string{"list", "-tenant", "acme"}, 1,
			"admin API: missing or wrong admin token (Authorization: Bearer <token>) (HTTP 401)"},
		{"unknown tenant", nil, []string{"list", "-tenant", "nope"}, 1, `tenant "nope": not found (HTTP 404)`},
		{"unknown key", nil, []string{"revoke", "-id", "key_nope"}, 1, "(HTTP 404)"},
		{"negative limit", nil, []string{"create", "-tenant", "acme", "-rpm", "-1"}, 1, "invalid value (HTTP 400)"},
		{"unreachable", nil, []string{"list", "-admin", dead, "-tenant", "acme"}, 1, "cannot reach the admin API at " + dead + ": "},
		{"unreachable from the environment", map[string]string{"TOLLGATE_ADMIN_URL": dead}, []string{"list", "-tenant", "acme"}, 1,
			"cannot reach the admin API at " + dead + ": "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			code, out, errOut := runKeys(t, tt.args...)
			if code != tt.wantCode || !strings.Contains(errOut, tt.wantErr) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", code, errOut, tt.wantCode, tt.wantErr)
			}
			if out != "" {
				t.Errorf("stdout %q, want nothing", out)
			}
			if strings.Contains(errOut, "cli-token") {
				t.Errorf("stderr shows the token: %q", errOut)
			}
		})
	}
}
