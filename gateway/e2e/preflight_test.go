package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/gateway/internal/testkit/mockllm"
	"github.com/tollgate/tollgate/sdk/wasmbuild"
)

func sha(key string) string {
	h := sha256.Sum256([]byte(key))
	return hex.EncodeToString(h[:])
}

// tenantsPolicy is a policy with the memory tenant store and the preflight
// plugin.
func tenantsPolicy(t *testing.T, mockURL string) string {
	wasm, err := wasmbuild.Cached(repoRoot(t) + "/plugins/preflight")
	if err != nil {
		t.Fatal(err)
	}
	return policy(mockURL, "", "mock-1", "mock-2", "mock-*") + fmt.Sprintf(`
store:
  kind: memory
tenants:
  plans:
    - {id: basic, monthly_budget_usd: 10, rpm: 60, max_tokens: 256, allowed_models: ["mock-*"]}
    - {id: narrow, allowed_models: ["mock-1"]}
  tenants:
    - id: acme
      plan: basic
      keys:
        - {id: k-active, key_sha256: %s}
        - {id: k-revoked, key_sha256: %s, status: revoked}
        - {id: k-expired, key_sha256: %s, expires_at: 2020-01-01T00:00:00Z}
        - {id: k-big, key_sha256: %s, max_tokens: 4096}
    - id: initech
      plan: narrow
      keys:
        - {id: i-1, key_sha256: %s}
    - id: globex
      plan: basic
      status: suspended
      keys:
        - {id: g-1, key_sha256: %s}
plugins:
  - name: preflight
    path: %s
    config: {max_messages: 3}
`, sha("tg_active"), sha("tg_revoked"), sha("tg_expired"), sha("tg_big"), sha("tg_narrow"), sha("tg_suspended"), wasm)
}

func TestPreflight(t *testing.T) {
	_, mockURL := startMock(t, mockllm.Config{Tokens: 2})
	_, gw := startGateway(t, tenantsPolicy(t, mockURL), nil)
	msgs := func(n int) string {
		return strings.TrimSuffix(strings.Repeat(`{"role":"user","content":"hi"},`, n), ",")
	}
	tests := []struct {
		name, auth, model string
		extra             string
		messages          int
		status            int
		code              string
	}{
		{"valid key", "Bearer tg_active", "mock-1", "", 1, 200, ""},
		{"x-api-key header", "", "mock-2", "", 1, 200, ""},
		{"no key", "", "mock-1", "", 1, 401, "missing_api_key"},
		{"unknown key", "Bearer tg_nope", "mock-1", "", 1, 401, "invalid_api_key"},
		{"revoked key reads like an unknown one", "Bearer tg_revoked", "mock-1", "", 1, 401, "invalid_api_key"},
		{"expired key reads like an unknown one", "Bearer tg_expired", "mock-1", "", 1, 401, "invalid_api_key"},
		{"suspended tenant", "Bearer tg_suspended", "mock-1", "", 1, 403, "account_suspended"},
		{"model outside the plan", "Bearer tg_narrow", "mock-2", "", 1, 403, "model_not_allowed"},
		{"model inside the plan", "Bearer tg_narrow", "mock-1", "", 1, 200, ""},
		{"max_tokens over the plan's cap", "Bearer tg_active", "mock-1", `,"max_tokens":1000`, 1, 400, "max_tokens_too_large"},
		{"per-key cap overrides the plan's", "Bearer tg_big", "mock-1", `,"max_tokens":1000`, 1, 200, ""},
		{"too many messages", "Bearer tg_active", "mock-1", "", 4, 400, "too_many_messages"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := fmt.Sprintf(`{"model":%q,"messages":[%s]%s}`, tt.model, msgs(tt.messages), tt.extra)
			var hdr []string
			switch {
			case tt.auth != "":
				hdr = []string{"Authorization", tt.auth}
			case tt.name == "x-api-key header":
				hdr = []string{"X-Api-Key", "tg_active"}
			}
			status, _, got := post(t, gw+"/v1/chat/completions", body, hdr...)
			if status != tt.status {
				t.Fatalf("status %d, want %d: %s", status, tt.status, got)
			}
			if tt.code != "" {
				if e := decodeError(t, got); e.Error.Code == nil || *e.Error.Code != tt.code {
					t.Errorf("code %v, want %s: %s", e.Error.Code, tt.code, got)
				}
			}
		})
	}
}
