package observe

import (
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"testing"
)

// tenantTotals sums a scrape's tenant-labelled series: by series (the
// line's labels) and over all of them, per metric.
func tenantTotals(t *testing.T, lines []string) (series map[string]float64, sums map[string]float64) {
	t.Helper()
	series, sums = map[string]float64{}, map[string]float64{}
	for _, l := range lines {
		if strings.HasPrefix(l, "#") || !(strings.HasPrefix(l, "tollgate_tokens_total") || strings.HasPrefix(l, "tollgate_cost_usd_micros_total")) {
			continue
		}
		name, value, ok := strings.Cut(l, " ")
		if !ok {
			t.Fatalf("line %q", l)
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		series[name] = v
		metric, _, _ := strings.Cut(name, "{")
		if strings.Contains(name, `type="completion"`) {
			metric += "/completion"
		}
		sums[metric] += v
	}
	return series, sums
}

// With metrics.max_tenants at 2 and 5 tenants calling, a scrape has the
// first two tenants' series and other's, and over them the tokens and
// cost add up to what the five used; at 0 there is no tenant label.
func TestTenantLabelCap(t *testing.T) {
	tests := []struct {
		name       string
		maxTenants int
		want       map[string]float64 // every tenant-labelled series
	}{
		{"cap 2", 2, map[string]float64{
			`tollgate_tokens_total{tenant="t1",type="prompt"}`:        1 + 1,
			`tollgate_tokens_total{tenant="t1",type="completion"}`:    10 + 10,
			`tollgate_cost_usd_micros_total{tenant="t1"}`:             100 + 100,
			`tollgate_tokens_total{tenant="t2",type="prompt"}`:        2,
			`tollgate_tokens_total{tenant="t2",type="completion"}`:    20,
			`tollgate_cost_usd_micros_total{tenant="t2"}`:             200,
			`tollgate_tokens_total{tenant="other",type="prompt"}`:     3 + 4 + 5,
			`tollgate_tokens_total{tenant="other",type="completion"}`: 30 + 40 + 50,
			`tollgate_cost_usd_micros_total{tenant="other"}`:          300 + 400 + 500,
		}},
		{"cap 0: no tenant label", 0, map[string]float64{
			`tollgate_tokens_total{type="prompt"}`:     1 + 1 + 2 + 3 + 4 + 5,
			`tollgate_tokens_total{type="completion"}`: 10 + 10 + 20 + 30 + 40 + 50,
			`tollgate_cost_usd_micros_total`:           100 + 100 + 200 + 300 + 400 + 500,
		}},
		{"room for all", 100, map[string]float64{
			`tollgate_tokens_total{tenant="t1",type="prompt"}`: 2, `tollgate_tokens_total{tenant="t1",type="completion"}`: 20, `tollgate_cost_usd_micros_total{tenant="t1"}`: 200,
			`tollgate_tokens_total{tenant="t2",type="prompt"}`: 2, `tollgate_tokens_total{tenant="t2",type="completion"}`: 20, `tollgate_cost_usd_micros_total{tenant="t2"}`: 200,
			`tollgate_tokens_total{tenant="t3",type="prompt"}`: 3, `tollgate_tokens_total{tenant="t3",type="completion"}`: 30, `tollgate_cost_usd_micros_total{tenant="t3"}`: 300,
			`tollgate_tokens_total{tenant="t4",type="prompt"}`: 4, `tollgate_tokens_total{tenant="t4",type="completion"}`: 40, `tollgate_cost_usd_micros_total{tenant="t4"}`: 400,
			`tollgate_tokens_total{tenant="t5",type="prompt"}`: 5, `tollgate_tokens_total{tenant="t5",type="completion"}`: 50, `tollgate_cost_usd_micros_total{tenant="t5"}`: 500,
			`tollgate_tokens_total{tenant="other",type="prompt"}`: 0, `tollgate_tokens_total{tenant="other",type="completion"}`: 0, `tollgate_cost_usd_micros_total{tenant="other"}`: 0,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := NewMetrics(nil, nil, tt.maxTenants)
			o.SetSources(zeroSources())
			// Tenant tN uses N prompt tokens, 10N completion tokens and
			// 100N micros; t1 calls first and again last.
			for _, n := range []int{1, 2, 3, 4, 5, 1} {
				f := finished()
				f.Row.TenantID = fmt.Sprintf("t%d", n)
				f.Row.PromptTokens, f.Row.CompletionTokens, f.Row.CostMicros = int64(n), int64(10*n), int64(100*n)
				o.Record(&f, nil, slog.New(slog.DiscardHandler))
			}
			series, sums := tenantTotals(t, scrape(t, o))
			if len(series) != len(tt.want) {
				t.Errorf("%d tenant-labelled series, want %d: %v", len(series), len(tt.want), series)
			}
			for k, v := range tt.want {
				if got, ok := series[k]; !ok || got != v {
					t.Errorf("%s = %v (present %v), want %v", k, got, ok, v)
				}
			}
			// tollgate_tokens_total is the prompt tokens' series here; the
			// completion ones are summed apart.
			for metric, want := range map[string]float64{"tollgate_tokens_total": 1 + 1 + 2 + 3 + 4 + 5,
				"tollgate_tokens_total/completion": 160, "tollgate_cost_usd_micros_total": 1600} {
				if sums[metric] != want {
					t.Errorf("%s sums to %v over its series, want %v", metric, sums[metric], want)
				}
			}
		})
	}
}

// Recording a request's tenant series allocates nothing, whether the
// tenant has its own label or is counted as other.
func TestTenantSeriesAllocs(t *testing.T) {
	o := NewMetrics(nil, nil, 1)
	o.SetSources(zeroSources())
	for _, tenant := range []string{"t1", "t2"} {
		o.tenants.Get(tenant).add(1, 1, 1)
		if n := testing.AllocsPerRun(1000, func() { o.tenants.Get(tenant).add(1, 2, 3) }); n != 0 {
			t.Errorf("tenant %s: %v allocations per request, want 0", tenant, n)
		}
	}
}
