package wasmhost

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// counting is a test plugin config that counts each phase's callbacks in
// the metrics req, hdr, chunk and end; mark makes configs distinct and
// is the X-Mark response header the request phase sets.
func counting(mark string, extra ...string) string {
	req := `["metric:req","set_response_header:X-Mark-` + mark + `=1"` + strings.Join(extra, "") + `]`
	return fmt.Sprintf(`{"request":%s,"response_headers":"metric:hdr","chunk":"metric:chunk","end":"metric:end","reject_message":%q}`, req, mark)
}

// tally is what p's callbacks counted so far, per metric of counting.
func tally(p *Plugin) [4]int64 {
	var n [4]int64
	for i, m := range []string{"req", "hdr", "chunk", "end"} {
		if c, ok := p.Stats().Events.Load(m); ok {
			n[i] = c.(*atomic.Int64).Load()
		}
	}
	return n
}

// countsSince is what p's callbacks counted since before (a tally),
// "req/hdr/chunk/end": subtests sharing a pipeline each check their own
// request.
func countsSince(p *Plugin, before [4]int64) string {
	now := tally(p)
	parts := make([]string, len(now))
	for i := range now {
		parts[i] = fmt.Sprint(now[i] - before[i])
	}
	return strings.Join(parts, "/")
}

// tallies is tally of each of pl's plugins.
func tallies(pl *Pipeline) [][4]int64 {
	var ts [][4]int64
	for _, p := range pl.Plugins() {
		ts = append(ts, tally(p))
	}
	return ts
}

// runAll runs every phase of one request on pl.
func runAll(t *testing.T, pl *Pipeline, r *Request) {
	t.Helper()
	if err := pl.Request(r); err != nil {
		t.Fatal(err)
	}
	if err := pl.ResponseHeaders(r, 200); err != nil {
		t.Fatal(err)
	}
	if pl.Wants(r, PhaseChunk) {
		if _, err := pl.Chunk(r, []byte("hi"), ChunkText); err != nil {
			t.Fatal(err)
		}
	}
	pl.End(r, EndCompleted)
}

func loadSpecs(t *testing.T, specs ...Spec) *Pipeline {
	t.Helper()
	for i := range specs {
		specs[i].Module, specs[i].Deadline = testPlugin(t), 200*time.Millisecond
	}
	pl, err := NewPipeline(context.Background(), testHost(t), specs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pl.Close)
	return pl
}

func TestChainSelects(t *testing.T) {
	tests := []struct {
		name     string
		disabled bool // p1 is disabled in the policy
		chain    []string
		want     [3]string
		headers  string
	}{
		{"no chain: every plugin", false, nil, [3]string{"1/1/1/1", "1/1/1/1", "1/1/1/1"}, "X-Mark-a=1;X-Mark-b=1;X-Mark-c=1"},
		{"a route without p1", false, []string{"p0", "p2"}, [3]string{"1/1/1/1", "0/0/0/0", "1/1/1/1"}, "X-Mark-a=1;X-Mark-c=1"},
		{"no plugins", false, []string{}, [3]string{"0/0/0/0", "0/0/0/0", "0/0/0/0"}, ""},
		{"disabled p1, no chain", true, nil, [3]string{"1/1/1/1", "0/0/0/0", "1/1/1/1"}, "X-Mark-a=1;X-Mark-c=1"},
		{"disabled p1 in the chain", true, []string{"p1", "p2"}, [3]string{"0/0/0/0", "0/0/0/0", "1/1/1/1"}, "X-Mark-c=1"},
	}
	// One pipeline per policy (p1 disabled or not), shared by the
	// subtests: loading three plugins is most of a subtest's time under
	// -race. Each subtest checks what its own request counted.
	byDisabled := map[bool]*Pipeline{}
	for _, disabled := range []bool{false, true} {
		byDisabled[disabled] = loadSpecs(t, Spec{Name: "p0", Config: []byte(counting("a"))},
			Spec{Name: "p1", Config: []byte(counting("b")), Disabled: disabled},
			Spec{Name: "p2", Config: []byte(counting("c"))})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pl := byDisabled[tt.disabled]
			c, err := pl.Chain(tt.chain)
			if err != nil {
				t.Fatal(err)
			}
			r := request(`{}`)
			defer ReleaseRequest(r)
			r.SetChain(c)
			before := tallies(pl)
			runAll(t, pl, r)
			for i, p := range pl.Plugins() {
				if got := countsSince(p, before[i]); got != tt.want[i] {
					t.Errorf("%s counted %s, want %s", p.Name(), got, tt.want[i])
				}
			}
			if got := headers(r.SetClientHeaders); got != tt.headers {
				t.Errorf("headers %q, want %q", got, tt.headers)
			}
		})
	}
}

