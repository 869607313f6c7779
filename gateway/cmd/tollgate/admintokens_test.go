package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/store/pg"
)

func runAdminTokens(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = adminTokens(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestAdminTokensCreateListRevoke(t *testing.T) {
	s := keysServer(t)
	before := time.Now()
	code, out, errOut := runAdminTokens(t, "create", "-name", "ci", "-scopes", "read,write", "-expires", "720h")
	if code != 0 {
		t.Fatalf("create: exit %d: %s", code, errOut)
	}
	tok := strings.TrimSuffix(out, "\n")
	if !regexp.MustCompile(`^tgadm_[0-9A-Za-z]{43}$`).MatchString(tok) {
		t.Fatalf("create printed %q, want the token alone", out)
	}
	if !strings.Contains(errOut, "will not be shown again") || strings.Contains(errOut, tok) {
		t.Errorf("stderr %q", errOut)
	}
	rec, err := s.AdminTokenByHash(t.Context(), pg.HashAdminToken(tok))
	if err != nil {
		t.Fatal(err)
	}
	if want := before.Add(720 * time.Hour); rec.ExpiresAt.Before(want.Add(-time.Second)) || rec.ExpiresAt.After(time.Now().Add(720*time.Hour)) ||
		strings.Join(rec.Scopes, ",") != "read,write" || rec.Name != "ci" || rec.CreatedBy != "bootstrap" {
		t.Fatalf("stored %+v", rec)
	}
	if !strings.Contains(errOut, rec.ID) || !strings.Contains(errOut, rec.Prefix) {
		t.Errorf("create did not name id and prefix: %q", errOut)
	}

	// The new token works in the CLI, and cannot grant cancel.
	t.Setenv("TOLLGATE_ADMIN_TOKEN", tok)
	code, _, errOut = runAdminTokens(t, "create", "-name", "more", "-scopes", "cancel")
	if code != 1 || !strings.Contains(errOut, `lacks the "cancel" scope`) || !strings.Contains(errOut, "HTTP 403") {
		t.Errorf("escalation: exit %d, %q", code, errOut)
	}
	code, out, errOut = runAdminTokens(t, "list")
	row := regexp.MustCompile(`(?m)^` + rec.ID + ` +ci +` + regexp.QuoteMeta(rec.Prefix) + ` +read,write +bootstrap +\d{4}-\d\d-\d\dT[\d:]+Z +-$`)
	if code != 0 || !strings.HasPrefix(out, "ID ") || !row.MatchString(out) || strings.Contains(out, tok) {
		t.Fatalf("list: exit %d, stdout:\n%s\nstderr: %s", code, out, errOut)
	}

	code, out, errOut = runAdminTokens(t, "revoke", "-id", rec.ID)
	if code != 0 || out != "revoked "+rec.ID+"\n" {
		t.Fatalf("revoke: exit %d, %q, %q", code, out, errOut)
	}
	// Revoked: the token itself is refused from the next call on.
	code, _, errOut = runAdminTokens(t, "list")
	if code != 1 || !strings.Contains(errOut, "HTTP 401") {
		t.Fatalf("list with the revoked token: exit %d, %q", code, errOut)
	}
	t.Setenv("TOLLGATE_ADMIN_TOKEN", "cli-token")
	code, out, _ = runAdminTokens(t, "list")
	if code != 0 || !regexp.MustCompile(`(?m)^`+rec.ID+` .* \d{4}-\d\d-\d\dT[\d:]+Z$`).MatchString(out) {
		t.Fatalf("list after revoke: exit %d:\n%s", code, out)
	}
}

func TestAdminTokensErrors(t *testing.T) {
	keysServer(t)
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantErr  string
	}{
		{"no command", nil, 2, "usage:"},
		{"unknown command", []string{"delete"}, 2, `unknown command "delete"`},
		{"create without name", []string{"create", "-scopes", "read"}, 2, "-name is required"},
		{"create without scopes", []string{"create", "-name", "x"}, 2, "-scopes is required"},
		{"bad expiry", []string{"create", "-name", "x", "-scopes", "read", "-expires", "soon"}, 2, "want a duration"},
		{"negative expiry", []string{"create", "-name", "x", "-scopes", "read", "-expires", "-1h"}, 2, "positive duration"},
		{"unknown scope", []string{"create", "-name", "x", "-scopes", "read,admin"}, 1, `unknown scope "admin"`},
		{"revoke without id", []string{"revoke"}, 2, "-id is required"},
		{"revoke unknown", []string{"revoke", "-id", "tok_nope"}, 1, "(HTTP 404)"},
		{"extra argument", []string{"list", "x"}, 2, "unexpected arguments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runAdminTokens(t, tt.args...)
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
