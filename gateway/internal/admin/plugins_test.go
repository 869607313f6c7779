package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/gateway/internal/tenant"
)

// pluginStore is okStore that records the tenant plugins it stores and
// answers a plan's.
type pluginStore struct {
	okStore
	plan   tenant.PluginOverrides
	stored tenant.PluginOverrides
	wrote  bool
}

func (s *pluginStore) PlanPlugins(context.Context, string) (tenant.PluginOverrides, error) {
	return s.plan, nil
}

func (s *pluginStore) TenantPlanPlugins(context.Context, string) (tenant.PluginOverrides, error) {
	return s.plan, nil
}

func (s *pluginStore) SetTenantPlugins(_ context.Context, _ string, ovs tenant.PluginOverrides) error {
	s.stored, s.wrote = ovs, true
	return nil
}

// Plan and tenant writes hand their plugins (a tenant's with its plan's)
// to the check, answer 400 invalid_plugins with its error, and store
// nothing then.
func TestPluginWritesChecked(t *testing.T) {
	on := true
	planOvs := tenant.PluginOverrides{"guard": {Enabled: &on}}
	tests := []struct {
		name, method, path, body string
		refuse                   bool
		wantStatus               int
		wantPlan, wantTenant     []string // plugin names the check saw
	}{
		{"plan accepted", "PUT", "/v1/admin/plans/pro", `{"plugins":{"guard":{"config":{"deny":["x"]}}}}`, false, 200, []string{"guard"}, nil},
		{"plan refused", "POST", "/v1/admin/plans", `{"id":"pro","plugins":{"guard":{"config":{"status":9}}}}`, true, 400, []string{"guard"}, nil},
		{"plan without plugins: no check", "PUT", "/v1/admin/plans/pro", `{"rpm":1}`, true, 200, nil, nil},
		{"tenant created over its plan", "POST", "/v1/admin/tenants", `{"id":"acme","plan_id":"pro","plugins":{"hold":{"enabled":false}}}`, false, 201, []string{"guard"}, []string{"hold"}},
		{"tenant plugins refused", "PUT", "/v1/admin/tenants/acme/plugins", `{"plugins":{"hold":{"config":{}}}}`, true, 400, []string{"guard"}, []string{"hold"}},
		{"tenant plugins stored", "PUT", "/v1/admin/tenants/acme/plugins", `{"plugins":{"hold":{"enabled":true}}}`, false, 200, []string{"guard"}, []string{"hold"}},
		{"unknown override key", "PUT", "/v1/admin/tenants/acme/plugins", `{"plugins":{"hold":{"on":true}}}`, false, 400, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := &pluginStore{plan: planOvs}
			var sawPlan, sawTenant []string
			check := func(_ context.Context, plan, tn tenant.PluginOverrides) error {
				for n := range plan {
					sawPlan = append(sawPlan, n)
				}
				for n := range tn {
					sawTenant = append(sawTenant, n)
				}
				if tt.refuse {
					return errors.New(`plugin "guard": configuration refused: bad status`)
				}
				return nil
			}
			h := NewHandler(st, nil, "token", slog.New(slog.DiscardHandler), WithPluginCheck(check))
			req := httptest.NewRequest(tt.method, tt.path, strings.NewReader(tt.body))
			req.Header.Set("Authorization", "Bearer token")
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			if w.Code != tt.wantStatus {
				t.Fatalf("status %d, want %d: %s", w.Code, tt.wantStatus, w.Body)
			}
			if strings.Join(sawPlan, ",") != strings.Join(tt.wantPlan, ",") || strings.Join(sawTenant, ",") != strings.Join(tt.wantTenant, ",") {
				t.Errorf("the check saw plan %v, tenant %v; want %v, %v", sawPlan, sawTenant, tt.wantPlan, tt.wantTenant)
			}
			if tt.wantStatus == 400 {
				var e struct {
					Error struct{ Code, Param, Message string }
				}
				json.Unmarshal(w.Body.Bytes(), &e)
				if tt.refuse && (e.Error.Code != "invalid_plugins" || e.Error.Param != "plugins" || !strings.Contains(e.Error.Message, "bad status")) {
					t.Errorf("error %+v", e.Error)
				}
				if st.wrote {
					t.Error("a refused write was stored")
				}
			}
			if tt.path == "/v1/admin/tenants/acme/plugins" && tt.wantStatus == 200 {
				b, _ := json.Marshal(st.stored)
				if !st.wrote || !bytes.Contains(b, []byte(`"hold":{"enabled":true}`)) {
					t.Errorf("stored %s", b)
				}
			}
		})
	}
}