// A stream whose chain has no chunk plugin left is not offered to the
// chunk phase.
func TestChainWants(t *testing.T) {
	pl := loadSpecs(t, Spec{Name: "p0", Config: []byte(`{"phases":["request"]}`)},
		Spec{Name: "p1", Config: []byte(`{"phases":["chunk","end"]}`)})
	tests := []struct {
		chain                []string
		request, chunk, ends bool
	}{
		{nil, true, true, true},
		{[]string{"p0"}, true, false, false},
		{[]string{"p1"}, false, true, true},
		{[]string{}, false, false, false},
	}
	for _, tt := range tests {
		c, err := pl.Chain(tt.chain)
		if err != nil {
			t.Fatal(err)
		}
		r := request(`{}`)
		r.SetChain(c)
		got := [3]bool{pl.Wants(r, PhaseRequest), pl.Wants(r, PhaseChunk), pl.Wants(r, PhaseEnd)}
		if want := [3]bool{tt.request, tt.chunk, tt.ends}; got != want || !pl.Has(PhaseChunk) {
			t.Errorf("chain %v: wants request, chunk, end = %v, want %v", tt.chain, got, want)
		}
		ReleaseRequest(r)
	}
	if _, err := pl.Chain([]string{"p9"}); err == nil || !strings.Contains(err.Error(), `"p9"`) {
		t.Errorf("unknown plugin: err %v", err)
	}
}

// tenantService sets the request's tenant, with its override, when a
// plugin calls it: what the gateway's tenant.resolve does.
type tenantService struct{ ov *Override }

func (s tenantService) Call(r *Request, name string, req []byte) ([]byte, error) {
	r.Tenant = &Tenant{ID: "acme", Plugins: s.ov}
	return []byte("ok"), nil
}

func TestChainTenantOverride(t *testing.T) {
	on, off := true, false
	resolver := counting("a", `,"call:tenant.resolve"`)
	tests := []struct {
		name     string
		settings []PluginSetting
		// counts of p0 (the resolver), p1, p2, and p2's variant
		want    [4]string
		headers string
	}{
		{"no override", nil, [4]string{"1/1/1/1", "0/0/0/0", "1/1/1/1", ""}, "X-Mark-a=1;X-Call-Result=ok;X-Mark-c=1"},
		{"switch p1 on, p2 off", []PluginSetting{{Name: "p1", Enabled: &on}, {Name: "p2", Enabled: &off}},
			[4]string{"1/1/1/1", "1/1/1/1", "0/0/0/0", ""}, "X-Mark-a=1;X-Call-Result=ok;X-Mark-b=1"},
		{"p2 with its own config", []PluginSetting{{Name: "p2", Config: []byte(counting("v"))}},
			[4]string{"1/1/1/1", "0/0/0/0", "0/0/0/0", "1/1/1/1"}, "X-Mark-a=1;X-Call-Result=ok;X-Mark-v=1"},
		{"the resolver switched off keeps running", []PluginSetting{{Name: "p0", Enabled: &off}},
			[4]string{"1/1/1/1", "0/0/0/0", "1/1/1/1", ""}, "X-Mark-a=1;X-Call-Result=ok;X-Mark-c=1"},
		{"a config without enabled leaves a disabled plugin off", []PluginSetting{{Name: "p1", Config: []byte(counting("w"))}},
			[4]string{"1/1/1/1", "0/0/0/0", "1/1/1/1", ""}, "X-Mark-a=1;X-Call-Result=ok;X-Mark-c=1"},
	}
	// One pipeline shared by the subtests (see TestChainSelects); the
	// variants an override loads are kept by it, each subtest's its own.
	pl := loadSpecs(t, Spec{Name: "p0", Config: []byte(resolver)},
		Spec{Name: "p1", Config: []byte(counting("b")), Disabled: true},
		Spec{Name: "p2", Config: []byte(counting("c"))})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ov, err := pl.Override(context.Background(), tt.settings)
			if err != nil {
				t.Fatal(err)
			}
			r := request(`{}`)
			defer ReleaseRequest(r)
			r.Services = tenantService{ov: ov}
			before := tallies(pl)
			var variantBefore [4]int64
			if v := ov.variant; v != nil && v[2] != nil {
				variantBefore = tally(v[2])
			}
			runAll(t, pl, r)
			for i, p := range pl.Plugins() {
				if got := countsSince(p, before[i]); got != tt.want[i] {
					t.Errorf("%s counted %s, want %s", p.Name(), got, tt.want[i])
				}
			}
			if v := ov.variant; tt.want[3] != "" {
				if v == nil || v[2] == nil {
					t.Fatal("no variant of p2")
				}
				if got := countsSince(v[2], variantBefore); got != tt.want[3] {
					t.Errorf("p2's variant counted %s, want %s", got, tt.want[3])
				}
			}
			if got := headers(r.SetClientHeaders); got != tt.headers {
				t.Errorf("headers %q, want %q", got, tt.headers)
			}
		})
	}
}

