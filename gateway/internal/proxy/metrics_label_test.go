package proxy

import (
	"fmt"
	"strings"
	"testing"
)

// Metrics label a request's model with the policy's name or pattern for
// it: clients cannot add time series by inventing model names.
func TestModelLabelComesFromThePolicy(t *testing.T) {
	h := &hits{}
	up := newFakeUpstream(t, "a", h, step{})
	g := startTestGateway(t, routingPolicy(upstreamYAML("a", up.url, ""), `- {models: [m, "g-*"], upstream: a}`))
	for _, model := range []string{"m", "g-1", "g-2", "g-3"} {
		if r := g.chat(t, model, false); r.status != 200 {
			t.Fatalf("%s: %d %s", model, r.status, r.body)
		}
		g.log.line(t, fmt.Sprintf("rt-%d", g.seq.Load())) // its end work is done
	}
	got := g.metrics(t, "tollgate_requests_total")
	checkMetrics(t, got, map[string]string{
		`tollgate_requests_total{endpoint="/v1/chat/completions",model="m",status="200",upstream="a"}`:   "1",
		`tollgate_requests_total{endpoint="/v1/chat/completions",model="g-*",status="200",upstream="a"}`: "3",
	})
	for k := range got {
		if strings.Contains(k, `model="g-1"`) || strings.Contains(k, `model="g-2"`) {
			t.Errorf("a client's model name became a label: %s", k)
		}
	}
	if m := g.log.line(t, "rt-2"); m["model"].String() != "g-1" {
		t.Errorf("access log model %q, want the request's g-1", m["model"].String())
	}
}
