package main

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/sdk/plugintest"
	"github.com/tollgate/tollgate/sdk/wasmhost"
)

// omniCategories are omni-moderation's 13 categories, in its order.
var omniCategories = []string{
	"harassment", "harassment/threatening", "hate", "hate/threatening", "illicit", "illicit/violent",
	"self-harm", "self-harm/intent", "self-harm/instructions", "sexual", "sexual/minors", "violence", "violence/graphic",
}

// omniAnswer is an omni-moderation answer as OpenAI writes it: every
// category with its verdict, score and input types; flag names the
// categories scored 0.99.
func omniAnswer(flag ...string) string {
	var cats, scores, applied strings.Builder
	flagged := false
	for i, c := range omniCategories {
		if i > 0 {
			cats.WriteString(",")
			scores.WriteString(",")
			applied.WriteString(",")
		}
		s := 1.2345678901234567e-05 * float64(i+1)
		for _, f := range flag {
			if f == c {
				s, flagged = 0.99, true
			}
		}
		q := strconv.Quote(c)
		cats.WriteString(q + ":" + strconv.FormatBool(s >= 0.5))
		scores.WriteString(q + ":" + strconv.FormatFloat(s, 'g', -1, 64))
		applied.WriteString(q + `:["text"]`)
	}
	return `{"id":"modr-0123456789abcdef","model":"omni-moderation-latest","results":[{"flagged":` + strconv.FormatBool(flagged) +
		`,"categories":{` + cats.String() + `},"category_scores":{` + scores.String() +
		`},"category_applied_input_types":{` + applied.String() + `}}]}`
}

// callbackTime sums the callbacks' durations, as the gateway's
// tollgate_plugin_phase_duration_seconds observes them.
type callbackTime struct {
	n     int
	total time.Duration
}

func (c *callbackTime) ObserveDuration(d time.Duration) { c.n++; c.total += d }

// BenchmarkPluginRequest is one request through the built plugin and the
// gateway's plugin host: the request callback, which dispatches the
// classifier's call, and the on_call_response callback, which reads its
// omni-moderation answer (clean: the request goes on). ns/op includes
// the test's fake services; callback-ns/req is the two callbacks alone,
// what the gateway's per-plugin histogram measures:
//
//	go test -run '^$' -bench PluginRequest -count 5 ./plugins/moderation
func BenchmarkPluginRequest(b *testing.B) {
	p := plugintest.Load(b, plugintest.Build(b, "."), `{"endpoint":"`+endpoint+`","headers":{"X-Team":"search"}}`)
	p.Services.AnswerHTTP(endpoint, fixed(plugintest.Answer{Body: omniAnswer()}))
	req := chat(strings.Repeat("What is the capital of France? ", 16))
	for range 200 {
		p.Request(req)
	}
	var t callbackTime
	p.Instrument(wasmhost.Instruments{Request: &t})
	b.ReportAllocs()
	for b.Loop() {
		if res := p.Request(req); res.Err != nil || res.Rejected {
			b.Fatalf("%+v", res)
		}
	}
	if t.n != 2*b.N {
		b.Fatalf("%d callbacks in %d requests, want 2 a request", t.n, b.N)
	}
	b.ReportMetric(float64(t.total.Nanoseconds())/float64(b.N), "callback-ns/req")
}

// BenchmarkParseAnswer is the answer parser natively, on a clean answer,
// into the answer the plugin reuses, without thresholds (the default).
func BenchmarkParseAnswer(b *testing.B) {
	body := []byte(omniAnswer())
	var a answer
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if err := a.parse(body, false); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppendRequest is the classifier's request body and cache key
// natively.
func BenchmarkAppendRequest(b *testing.B) {
	c, err := parseConfig([]byte(`{"endpoint":"` + endpoint + `"}`))
	if err != nil {
		b.Fatal(err)
	}
	text := []byte(strings.Repeat("What is the capital of France? ", 16))
	var body, k []byte
	b.ReportAllocs()
	for b.Loop() {
		body = c.appendRequest(body[:0], text)
		k = c.cacheKey(k[:0], text)
	}
}
