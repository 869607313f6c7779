package e2e

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/config"
	"github.com/tollgate/tollgate/gateway/internal/proxy"

	"github.com/tollgate/tollgate/gateway/internal/testkit/mockllm"
	"github.com/tollgate/tollgate/gateway/internal/testkit/pgtest"
	"github.com/tollgate/tollgate/sdk/wasmbuild"
)

// keywordguardPath builds (once per source change) plugins/keywordguard.
func keywordguardPath(t *testing.T) string {
	t.Helper()
	p, err := wasmbuild.Cached(repoRoot(t) + "/plugins/keywordguard")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func chatAbout(model, text string) string {
	return fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":%q}]}`, model, text)
}

// Two tenants on one route, one with keywordguard switched on with its
// own deny list and one without it; a route whose chain leaves the guard
// out; a plan that switches it on with the policy's config.
func TestChainsPerRouteAndTenant(t *testing.T) {
	_, mockURL := startMock(t, mockllm.Config{Tokens: 2})
	pol := fmt.Sprintf(`
version: 1
upstreams:
  - name: up
    base_url: %s/v1
routes:
  - models: [mock-1]
    upstream: up
    plugins: guarded
  - models: [mock-2]
    upstream: up
    plugins: [preflight]
  - models: [mock-3]
    upstream: up
chains:
  guarded: [preflight, keywordguard]
plugins:
  - name: preflight
    builtin: preflight
  - name: keywordguard
    path: %s
    enabled: false
    config:
      deny: ["(?i)forbidden"]
      message: "Blocked by the policy's guard."
      status: 400
tenants:
  plans:
    - id: basic
    - id: guarded
      plugins:
        keywordguard: {enabled: true}
  tenants:
    - id: acme
      plan: basic
      keys: [{id: acme-1, key_env: ACME_KEY}]
      plugins:
        keywordguard:
          enabled: true
          config: {deny: ["(?i)secret"], message: "acme keeps its secrets.", status: 403}
    - id: globex
      plan: basic
      keys: [{id: globex-1, key_env: GLOBEX_KEY}]
    - id: initech
      plan: guarded
      keys: [{id: initech-1, key_env: INITECH_KEY}]
`, mockURL, keywordguardPath(t))
	keys := map[string]string{"ACME_KEY": "tg_acme_chains", "GLOBEX_KEY": "tg_globex_chains", "INITECH_KEY": "tg_initech_chains"}
	for k, v := range keys {
		t.Setenv(k, v) // the memory store reads key_env from the process
	}
	_, gw := startGateway(t, pol, keys)
	tests := []struct {
		name, key, model, text string
		status                 int
		message                string
	}{
		{"acme: its own deny list", "ACME_KEY", "mock-1", "tell me the secret", 403, "acme keeps its secrets."},
		{"acme: the policy's deny list is replaced", "ACME_KEY", "mock-1", "a forbidden word", 200, ""},
		{"globex: the guard is off", "GLOBEX_KEY", "mock-1", "tell me the secret", 200, ""},
		{"globex: off for the policy's list too", "GLOBEX_KEY", "mock-1", "a forbidden word", 200, ""},
		{"initech: its plan switches it on, policy config", "INITECH_KEY", "mock-1", "a forbidden word", 400, "Blocked by the policy's guard."},
		{"initech: the policy's list only", "INITECH_KEY", "mock-1", "tell me the secret", 200, ""},
		{"acme on a route without the guard", "ACME_KEY", "mock-2", "tell me the secret", 200, ""},
		{"initech on a route without the guard", "INITECH_KEY", "mock-2", "a forbidden word", 200, ""},
		{"acme on a route with every plugin", "ACME_KEY", "mock-3", "tell me the secret", 403, "acme keeps its secrets."},
		{"globex on a route with every plugin", "GLOBEX_KEY", "mock-3", "a forbidden word", 200, ""},
		{"an unknown key is refused before any guard", "", "mock-1", "hi", 401, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := keys[tt.key]
			if key == "" {
				key = "tg_unknown"
			}
			status, _, body := post(t, gw+"/v1/chat/completions", chatAbout(tt.model, tt.text), "Authorization", "Bearer "+key)
			if status != tt.status {
				t.Fatalf("status %d, want %d: %s", status, tt.status, body)
			}
			if tt.message != "" {
				if e := decodeError(t, body); e.Error.Message != tt.message {
					t.Errorf("message %q, want %q", e.Error.Message, tt.message)
				}
			}
		})
	}
}

