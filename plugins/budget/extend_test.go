package main

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/sdk/plugintest"
	"github.com/tollgate/tollgate/sdk/wasmhost"
)

// answers answers the dispatched calls of service in turn from list (the
// last one again when it runs out) and records their requests.
type answers struct {
	mu   sync.Mutex
	list []plugintest.Answer
	reqs []string
}

func (a *answers) serve(p *plugintest.Plugin, service string) {
	p.Services.AnswerService(service, func(req []byte) plugintest.Answer {
		a.mu.Lock()
		defer a.mu.Unlock()
		a.reqs = append(a.reqs, string(req))
		ans := a.list[min(len(a.reqs), len(a.list))-1]
		return ans
	})
}

func (a *answers) requests() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return strings.Join(a.reqs, ",")
}

func body(text string) plugintest.Answer { return plugintest.Answer{Body: text} }

// The answers of budget.reserve that the request phase handles besides
// TestReserve's: failed calls, a service not served, and what a refused
// or unheld stream leaves for the chunk phase (nothing: no extension).
func TestReserveAnswers(t *testing.T) {
	tests := []struct {
		name, config string
		answer       plugintest.Answer
		noService    bool
		status       int // 0: admitted
		code         string
		rejected     int64
		failOpen     int64
		extends      bool // the stream's first large event asks for more
	}{
		{name: "held", config: `{}`, answer: body("ok 1 1"), extends: true},
		{name: "insufficient", config: `{}`, answer: body("insufficient 1 0 tenant:month"), status: 429, code: "insufficient_quota", rejected: 1},
		{name: "unlimited", config: `{}`, answer: body("unlimited")},
		{name: "no price", config: `{}`, answer: body("noprice")},
		{name: "counter down, fail_open", config: `{"on_redis_error":"fail_open"}`, answer: body("unavailable"), failOpen: 1},
		{name: "the call timed out, fail_closed", config: `{}`, answer: plugintest.Answer{Status: plugintest.Timeout}, status: 503, code: "budget_unavailable"},
		{name: "the call failed, fail_open", config: `{"on_redis_error":"fail_open"}`, answer: plugintest.Answer{Status: plugintest.Unavailable}, failOpen: 1},
		{name: "not served, fail_closed", config: `{}`, noService: true, status: 503, code: "budget_unavailable"},
		{name: "not served, fail_open", config: `{"on_redis_error":"fail_open"}`, noService: true, failOpen: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := plugintest.Load(t, plugintest.Build(t, "."), tt.config)
			p.Services.Models = map[string]wasmhost.ModelFacts{"m-1": {Known: true}}
			if !tt.noService {
				p.Services.AnswerService("budget.reserve", func([]byte) plugintest.Answer { return tt.answer })
			}
			ext := &answers{list: []plugintest.Answer{body("ok 1 1")}}
			ext.serve(p, "budget.extend")
			sess := p.Session(plugintest.Request{Body: chat(`"stream":true,`, "hi"), Tenant: acme})
			res := sess.Request()
			if res.Err != nil {
				t.Fatal(res.Err)
			}
			if res.Rejected != (tt.status != 0) || res.Status != tt.status || res.Code != tt.code {
				t.Fatalf("got %+v, want %d %q", res, tt.status, tt.code)
			}
			if got := p.Metric("rejected"); got != tt.rejected {
				t.Errorf("rejected %d, want %d", got, tt.rejected)
			}
			if got := p.Metric("fail_open_admissions"); got != tt.failOpen {
				t.Errorf("fail_open_admissions %d, want %d", got, tt.failOpen)
			}
			if tt.status != 0 {
				return
			}
			st := sess.Send(plugintest.Event{Text: strings.Repeat("x", 1500)})
			if st.Err != nil || st.Verdict != wasmhost.Continue || len(st.Out) != 1 {
				t.Fatalf("event: %+v", st)
			}
			if extended := ext.requests() != ""; extended != tt.extends {
				t.Errorf("extensions %q, want some: %v", ext.requests(), tt.extends)
			}
		})
	}
}

