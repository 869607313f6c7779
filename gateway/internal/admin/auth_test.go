package admin_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/gateway/internal/admin"
	"github.com/tollgate/tollgate/gateway/internal/store/pg"
	"github.com/tollgate/tollgate/gateway/internal/tenant"
	"github.com/tollgate/tollgate/gateway/internal/testkit/pgtest"
)

// authEnv is the admin API on a migrated database holding plan "free" and
// tenant "acme", with a canceller that knows request "live", its log at
// debug level captured.
type authEnv struct {
	srv   *httptest.Server
	store *pg.Store
	dsn   string
	log   *bytes.Buffer
}

func newAuthEnv(t *testing.T, useTLS bool, opts ...admin.Option) *authEnv {
	t.Helper()
	db := pgtest.SharedFrom(t, migrated)
	s, err := pg.Open(t.Context(), db.DSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	if err := s.CreatePlan(t.Context(), tenant.Plan{ID: "free"}); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateTenant(t.Context(), tenant.Tenant{ID: "acme", PlanID: "free"}); err != nil {
		t.Fatal(err)
	}
	e := &authEnv{store: s, dsn: db.DSN(), log: &bytes.Buffer{}}
	log := slog.New(slog.NewTextHandler(&lockedWriter{w: e.log}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	opts = append([]admin.Option{admin.WithCanceller(func(_ context.Context, id string) (bool, error) { return id == "live", nil })}, opts...)
	h := admin.NewHandler(s, nil, token, log, opts...)
	if useTLS {
		e.srv = httptest.NewTLSServer(h)
	} else {
		e.srv = httptest.NewServer(h)
	}
	t.Cleanup(e.srv.Close)
	return e
}

// req sends a request; hdr holds header pairs. It returns the response
// (body read) and the body.
func (e *authEnv) req(t *testing.T, method, path, body string, hdr ...string) (*http.Response, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	r, err := http.NewRequestWithContext(t.Context(), method, e.srv.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Add(hdr[i], hdr[i+1])
	}
	resp, err := e.srv.Client().Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

func bearer(tok string) []string { return []string{"Authorization", "Bearer " + tok} }

type createdToken struct {
	ID        string     `json:"id"`
	Token     *string    `json:"token"`
	Name      string     `json:"name"`
	Prefix    string     `json:"prefix"`
	Scopes    []string   `json:"scopes"`
	CreatedAt time.Time  `json:"created_at"`
	CreatedBy string     `json:"created_by"`
	ExpiresAt *time.Time `json:"expires_at"`
	RevokedAt *time.Time `json:"revoked_at"`
}

// mkToken creates a token through the API with credential by.
func (e *authEnv) mkToken(t *testing.T, by, name string, scopes []string, expires *time.Time) (string, createdToken) {
	t.Helper()
	body := map[string]any{"name": name, "scopes": scopes}
	if expires != nil {
		body["expires_at"] = expires
	}
	b, _ := json.Marshal(body)
	resp, out := e.req(t, "POST", "/v1/admin/tokens", string(b), bearer(by)...)
	if resp.StatusCode != 201 {
		t.Fatalf("creating token %s: %d %s", name, resp.StatusCode, out)
	}
	var c createdToken
	if err := json.Unmarshal([]byte(out), &c); err != nil {
		t.Fatal(err)
	}
	if c.Token == nil || !strings.HasPrefix(*c.Token, pg.AdminTokenPrefix) {
		t.Fatalf("creation answer without the token: %s", out)
	}
	return *c.Token, c
}

func errCode(t *testing.T, body string) string {
	t.Helper()
	e := parseError(t, body)
	if e.Error.Code == nil {
		return ""
	}
	return *e.Error.Code
}

// TestScopeTable: each scope alone, and all of them, against each class of
// route: GET (read), a write (write), a cancel (cancel), and the token and
// audit routes.
func TestScopeTable(t *testing.T) {
	t.Parallel()
	e := newAuthEnv(t, false)
	routes := []struct {
		class, method, path, body string
		okStatus                  int
	}{
		{"read", "GET", "/v1/admin/tenants/acme/keys", "", 200},
		{"read", "GET", "/v1/admin/audit", "", 200},
		{"read", "GET", "/v1/admin/tokens", "", 200},
		{"write", "PUT", "/v1/admin/tenants/acme/status", `{"status":"active"}`, 200},
		{"write", "POST", "/v1/admin/plans", `{"id":"p-%s"}`, 201},
		{"write", "POST", "/v1/admin/tokens", `{"name":"n","scopes":["%s"]}`, 201},
		{"cancel", "POST", "/v1/admin/requests/live/cancel", "", 200},
		{"cancel", "POST", "/v1/admin/requests/gone/cancel", "", 404},
		{"cancel", "POST", "/v1/admin/requests/a%2Fb/cancel", "", 404},
	}
	holders := map[string][]string{"read": {"read"}, "write": {"write"}, "cancel": {"cancel"}, "all": {"read", "write", "cancel"}}
	for holder, scopes := range holders {
		tok, _ := e.mkToken(t, token, holder, scopes, nil)
		for i, rt := range routes {
			t.Run(holder+"/"+rt.method+" "+rt.path, func(t *testing.T) {
				body := rt.body
				if strings.Contains(body, "%s") {
					arg := holder + strconv.Itoa(i)
					if rt.path == "/v1/admin/tokens" {
						arg = scopes[0] // a scope the holder has
					}
					body = fmt.Sprintf(body, arg)
				}
				resp, out := e.req(t, rt.method, rt.path, body, bearer(tok)...)
				if slices.Contains(scopes, rt.class) {
					if resp.StatusCode != rt.okStatus {
						t.Fatalf("status %d, want %d: %s", resp.StatusCode, rt.okStatus, out)
					}
					return
				}
				if resp.StatusCode != 403 || errCode(t, out) != "insufficient_scope" || !strings.Contains(out, `\"`+rt.class+`\"`) {
					t.Fatalf("status %d, want 403 insufficient_scope naming %q: %s", resp.StatusCode, rt.class, out)
				}
			})
		}
		// The session route answers any valid token.
		if resp, out := e.req(t, "GET", "/v1/admin/session", "", bearer(tok)...); resp.StatusCode != 200 {
			t.Errorf("%s: GET session %d %s", holder, resp.StatusCode, out)
		}
	}
}

// TestTokenGrantsOnlyItsScopes: a token creates tokens with its own scopes
// or fewer, never more; the creator is recorded.
func TestTokenGrantsOnlyItsScopes(t *testing.T) {
	t.Parallel()
	e := newAuthEnv(t, false)
	rw, rwRec := e.mkToken(t, token, "rw", []string{"write", "read", "write"}, nil)
	if !slices.Equal(rwRec.Scopes, []string{"read", "write"}) || rwRec.CreatedBy != admin.ActorBootstrap {
		t.Fatalf("rw %+v", rwRec)
	}
	resp, out := e.req(t, "POST", "/v1/admin/tokens", `{"name":"x","scopes":["read","cancel"]}`, bearer(rw)...)
	if resp.StatusCode != 403 || errCode(t, out) != "insufficient_scope" || !strings.Contains(out, "cancel") {
		t.Fatalf("escalation: %d %s", resp.StatusCode, out)
	}
	_, ro := e.mkToken(t, rw, "ro", []string{"read"}, nil)
	if ro.CreatedBy != rwRec.ID {
		t.Errorf("created_by %q, want %q", ro.CreatedBy, rwRec.ID)
	}
	for body, code := range map[string]string{
		`{"name":"x","scopes":["admin"]}`:                                    "invalid_value",
		`{"name":"x","scopes":[]}`:                                           "invalid_value",
		`{"name":"","scopes":["read"]}`:                                      "invalid_value",
		`{"name":"x","scopes":["read"],"expires_at":"2001-01-01T00:00:00Z"}`: "invalid_value",
		`{"name":"x","scopes":["read"],"hash":"00"}`:                         "invalid_body",
	} {
		resp, out := e.req(t, "POST", "/v1/admin/tokens", body, bearer(token)...)
		if resp.StatusCode != 400 || errCode(t, out) != code {
			t.Errorf("%s: %d %s, want 400 %s", body, resp.StatusCode, out, code)
		}
	}
}

// TestRefusalsLookAlike: unknown, wrong, malformed, expired and revoked
// tokens get the same 401, byte for byte.
func TestRefusalsLookAlike(t *testing.T) {
	t.Parallel()
	e := newAuthEnv(t, false)
	revoked, rec := e.mkToken(t, token, "old", []string{"read"}, nil)
	if resp, out := e.req(t, "POST", "/v1/admin/tokens/"+rec.ID+"/revoke", "", bearer(token)...); resp.StatusCode != 200 {
		t.Fatalf("revoke: %d %s", resp.StatusCode, out)
	}
	expired, exp := e.mkToken(t, token, "short", []string{"read"}, nil)
	conn, err := pgx.Connect(t.Context(), e.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(t.Context(), `UPDATE admin_tokens SET expires_at = now() - interval '1 second' WHERE id = $1`, exp.ID); err != nil {
		t.Fatal(err)
	}
	valid, _ := e.mkToken(t, token, "valid", []string{"read"}, nil)
	cases := map[string][]string{
		"none":             nil,
		"unknown stored":   bearer(pg.AdminTokenPrefix + strings.Repeat("A", pg.KeyDigits)),
		"wrong env":        bearer(token + "x"),
		"valid, truncated": bearer(valid[:len(valid)-1]),
		"valid, extended":  bearer(valid + "0"),
		"basic scheme":     {"Authorization", "Basic " + valid},
		"two headers":      {"Authorization", "Bearer " + valid, "Authorization", "Bearer " + valid},
		"revoked":          bearer(revoked),
		"expired":          bearer(expired),
		"revoked cookie":   {"Cookie", admin.SessionCookie + "=" + revoked},
	}
	var first string
	for name, hdr := range cases {
		resp, out := e.req(t, "GET", "/v1/admin/tenants/acme/keys", "", hdr...)
		if resp.StatusCode != 401 || errCode(t, out) != "invalid_admin_token" || resp.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("%s: %d %s", name, resp.StatusCode, out)
		}
		if first == "" {
			first = out
		} else if out != first {
			t.Errorf("%s: body %s differs from %s", name, out, first)
		}
	}
	if resp, _ := e.req(t, "GET", "/v1/admin/tenants/acme/keys", "", bearer(valid)...); resp.StatusCode != 200 {
		t.Fatalf("the valid token: %d", resp.StatusCode)
	}
}

// TestRevocationImmediate: requests with a token run concurrently while it
// is revoked; every request that starts after the revocation's answer is
// refused (no cache anywhere), and the ones before it succeeded.
func TestRevocationImmediate(t *testing.T) {
	t.Parallel()
	e := newAuthEnv(t, false)
	tok, rec := e.mkToken(t, token, "victim", []string{"read"}, nil)
	var revokedAt atomic.Int64 // UnixNano once the revocation answered
	type result struct {
		start  int64
		status int
	}
	var (
		mu      sync.Mutex
		results []result
		wg      sync.WaitGroup
		stop    = make(chan struct{})
	)
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				start := time.Now().UnixNano()
				r, _ := http.NewRequestWithContext(t.Context(), "GET", e.srv.URL+"/v1/admin/tenants/acme/keys", nil)
				r.Header.Set("Authorization", "Bearer "+tok)
				resp, err := e.srv.Client().Do(r)
				if err != nil {
					t.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				mu.Lock()
				results = append(results, result{start, resp.StatusCode})
				mu.Unlock()
			}
		})
	}
	waitFor := func(n int) {
		deadline := time.Now().Add(30 * time.Second)
		for {
			mu.Lock()
			got := len(results)
			mu.Unlock()
			if got >= n || time.Now().After(deadline) {
				return
			}
			time.Sleep(time.Millisecond)
		}
	}
	waitFor(20)
	if resp, out := e.req(t, "POST", "/v1/admin/tokens/"+rec.ID+"/revoke", "", bearer(token)...); resp.StatusCode != 200 {
		t.Fatalf("revoke: %d %s", resp.StatusCode, out)
	}
	revokedAt.Store(time.Now().UnixNano())
	mu.Lock()
	n := len(results)
	mu.Unlock()
	waitFor(n + 20)
	close(stop)
	wg.Wait()
	var before, after, okAfter int
	for _, r := range results {
		if r.start > revokedAt.Load() {
			after++
			if r.status != 401 {
				okAfter++
			}
		} else if r.status == 200 {
			before++
		}
	}
	t.Logf("%d requests succeeded before the revocation answered, %d started after it (all refused: %v)", before, after, okAfter == 0)
	if okAfter != 0 || after < 10 || before < 10 {
		t.Fatalf("%d of %d requests started after the revocation were not refused; %d succeeded before", okAfter, after, before)
	}
}

// parseSetCookie returns the session cookie of resp, or nil.
func sessionSetCookie(resp *http.Response) *http.Cookie {
	for _, c := range resp.Cookies() {
		if c.Name == admin.SessionCookie {
			return c
		}
	}
	return nil
}

type sessionAnswer struct {
	Actor     string     `json:"actor"`
	Name      string     `json:"name"`
	Scopes    []string   `json:"scopes"`
	ExpiresAt *time.Time `json:"expires_at"`
	CSRFToken string     `json:"csrf_token"`
	ReadOnly  bool       `json:"read_only"`
}

func decodeSession(t *testing.T, body string) sessionAnswer {
	t.Helper()
	var s sessionAnswer
	dec := json.NewDecoder(strings.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		t.Fatalf("session answer %s: %v", body, err)
	}
	return s
}

// TestSessionCookie: the cookie's attributes over TLS and plain HTTP, its
// Max-Age bounded by 12 h and by the token's expiry; GET answers the same
// without a cookie; DELETE clears it.
func TestSessionCookie(t *testing.T) {
	t.Parallel()
	for _, useTLS := range []bool{false, true} {
		t.Run(fmt.Sprintf("tls=%v", useTLS), func(t *testing.T) {
			t.Parallel()
			e := newAuthEnv(t, useTLS)
			exp := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
			tok, rec := e.mkToken(t, token, "console", []string{"read", "write"}, &exp)
			for _, tc := range []struct {
				name, token, actor string
				maxAge             int
			}{
				{"stored, expiring in 1h", tok, rec.ID, 3600},
				{"bootstrap", token, admin.ActorBootstrap, 12 * 3600},
			} {
				resp, body := e.req(t, "POST", "/v1/admin/session", `{"token":"`+tc.token+`"}`)
				if resp.StatusCode != 200 {
					t.Fatalf("%s: %d %s", tc.name, resp.StatusCode, body)
				}
				raw := resp.Header.Values("Set-Cookie")
				c := sessionSetCookie(resp)
				if len(raw) != 1 || c == nil || c.Value != tc.token || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode ||
					c.Path != "/" || c.Secure != useTLS || c.MaxAge <= 0 || c.MaxAge > tc.maxAge || c.MaxAge < tc.maxAge-60 {
					t.Fatalf("%s: Set-Cookie %q (max age want ≤ %d)", tc.name, raw, tc.maxAge)
				}
				s := decodeSession(t, body)
				if s.Actor != tc.actor || s.CSRFToken == "" || strings.Contains(s.CSRFToken, tc.token) || s.ReadOnly {
					t.Fatalf("%s: session %+v", tc.name, s)
				}
				if tc.actor == admin.ActorBootstrap {
					if s.Name != "bootstrap" || !slices.Equal(s.Scopes, []string{"read", "write", "cancel"}) || s.ExpiresAt != nil {
						t.Errorf("bootstrap session %+v", s)
					}
				} else if s.Name != "console" || !slices.Equal(s.Scopes, []string{"read", "write"}) || s.ExpiresAt == nil || !s.ExpiresAt.Equal(exp) {
					t.Errorf("stored session %+v", s)
				}
				// GET with the cookie: the same, no Set-Cookie.
				resp, got := e.req(t, "GET", "/v1/admin/session", "", "Cookie", admin.SessionCookie+"="+tc.token)
				if resp.StatusCode != 200 || len(resp.Header.Values("Set-Cookie")) != 0 || !jsonEqual(t, got, body) {
					t.Fatalf("%s: GET session %d %q %s, want %s", tc.name, resp.StatusCode, resp.Header.Values("Set-Cookie"), got, body)
				}
				// DELETE (a write: needs the CSRF token) clears the cookie.
				resp, _ = e.req(t, "DELETE", "/v1/admin/session", "", "Cookie", admin.SessionCookie+"="+tc.token, admin.CSRFHeader, s.CSRFToken)
				c = sessionSetCookie(resp)
				if resp.StatusCode != 204 || c == nil || c.Value != "" || c.MaxAge >= 0 || !c.HttpOnly || c.Path != "/" {
					t.Fatalf("%s: DELETE session %d %q", tc.name, resp.StatusCode, resp.Header.Values("Set-Cookie"))
				}
			}
			for body, want := range map[string]int{`{"token":"nope"}`: 401, `{"token":""}`: 401, `{}`: 401, `{"tok":"x"}`: 400} {
				if resp, out := e.req(t, "POST", "/v1/admin/session", body); resp.StatusCode != want || sessionSetCookie(resp) != nil {
					t.Errorf("POST session %s: %d %s, want %d and no cookie", body, resp.StatusCode, out, want)
				}
			}
		})
	}
}

// TestCSRF: with the cookie, a write needs the session's CSRF token and,
// if an Origin is sent, this host's; reads and Bearer writes need neither.
func TestCSRF(t *testing.T) {
	t.Parallel()
	e := newAuthEnv(t, false)
	tok, _ := e.mkToken(t, token, "console", []string{"read", "write"}, nil)
	other, _ := e.mkToken(t, token, "other", []string{"read", "write"}, nil)
	resp, body := e.req(t, "POST", "/v1/admin/session", `{"token":"`+tok+`"}`)
	if resp.StatusCode != 200 {
		t.Fatalf("session: %d %s", resp.StatusCode, body)
	}
	csrf := decodeSession(t, body).CSRFToken
	resp, body = e.req(t, "POST", "/v1/admin/session", `{"token":"`+other+`"}`)
	otherCSRF := decodeSession(t, body).CSRFToken
	if csrf == otherCSRF || len(csrf) != 64 {
		t.Fatalf("csrf tokens %q and %q", csrf, otherCSRF)
	}
	host := strings.TrimPrefix(e.srv.URL, "http://")
	cookie := []string{"Cookie", admin.SessionCookie + "=" + tok}
	write := func(hdr ...string) (int, string) {
		resp, out := e.req(t, "PUT", "/v1/admin/tenants/acme/status", `{"status":"active"}`, append(slices.Clone(cookie), hdr...)...)
		return resp.StatusCode, out
	}
	for _, tc := range []struct {
		name string
		hdr  []string
		want int
	}{
		{"no csrf header", nil, 403},
		{"wrong csrf", []string{admin.CSRFHeader, strings.Repeat("0", 64)}, 403},
		{"another session's csrf", []string{admin.CSRFHeader, otherCSRF}, 403},
		{"csrf, uppercased", []string{admin.CSRFHeader, strings.ToUpper(csrf)}, 403},
		{"right csrf, cross origin", []string{admin.CSRFHeader, csrf, "Origin", "https://evil.example"}, 403},
		{"right csrf, origin null", []string{admin.CSRFHeader, csrf, "Origin", "null"}, 403},
		{"right csrf, same host other port", []string{admin.CSRFHeader, csrf, "Origin", "http://127.0.0.1:1"}, 403},
		{"right csrf, two origins", []string{admin.CSRFHeader, csrf, "Origin", "http://" + host, "Origin", "https://evil.example"}, 403},
		{"right csrf, no origin", []string{admin.CSRFHeader, csrf}, 200},
		{"right csrf, same origin", []string{admin.CSRFHeader, csrf, "Origin", "http://" + host}, 200},
	} {
		status, out := write(tc.hdr...)
		if status != tc.want || (tc.want == 403 && errCode(t, out) != "csrf_failed") {
			t.Errorf("%s: %d %s, want %d", tc.name, status, out, tc.want)
		}
	}
	// A read with the cookie needs no CSRF token; a Bearer write none.
	if resp, out := e.req(t, "GET", "/v1/admin/tenants/acme/keys", "", cookie...); resp.StatusCode != 200 {
		t.Errorf("cookie GET: %d %s", resp.StatusCode, out)
	}
	if resp, out := e.req(t, "PUT", "/v1/admin/tenants/acme/status", `{"status":"active"}`, bearer(tok)...); resp.StatusCode != 200 {
		t.Errorf("bearer PUT: %d %s", resp.StatusCode, out)
	}
	// Opening a session from another site is refused.
	if resp, out := e.req(t, "POST", "/v1/admin/session", `{"token":"`+tok+`"}`, "Origin", "https://evil.example"); resp.StatusCode != 403 || sessionSetCookie(resp) != nil {
		t.Errorf("cross-site session: %d %s", resp.StatusCode, out)
	}
}

type auditPage struct {
	Object string `json:"object"`
	Data   []struct {
		ID         int64           `json:"id"`
		At         time.Time       `json:"at"`
		Actor      string          `json:"actor"`
		Action     string          `json:"action"`
		Resource   string          `json:"resource"`
		ResourceID string          `json:"resource_id"`
		Before     json.RawMessage `json:"before"`
		After      json.RawMessage `json:"after"`
	} `json:"data"`
	HasMore    bool   `json:"has_more"`
	NextCursor string `json:"next_cursor"`
}

// TestAuditTrail: writes with a stored token are audited with the token's
// id as actor; the audit route filters and pages; no image, answer or log
// line holds a token or key, or their hashes; the token is shown once.
func TestAuditTrail(t *testing.T) {
	t.Parallel()
	e := newAuthEnv(t, false)
	tok, rec := e.mkToken(t, token, "ops", []string{"read", "write"}, nil)
	// Writes by the token: a plan, a status, a key, a revocation, a token.
	steps := []struct{ method, path, body string }{
		{"POST", "/v1/admin/plans", `{"id":"pro","rpm":5}`},
		{"PUT", "/v1/admin/tenants/acme/status", `{"status":"suspended"}`},
		{"POST", "/v1/admin/tenants/acme/keys", `{}`},
	}
	var key string
	var keyID string
	for _, s := range steps {
		resp, out := e.req(t, s.method, s.path, s.body, bearer(tok)...)
		if resp.StatusCode/100 != 2 {
			t.Fatalf("%s %s: %d %s", s.method, s.path, resp.StatusCode, out)
		}
		if strings.HasSuffix(s.path, "/keys") {
			var k createdKey
			json.Unmarshal([]byte(out), &k)
			key, keyID = k.Key, k.ID
		}
	}
	if resp, out := e.req(t, "POST", "/v1/admin/keys/"+keyID+"/revoke", "", bearer(tok)...); resp.StatusCode != 200 {
		t.Fatalf("revoke key: %d %s", resp.StatusCode, out)
	}
	child, childRec := e.mkToken(t, tok, "child", []string{"read"}, nil)
	if resp, out := e.req(t, "POST", "/v1/admin/tokens/"+childRec.ID+"/revoke", "", bearer(tok)...); resp.StatusCode != 200 {
		t.Fatalf("revoke token: %d %s", resp.StatusCode, out)
	}

	var all []string
	var bodies strings.Builder
	resp, body := e.req(t, "GET", "/v1/admin/audit?actor="+rec.ID, "", bearer(tok)...)
	if resp.StatusCode != 200 {
		t.Fatalf("audit: %d %s", resp.StatusCode, body)
	}
	bodies.WriteString(body)
	var page auditPage
	if err := json.Unmarshal([]byte(body), &page); err != nil {
		t.Fatal(err)
	}
	for _, d := range page.Data {
		all = append(all, d.Action+" "+d.ResourceID)
		if d.Actor != rec.ID || d.At.IsZero() || time.Since(d.At) > time.Hour {
			t.Errorf("entry %+v", d)
		}
	}
	want := []string{"admin_token.revoke " + childRec.ID, "admin_token.create " + childRec.ID, "key.revoke " + keyID,
		"key.create " + keyID, "tenant.update acme", "plan.create pro"}
	if !slices.Equal(all, want) || page.HasMore || page.Object != "list" {
		t.Fatalf("audit newest first %q (has_more %v), want %q", all, page.HasMore, want)
	}
	if string(page.Data[5].Before) != "null" || !strings.Contains(string(page.Data[5].After), `"rpm":5`) {
		t.Errorf("plan.create images %s / %s", page.Data[5].Before, page.Data[5].After)
	}

	// Pages of 2 with filters: every row of resource key, then token
	// creations by bootstrap among them none.
	var paged []string
	cursor := ""
	for range 10 {
		path := "/v1/admin/audit?limit=2&resource=key&resource_id=" + keyID
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		resp, body := e.req(t, "GET", path, "", bearer(tok)...)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", path, resp.StatusCode, body)
		}
		bodies.WriteString(body)
		var p auditPage
		json.Unmarshal([]byte(body), &p)
		for _, d := range p.Data {
			paged = append(paged, d.Action)
		}
		if !p.HasMore {
			if p.NextCursor != "" {
				t.Errorf("next_cursor %q without more", p.NextCursor)
			}
			break
		}
		cursor = p.NextCursor
	}
	if !slices.Equal(paged, []string{"key.revoke", "key.create"}) {
		t.Errorf("paged key entries %q", paged)
	}
	resp, body = e.req(t, "GET", "/v1/admin/audit?limit=1&resource=admin_token", "", bearer(tok)...)
	bodies.WriteString(body)
	json.Unmarshal([]byte(body), &page)
	if len(page.Data) != 1 || !page.HasMore || page.NextCursor == "" {
		t.Errorf("limit=1: %s", body)
	}
	for q, code := range map[string]string{
		"limit=0": "invalid_value", "limit=501": "invalid_value", "limit=x": "invalid_value",
		"cursor=%%%": "invalid_query", "cursor=!!": "invalid_value", "cursor=eHl6": "invalid_value", "actorx=1": "invalid_query",
		"actor=a&actor=b": "invalid_query",
	} {
		resp, out := e.req(t, "GET", "/v1/admin/audit?"+q, "", bearer(tok)...)
		if resp.StatusCode != 400 || errCode(t, out) != code {
			t.Errorf("?%s: %d %s, want 400 %s", q, resp.StatusCode, out, code)
		}
	}

	// The token list never shows a token again.
	resp, body = e.req(t, "GET", "/v1/admin/tokens", "", bearer(tok)...)
	bodies.WriteString(body)
	var list struct {
		Data    []createdToken `json:"data"`
		HasMore bool           `json:"has_more"`
	}
	if err := json.Unmarshal([]byte(body), &list); err != nil || len(list.Data) != 2 || strings.Contains(body, `"token"`) {
		t.Fatalf("token list %s", body)
	}
	if list.Data[1].ID != childRec.ID || list.Data[1].RevokedAt == nil || list.Data[0].RevokedAt != nil || list.Data[1].CreatedBy != rec.ID {
		t.Errorf("token list %+v", list.Data)
	}
	resp, body = e.req(t, "GET", "/v1/admin/tokens?limit=1", "", bearer(tok)...)
	var p1 auditPage
	json.Unmarshal([]byte(body), &p1)
	resp, body2 := e.req(t, "GET", "/v1/admin/tokens?limit=1&cursor="+p1.NextCursor, "", bearer(tok)...)
	if !p1.HasMore || !strings.Contains(body, rec.ID) || !strings.Contains(body2, childRec.ID) || strings.Contains(body2, `"has_more":true`) {
		t.Errorf("token pages %s / %s", body, body2)
	}

	// No secret anywhere: the answers above, the whole audit table, the
	// log.
	conn, err := pgx.Connect(t.Context(), e.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var dump string
	if err := conn.QueryRow(t.Context(), `SELECT string_agg(a::text, ' ') FROM admin_audit a`).Scan(&dump); err != nil {
		t.Fatal(err)
	}
	for name, secret := range map[string]string{"token": tok, "child token": child, "key": key, "env token": token} {
		h := pg.HashAdminToken(secret)
		for where, text := range map[string]string{"audit answers": bodies.String(), "audit table": dump, "log": e.log.String()} {
			for _, needle := range []string{secret, secret[len(secret)-min(len(secret), 16):], hex.EncodeToString(h[:])} {
				if strings.Contains(text, needle) {
					t.Errorf("the %s holds the %s (or its hash)", where, name)
				}
			}
		}
	}
	if strings.Contains(dump, "key_hash") || strings.Contains(dump, `"hash"`) {
		t.Errorf("the audit table holds a hash column: %.500s", dump)
	}
	// The log says who did what.
	if log := e.log.String(); !strings.Contains(log, "created admin token") || !strings.Contains(log, childRec.ID) {
		t.Errorf("log:\n%s", log)
	}
}

// storeOnly hides the Postgres store's token and audit methods: the
// handler as it is with a store without tokens (the memory store).
type storeOnly struct{ admin.Store }

// TestWithoutTokenStore: only the environment's token exists; stored
// token routes answer empty lists or 501.
func TestWithoutTokenStore(t *testing.T) {
	t.Parallel()
	e := newAuthEnv(t, false)
	tok, _ := e.mkToken(t, token, "real", []string{"read"}, nil)
	h := admin.NewHandler(storeOnly{e.store}, nil, token, slog.New(slog.NewTextHandler(io.Discard, nil)), admin.WithReadOnly(true))
	srv := httptest.NewServer(h)
	defer srv.Close()
	m := &authEnv{srv: srv}
	if resp, out := m.req(t, "GET", "/v1/admin/tenants/acme/keys", "", bearer(tok)...); resp.StatusCode != 401 {
		t.Errorf("a stored token without a token store: %d %s", resp.StatusCode, out)
	}
	for path, want := range map[string]string{"/v1/admin/tokens": `{"object":"list","data":[],"has_more":false}`,
		"/v1/admin/audit": `{"object":"list","data":[],"has_more":false}`} {
		if resp, out := m.req(t, "GET", path, "", bearer(token)...); resp.StatusCode != 200 || !jsonEqual(t, out, want) {
			t.Errorf("%s: %d %s", path, resp.StatusCode, out)
		}
	}
	if resp, out := m.req(t, "POST", "/v1/admin/tokens", `{"name":"x","scopes":["read"]}`, bearer(token)...); resp.StatusCode != 501 || errCode(t, out) != "read_only_store" {
		t.Errorf("create: %d %s", resp.StatusCode, out)
	}
	resp, out := m.req(t, "POST", "/v1/admin/session", `{"token":"`+token+`"}`)
	if resp.StatusCode != 200 || !decodeSession(t, out).ReadOnly {
		t.Errorf("session: %d %s", resp.StatusCode, out)
	}
}
