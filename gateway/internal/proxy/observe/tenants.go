package observe

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/gateway/internal/obs"
)

// tenantSeries are one tenant's series of the tenant-labelled metrics,
// resolved once when the tenant is admitted to the label (or shared by
// every tenant counted as other), so a request adds to them without the
// label hashing of WithLabelValues.
type tenantSeries struct {
	prompt, completion, cost prometheus.Counter
}

// add counts a request's tokens and cost.
func (s *tenantSeries) add(prompt, completion, costMicros int64) {
	if prompt > 0 {
		s.prompt.Add(float64(prompt))
	}
	if completion > 0 {
		s.completion.Add(float64(completion))
	}
	if costMicros > 0 {
		s.cost.Add(float64(costMicros))
	}
}

// Help texts of the tenant-labelled metrics.
const (
	tokensHelp = "Tokens used by tenant and type, prompt or completion (the upstream's usage, else the gateway's count; OpenTelemetry gen_ai.usage.input_tokens, gen_ai.usage.output_tokens)."
	costHelp   = "Cost of the requests by tenant, in USD micros."
	// capNote says what tenant="other" holds.
	capNote = " Tenants past metrics.max_tenants (the first ones seen keep their own label) are counted as tenant=\"other\"."
)

// newTenantSeries makes the tenant-labelled metrics and o.tenants, which
// resolves a tenant's series, and returns the collectors to register.
// maxTenants ≤ 0 drops the tenant label: one series per type, and one of
// cost, for every tenant (docs/adr/0023-closed-metrics.md).
func (o *Metrics) newTenantSeries(maxTenants int) []prometheus.Collector {
	if maxTenants <= 0 {
		tokens := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tollgate_tokens_total",
			Help: "Tokens used by type, prompt or completion, all tenants together (metrics.max_tenants: 0; the upstream's usage, else the gateway's count; OpenTelemetry gen_ai.usage.input_tokens, gen_ai.usage.output_tokens)."},
			[]string{"type"})
		cost := prometheus.NewCounter(prometheus.CounterOpts{Name: "tollgate_cost_usd_micros_total",
			Help: "Cost of the requests, all tenants together (metrics.max_tenants: 0), in USD micros."})
		all := &tenantSeries{prompt: tokens.WithLabelValues("prompt"), completion: tokens.WithLabelValues("completion"), cost: cost}
		o.tenants = obs.NewLabelCap(0, func(string) *tenantSeries { return all })
		return []prometheus.Collector{tokens, cost}
	}
	tokens := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tollgate_tokens_total", Help: tokensHelp + capNote},
		[]string{"tenant", "type"})
	cost := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tollgate_cost_usd_micros_total", Help: costHelp + capNote},
		[]string{"tenant"})
	o.tenants = obs.NewLabelCap(maxTenants, func(tenant string) *tenantSeries {
		return &tenantSeries{prompt: tokens.WithLabelValues(tenant, "prompt"),
			completion: tokens.WithLabelValues(tenant, "completion"), cost: cost.WithLabelValues(tenant)}
	})
	return []prometheus.Collector{tokens, cost}
}