// A growing stream's extensions are dispatched from the chunk phase, the
// event waiting on the answer: each answer of budget.extend, and its
// failures, decide the event as an inline call did.
func TestExtensionAnswers(t *testing.T) {
	const cut = "\n\n[The reply was cut: the API key's daily budget is exhausted.]"
	tests := []struct {
		name, config string
		events       []int // the text bytes of each event
		answers      []plugintest.Answer
		noService    bool
		requests     string // the extensions asked for
		cut          bool   // the last event cut the reply
		skips        bool   // the chunk phase is skipped after the last event
		message      string // the cut's final text
	}{
		// 400 bytes: 401 used, slack 802, 903 missing from the 300 held.
		{name: "extended", config: `{"default_max_tokens":300,"extend_tokens":100}`, events: []int{400},
			answers: []plugintest.Answer{body("ok 1 1")}, requests: "903 900000"},
		{name: "extended twice", config: `{"default_max_tokens":300,"extend_tokens":100}`, events: []int{400, 400},
			answers: []plugintest.Answer{body("ok 1 1")}, requests: "903 900000,401 900000"},
		{name: "refused: a smaller step, then cut", config: `{"default_max_tokens":300,"extend_tokens":2000}`, events: []int{400},
			answers: []plugintest.Answer{body("insufficient 2000 5 key:day")}, requests: "2000 900000,903 900000", cut: true, message: cut},
		{name: "the smaller step fits", config: `{"default_max_tokens":300,"extend_tokens":2000}`, events: []int{400},
			answers: []plugintest.Answer{body("insufficient 2000 5 key:day"), body("ok 903 1")}, requests: "2000 900000,903 900000"},
		// 40 and 40 bytes: 82 used, largest 41; 38 missing, but the next
		// event fits even if twice the largest.
		{name: "refused, the next event fits", config: `{"default_max_tokens":300,"extend_tokens":100}`, events: []int{40, 40},
			answers: []plugintest.Answer{body("insufficient 100 0")}, requests: "100 900000,38 900000"},
		{name: "unlimited", config: `{"default_max_tokens":300}`, events: []int{400},
			answers: []plugintest.Answer{body("unlimited")}, requests: "1024 900000", skips: true},
		{name: "no price", config: `{"default_max_tokens":300}`, events: []int{400},
			answers: []plugintest.Answer{body("noprice")}, requests: "1024 900000", skips: true},
		{name: "counter down, fail_open", config: `{"default_max_tokens":300,"on_redis_error":"fail_open"}`, events: []int{400},
			answers: []plugintest.Answer{body("unavailable")}, requests: "1024 900000", skips: true},
		{name: "counter down, fail_closed", config: `{"default_max_tokens":300,"cut_message":"[cut]"}`, events: []int{400},
			answers: []plugintest.Answer{body("unavailable")}, requests: "1024 900000", cut: true, message: "[cut]"},
		{name: "the call failed", config: `{"default_max_tokens":300,"on_redis_error":"fail_open"}`, events: []int{400},
			answers: []plugintest.Answer{{Status: plugintest.Timeout}}, requests: "1024 900000", cut: true,
			message: "\n\n[The reply was cut: the monthly budget is exhausted.]"},
		{name: "not served", config: `{"default_max_tokens":300}`, events: []int{400}, noService: true, cut: true,
			message: "\n\n[The reply was cut: the monthly budget is exhausted.]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := load(t, tt.config, "ok 1 1", nil)
			p.Services.Models = map[string]wasmhost.ModelFacts{"m-1": {Known: true}}
			ext := &answers{list: tt.answers}
			if !tt.noService {
				ext.serve(p, "budget.extend")
			}
			sess := p.Session(plugintest.Request{Body: chat(`"stream":true,`, "hi"), Tenant: acme})
			if res := sess.Request(); res.Rejected || res.Err != nil {
				t.Fatalf("%+v", res)
			}
			var st plugintest.Step
			for _, n := range tt.events {
				st = sess.Send(plugintest.Event{Text: strings.Repeat("x", n)})
				if st.Err != nil {
					t.Fatal(st.Err)
				}
			}
			if got := ext.requests(); got != tt.requests {
				t.Errorf("extensions %q, want %q", got, tt.requests)
			}
			last := strings.Repeat("x", tt.events[len(tt.events)-1])
			if tt.cut {
				// The event waited on the answer: the client never
				// gets it, only the cut's text.
				if st.Verdict != wasmhost.Stop || len(st.Out) != 1 || st.Out[0].Text != tt.message || st.Out[0].FinishReason != "length" {
					t.Fatalf("step %+v, want a cut with %q", st, tt.message)
				}
				if f, _ := sess.Fact("guard_action"); f != "budget:cut" || p.Metric("streams_cut") != 1 {
					t.Errorf("fact %q, streams_cut %d", f, p.Metric("streams_cut"))
				}
				return
			}
			if st.Verdict != wasmhost.Continue || len(st.Out) != 1 || st.Out[0].Text != last || p.Metric("streams_cut") != 0 {
				t.Fatalf("step %+v, want the event through", st)
			}
			// Another large event: a skipped chunk phase asks for
			// nothing more.
			before := ext.requests()
			sess.Send(plugintest.Event{Text: strings.Repeat("y", 5000)})
			if more := ext.requests() != before; more == tt.skips {
				t.Errorf("after the chunk phase was skipped (%v): extensions %q", tt.skips, ext.requests())
			}
		})
	}
}