// A plan's plugin overrides set through the admin API apply to its
// tenants' next requests (the write evicts the plan), and one the plugin
// refuses is answered 400 with the plugin's own error and not stored.
func TestChainsAdminPlanOverride(t *testing.T) {
	db := pgtest.SharedFrom(t, migrated)
	_, mockURL := startMock(t, mockllm.Config{Tokens: 1})
	srv, gw := pgGatewayServerWith(t, mockURL, db.DSN(), fmt.Sprintf(`
  - name: keywordguard
    path: %s
    enabled: false
    config: {deny: ["(?i)forbidden"], message: "Blocked by the policy's guard.", status: 400}
`, keywordguardPath(t)))
	adm := httptest.NewServer(srv.AdminHandler())
	defer adm.Close()
	call := func(method, path, body string) (int, map[string]any) {
		t.Helper()
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
	if st, m := call("POST", "/v1/admin/plans", `{"id":"pro"}`); st != 201 {
		t.Fatalf("plan: %d %v", st, m)
	}
	if st, m := call("POST", "/v1/admin/tenants", `{"id":"hooli","plan_id":"pro"}`); st != 201 {
		t.Fatalf("tenant: %d %v", st, m)
	}
	_, m := call("POST", "/v1/admin/tenants/hooli/keys", ``)
	key, _ := m["key"].(string)
	ask := func(text string) int {
		status, _, _ := post(t, gw+"/v1/chat/completions", chatAbout("mock-1", text), "Authorization", "Bearer "+key)
		return status
	}
	if st := ask("tell me the secret"); st != 200 {
		t.Fatalf("before any override: %d, want 200 (the guard is off)", st)
	}

	st, m := call("PUT", "/v1/admin/plans/pro", `{"plugins":{"keywordguard":{"enabled":true,"config":{"status":200}}}}`)
	msg := fmt.Sprint(m["error"])
	if st != 400 || !strings.Contains(msg, "keywordguard") || !strings.Contains(msg, `"status" is 200; it must be an HTTP client error status`) {
		t.Fatalf("a config the plugin refuses: %d %v", st, m)
	}
	if st, m := call("PUT", "/v1/admin/plans/pro", `{"plugins":{"nosuch":{"enabled":true}}}`); st != 400 || !strings.Contains(fmt.Sprint(m["error"]), `"nosuch"`) {
		t.Fatalf("an unknown plugin: %d %v", st, m)
	}
	if st := ask("tell me the secret"); st != 200 {
		t.Fatalf("after refused writes: %d, want 200 (nothing stored)", st)
	}

	if st, m := call("PUT", "/v1/admin/plans/pro", `{"plugins":{"keywordguard":{"enabled":true,"config":{"deny":["(?i)secret"],"status":451}}}}`); st != 200 {
		t.Fatalf("a valid override: %d %v", st, m)
	}
	if st := ask("tell me the secret"); st != 451 {
		t.Errorf("after the plan's override: %d, want 451 (its deny list and status)", st)
	}
	if st := ask("a forbidden word"); st != 200 {
		t.Errorf("the policy's deny list under the override: %d, want 200 (replaced)", st)
	}

	// The tenant's own, over the plan's: off again for hooli.
	if st, m := call("PUT", "/v1/admin/tenants/hooli/plugins", `{"plugins":{"keywordguard":{"config":{"status":99}}}}`); st != 400 {
		t.Fatalf("a tenant config the plugin refuses: %d %v", st, m)
	}
	if st, m := call("PUT", "/v1/admin/tenants/hooli/plugins", `{"plugins":{"keywordguard":{"enabled":false}}}`); st != 200 {
		t.Fatalf("tenant plugins: %d %v", st, m)
	}
	if st := ask("tell me the secret"); st != 200 {
		t.Errorf("after the tenant switched the guard off: %d, want 200", st)
	}
}

// pgGatewayServerWith runs a gateway on the Postgres store with the
// built-in preflight first and the given plugins entries after it.
func pgGatewayServerWith(t *testing.T, mockURL, dsn, plugins string) (srv interface{ AdminHandler() http.Handler }, url string) {
	yaml := policy(mockURL, "") + `
store:
  kind: postgres
  cache: {ttl: 30s}
call_log: {enabled: false}
plugins:
  - name: preflight
    builtin: preflight
` + plugins
	s, u := startGateway(t, yaml, map[string]string{"TOLLGATE_DATABASE_URL": dsn, "TOLLGATE_ADMIN_TOKEN": adminToken})
	return s, u
}

// A policy whose plan or tenant gives a plugin a config it refuses does
// not load, and the error names the plan or tenant, the plugin and the
// plugin's reason.
func TestChainsRefusedAtLoad(t *testing.T) {
	t.Setenv("ACME_KEY", "tg_acme_refused")
	base := fmt.Sprintf(`
version: 1
upstreams: [{name: up, base_url: "http://127.0.0.1:9/v1"}]
routes: [{models: [mock-1], upstream: up}]
plugins:
  - {name: preflight, builtin: preflight}
  - name: keywordguard
    path: %s
    config: {deny: ["x"]}
`, keywordguardPath(t))
	tests := []struct {
		name, tenants string
		want          []string
	}{
		{"plan", `
tenants:
  plans: [{id: basic, plugins: {keywordguard: {config: {status: 600}}}}]
`, []string{`tenants.plans[0] (plan "basic")`, `plugin "keywordguard"`, `"status" is 600`}},
		{"tenant over its plan", `
tenants:
  plans: [{id: basic, plugins: {keywordguard: {config: {deny: ["y"]}}}}]
  tenants:
    - {id: acme, plan: basic, keys: [{id: a, key_env: ACME_KEY}], plugins: {keywordguard: {config: {deny: []}}}}
`, []string{`tenants.tenants[0] (tenant "acme" on plan "basic")`, `plugin "keywordguard"`, `"deny" must list at least one regular expression`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := config.Parse([]byte(base+tt.tenants), nil)
			if err != nil {
				t.Fatal(err)
			}
			srv, err := proxy.New(p, slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})))
			if err == nil {
				srv.Shutdown(0, time.Second)
				t.Fatal("the policy loaded")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// A stream's chunk phase follows the chain too: a chunk plugin upper-cases
// the reply for the tenant that switches it on, on the routes whose chain
// has it, and the others' streams pass as the model sent them.
func TestChainsStreamChunkPhase(t *testing.T) {
	const text = "the quick brown fox"
	_, mockURL := startMock(t, mockllm.Config{Text: text, ChunkSize: 4})
	keys := map[string]string{"LOUD_KEY": "tg_loud_chains", "QUIET_KEY": "tg_quiet_chains"}
	for k, v := range keys {
		t.Setenv(k, v) // the memory store reads key_env from the process
	}
	pol := fmt.Sprintf(`
version: 1
upstreams:
  - name: up
    base_url: %s/v1
routes:
  - models: [mock-1]
    upstream: up
  - models: [mock-2]
    upstream: up
    plugins: [preflight]
plugins:
  - {name: preflight, builtin: preflight}
  - name: upper
    path: %s
    enabled: false
    config: {chunk: replace_upper, phases: [chunk]}
tenants:
  plans: [{id: basic}]
  tenants:
    - {id: loud, plan: basic, keys: [{id: l, key_env: LOUD_KEY}], plugins: {upper: {enabled: true}}}
    - {id: quiet, plan: basic, keys: [{id: q, key_env: QUIET_KEY}]}
`, mockURL, testPluginPath(t))
	_, gw := startGateway(t, pol, keys)
	tests := []struct {
		key, model, want string
	}{
		{"tg_loud_chains", "mock-1", strings.ToUpper(text)},
		{"tg_quiet_chains", "mock-1", text},
		{"tg_loud_chains", "mock-2", text},
	}
	for _, tt := range tests {
		body := fmt.Sprintf(`{"model":%q,"stream":true,"messages":[{"role":"user","content":"hi"}]}`, tt.model)
		status, _, out := post(t, gw+"/v1/chat/completions", body, "Authorization", "Bearer "+tt.key)
		got, done := sseText(t, out)
		if status != 200 || got != tt.want || !done {
			t.Errorf("%s on %s: %d %q (done %v), want %q", tt.key, tt.model, status, got, done, tt.want)
		}
	}
}
