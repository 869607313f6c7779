package chains

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/tenant"
	"github.com/tollgate/tollgate/sdk/wasmbuild"
	"github.com/tollgate/tollgate/sdk/wasmhost"
)

// testPipeline loads the host's test plugin as p0 (its request phase sets
// X-C from its config) and p1.
func testPipeline(t *testing.T) (*wasmhost.Pipeline, []wasmhost.Spec) {
	t.Helper()
	path, err := wasmbuild.Cached("../../../sdk/wasmhost/testdata/testplugin")
	if err != nil {
		t.Fatal(err)
	}
	mod, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	host, err := wasmhost.NewHost("", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { host.Close() })
	specs := []wasmhost.Spec{
		{Name: "p0", Module: mod, Config: []byte(`{"request":"set_response_header:X-C=base", "reject_message":"<m>"}`), Deadline: 200 * time.Millisecond},
		{Name: "p1", Module: mod, Config: []byte(`{"request":"set_response_header:X-D=1"}`), Deadline: 200 * time.Millisecond},
	}
	pipe, err := wasmhost.NewPipeline(context.Background(), host, specs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pipe.Close)
	return pipe, specs
}

func TestCompilerMerges(t *testing.T) {
	pipe, specs := testPipeline(t)
	c, err := New(pipe, specs)
	if err != nil {
		t.Fatal(err)
	}
	on, off := true, false
	cfg := func(s string) []byte { return []byte(s) }
	tests := []struct {
		name        string
		plan, tn    tenant.PluginOverrides
		wantHeaders string
	}{
		{"none", nil, nil, "X-C=base;X-D=1"},
		{"the plan's config", tenant.PluginOverrides{"p0": {Config: cfg(`{"request":"set_response_header:X-C=plan"}`)}}, nil, "X-C=plan;X-D=1"},
		{"the tenant's over the plan's", tenant.PluginOverrides{"p0": {Config: cfg(`{"request":"set_response_header:X-C=plan"}`)}},
			tenant.PluginOverrides{"p0": {Config: cfg(`{"request":"set_response_header:X-C=tenant"}`)}}, "X-C=tenant;X-D=1"},
		{"null removes a key", tenant.PluginOverrides{"p0": {Config: cfg(`{"request":"set_response_header:X-C=plan"}`)}},
			tenant.PluginOverrides{"p0": {Config: cfg(`{"request":null}`)}}, "X-D=1"},
		{"the plan switches off", tenant.PluginOverrides{"p1": {Enabled: &off}}, nil, "X-C=base"},
		{"the tenant switches back on", tenant.PluginOverrides{"p1": {Enabled: &off}}, tenant.PluginOverrides{"p1": {Enabled: &on}}, "X-C=base;X-D=1"},
		{"the policy's own config is no variant", tenant.PluginOverrides{"p0": {Config: cfg(`{"reject_message":"<m>"}`)}}, nil, "X-C=base;X-D=1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ps := tenant.NewPluginSet("plan", tt.plan, "tn", tt.tn)
			ov, err := c.Compile(ps)
			if err != nil {
				t.Fatal(err)
			}
			if again, _ := c.Compile(ps); again != ov {
				t.Error("a second Compile of the same snapshot's overrides compiled again")
			}
			r := wasmhost.AcquireRequest()
			defer wasmhost.ReleaseRequest(r)
			r.Body = []byte(`{}`)
			r.Tenant = &wasmhost.Tenant{ID: "tn", Plugins: ov}
			if err := pipe.Request(r); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, h := range r.SetClientHeaders {
				got = append(got, string(h.Name)+"="+string(h.Value))
			}
			if g := strings.Join(got, ";"); g != tt.wantHeaders {
				t.Errorf("headers %q, want %q", g, tt.wantHeaders)
			}
		})
	}
	if n := pipe.Variants("p0"); n != 3 {
		t.Errorf("p0 has %d variants, want 3 (plan, tenant, without request)", n)
	}
}

func TestCompilerErrors(t *testing.T) {
	pipe, specs := testPipeline(t)
	c, err := New(pipe, specs)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		plan tenant.PluginOverrides
		want []string
	}{
		{"unknown plugin", tenant.PluginOverrides{"zz": {}}, []string{`plugin "zz"`, `"p0", "p1"`}},
		{"not an object", tenant.PluginOverrides{"p0": {Config: []byte(`[1]`)}}, []string{`plugin "p0"`, "JSON object"}},
		{"refused by the plugin", tenant.PluginOverrides{"p1": {Config: []byte(`{"configure":"fail","fail_message":"threshold too high"}`)}},
			[]string{`"p1"`, "threshold too high"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := c.Check(context.Background(), tt.plan, nil)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			ps := tenant.NewPluginSet("gold", tt.plan, "acme", nil)
			if _, err := c.Compile(ps); err == nil || !strings.Contains(err.Error(), `tenant "acme" on plan "gold"`) {
				t.Errorf("Compile: %v, want an error naming tenant and plan", err)
			}
		})
	}
	var none *Compiler
	if ov, err := none.Compile(tenant.NewPluginSet("p", tenant.PluginOverrides{"x": {}}, "t", nil)); ov != nil || err != nil {
		t.Errorf("nil compiler: %v, %v", ov, err)
	}
}