// callbacks counts the request phase's callbacks.
type callbacks struct{ n int }

func (c *callbacks) ObserveDuration(time.Duration) { c.n++ }

// A hold made ("ok ...") is consumed by the host (sdk.ExpectResponse):
// one callback per held request, and the chunk phase runs as it did —
// for a stream whose hold grows, not for a bounded reply. Other answers
// reach on_call_response.
func TestHeldNeedsNoCallback(t *testing.T) {
	tests := []struct {
		name      string
		stream    bool
		answer    string
		callbacks int
		rejected  bool
		chunks    bool // the chunk phase runs: the large event asks for more
	}{
		{"held, bounded", false, "ok 1 1", 1, false, false},
		{"held, growing", true, "ok 1 1", 1, false, true},
		{"refused, growing", true, "insufficient 1 0", 2, true, false},
		{"unlimited, growing", true, "unlimited", 2, false, false},
		{"a bare ok, growing", true, "ok", 2, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := plugintest.Load(t, plugintest.Build(t, "."), `{}`)
			p.Services.Models = map[string]wasmhost.ModelFacts{"m-1": {Known: true}}
			var cb callbacks
			p.Instrument(wasmhost.Instruments{Request: &cb})
			p.Services.AnswerService("budget.reserve", func([]byte) plugintest.Answer { return body(tt.answer) })
			ext := &answers{list: []plugintest.Answer{body("ok 1 1")}}
			ext.serve(p, "budget.extend")
			stream := `"max_tokens":5000,`
			if tt.stream {
				stream = `"stream":true,`
			}
			sess := p.Session(plugintest.Request{Body: chat(stream, "hi"), Tenant: acme})
			res := sess.Request()
			if res.Err != nil || res.Rejected != tt.rejected {
				t.Fatalf("got %+v, want rejected %v", res, tt.rejected)
			}
			if cb.n != tt.callbacks {
				t.Errorf("%d callbacks, want %d", cb.n, tt.callbacks)
			}
			if tt.rejected {
				return
			}
			if st := sess.Send(plugintest.Event{Text: strings.Repeat("x", 1500)}); st.Err != nil || len(st.Out) != 1 {
				t.Fatalf("event: %+v", st)
			}
			if extended := ext.requests() != ""; extended != tt.chunks {
				t.Errorf("extensions %q, want some: %v", ext.requests(), tt.chunks)
			}
		})
	}
}