func TestChainVariants(t *testing.T) {
	pl := loadSpecs(t, Spec{Name: "p0", Config: []byte(`{"request":"set_response_header:X-Config=policy"}`)})
	ctx := context.Background()
	base := pl.Plugins()[0]
	if v, err := pl.Variant(ctx, "p0", []byte(`{"request":"set_response_header:X-Config=policy"}`)); err != nil || v != base {
		t.Fatalf("the policy's config: %v, %v; want the policy's plugin", v, err)
	}
	a1, err := pl.Variant(ctx, "p0", []byte(`{"request":"set_response_header:X-Config=a"}`))
	if err != nil {
		t.Fatal(err)
	}
	a2, err := pl.Variant(ctx, "p0", []byte(`{"request":"set_response_header:X-Config=a"}`))
	if err != nil || a2 != a1 || a1 == base {
		t.Fatalf("the same config twice: %p, %p (%v); base %p", a1, a2, err, base)
	}
	_, err = pl.Variant(ctx, "p0", []byte(`{"configure":"fail","fail_message":"bad threshold"}`))
	if err == nil || !strings.Contains(err.Error(), "bad threshold") || !strings.Contains(err.Error(), `"p0"`) {
		t.Errorf("a refused config: err %v, want the plugin's message and name", err)
	}
	if n := pl.Variants("p0"); n != 1 {
		t.Errorf("variants = %d, want 1 (a refused config is not kept)", n)
	}
	if all := pl.WithVariants(); len(all) != 2 || all[0] != base || all[1] != a1 {
		t.Errorf("WithVariants = %v, want the policy's plugin and its one variant", all)
	}
	if _, err := pl.Variant(ctx, "p0", []byte(`{"phases":["request"]}`)); err == nil || !strings.Contains(err.Error(), "must not change a plugin's phases") {
		t.Errorf("a config changing the phases: err %v", err)
	}
	pl.vars.max = 4 // MaxVariants loads take seconds under -race
	for i := 0; pl.Variants("p0") < pl.vars.max; i++ {
		if _, err := pl.Variant(ctx, "p0", fmt.Appendf(nil, `{"reject_message":"%d"}`, i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pl.Variant(ctx, "p0", []byte(`{"reject_message":"one more"}`)); !errors.Is(err, ErrTooManyVariants) {
		t.Errorf("past the cap: err %v, want ErrTooManyVariants", err)
	}
	ov, err := pl.Override(ctx, []PluginSetting{{Name: "p0", Config: []byte(`{"request":"set_response_header:X-Config=a"}`)}})
	if err != nil {
		t.Fatal(err)
	}
	r := request(`{}`)
	defer ReleaseRequest(r)
	r.Tenant = &Tenant{ID: "t", Plugins: ov} // known before the first plugin
	if err := pl.Request(r); err != nil {
		t.Fatal(err)
	}
	if got := headers(r.SetClientHeaders); got != "X-Config=a" {
		t.Errorf("headers %q, want the variant's X-Config=a", got)
	}
	if _, err := pl.Override(ctx, []PluginSetting{{Name: "nope"}}); err == nil {
		t.Error("an override of an unknown plugin compiled")
	}
}
