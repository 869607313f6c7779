package main

import (
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/sdk/plugintest"
	"github.com/tollgate/tollgate/sdk/wasmhost"
)

var acme = &wasmhost.Tenant{ID: "acme", KeyID: "k-1", Plan: "pro", Status: "active",
	RPM: 60, TPM: 1000, BudgetMicros: -1, MaxTokens: -1, PlanRPM: 60, PlanTPM: 1000, KeyRPM: 5, KeyTPM: -1}

func load(t testing.TB, config string, answer string) *plugintest.Plugin {
	t.Helper()
	p := plugintest.Load(t, plugintest.Build(t, "."), config)
	p.Services.Handle("ratelimit.admit", func([]byte) ([]byte, error) { return []byte(answer), nil })
	return p
}

// admissions are the ratelimit.admit requests the plugin made: dispatched,
// never called inline (an inline call holds the instance while the host
// waits on Redis).
func admissions(t testing.TB, p *plugintest.Plugin) []string {
	t.Helper()
	if calls := p.Services.Calls(); len(calls) != 0 {
		t.Fatalf("inline calls %+v, want every admission dispatched", calls)
	}
	var reqs []string
	for _, d := range p.Services.Dispatched() {
		if d.Service != "ratelimit.admit" {
			t.Fatalf("dispatched %+v", d)
		}
		reqs = append(reqs, d.Request)
	}
	return reqs
}

func TestAdmitRequestAndHeaders(t *testing.T) {
	p := load(t, `{"models":[{"match":"gpt-4*","rpm":7},{"match":"*","tpm":99}],"anonymous":{"rpm":3}}`, "allowed")
	res := p.Request(plugintest.Request{Model: "gpt-4o", MaxTokens: 100, Tenant: acme})
	if res.Rejected || res.Err != nil {
		t.Fatalf("%+v", res)
	}
	calls := admissions(t, p)
	if len(calls) != 1 {
		t.Fatalf("calls %+v", calls)
	}
	// The estimate: no prompt estimate in this harness (0) + max_tokens;
	// the limit lines come from the config, the host fills them in.
	want := "fail_open 0 100\ntenant\nkey\nmodel gpt-4* 7 0\nmodel * 0 99\nanon 3 0\n"
	if calls[0] != want {
		t.Errorf("admit request %q, want %q", calls[0], want)
	}
	p.Request(plugintest.Request{})
	if got := admissions(t, p)[1]; got != "fail_open 0 512\ntenant\nkey\nmodel gpt-4* 7 0\nmodel * 0 99\nanon 3 0\n" {
		t.Errorf("default estimate: %q", got)
	}
}

func TestLimitedIsOpenAI429(t *testing.T) {
	tests := []struct {
		name, answer, typ, unit, _ string
	}{
		{"requests", "limited requests 5 1500", "requests", "requests per min (RPM): limit 5. Please try again in 1.5s", ""},
		{"tokens", "limited tokens 1000 200", "tokens", "tokens per min (TPM): limit 1000. Please try again in 200ms", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := load(t, `{}`, tt.answer).Request(plugintest.Request{Tenant: acme})
			if !res.Rejected || res.Status != 429 || res.Type != tt.typ || res.Code != "rate_limit_exceeded" {
				t.Fatalf("%+v", res)
			}
			if !strings.Contains(res.Message, tt.unit) {
				t.Errorf("message %q lacks %q", res.Message, tt.unit)
			}
		})
	}
}

func TestRedisDown(t *testing.T) {
	res := load(t, `{"on_redis_error":"fail_closed"}`, "unavailable").Request(plugintest.Request{Tenant: acme})
	if !res.Rejected || res.Status != 503 || res.Code != "rate_limiter_unavailable" {
		t.Fatalf("fail_closed: %+v", res)
	}
	res = load(t, `{"on_redis_error":"fail_open"}`, "unavailable").Request(plugintest.Request{Tenant: acme})
	if res.Rejected || res.Err != nil {
		t.Fatalf("fail_open: %+v", res)
	}
}

// Every answer of the dispatched admission, and its failures, under both
// on_redis_error settings: the verdict, the error and the counters.
func TestAdmissionAnswers(t *testing.T) {
	tests := []struct {
		name, config string
		answer       plugintest.Answer
		noService    bool // ratelimit.admit not served: dispatch refused
		status       int  // 0: admitted
		code         string
		rejected     int64 // the "rejected" counter
		failOpen     int64 // the "fail_open_admissions" counter
	}{
		{name: "allowed", config: `{}`, answer: plugintest.Answer{Body: "allowed"}},
		{name: "unlimited", config: `{}`, answer: plugintest.Answer{Body: "unlimited"}},
		{name: "limited", config: `{}`, answer: plugintest.Answer{Body: "limited requests 5 1500"}, status: 429, code: "rate_limit_exceeded", rejected: 1},
		{name: "limited, fail_closed", config: `{"on_redis_error":"fail_closed"}`, answer: plugintest.Answer{Body: "limited tokens 9 1"}, status: 429, code: "rate_limit_exceeded", rejected: 1},
		{name: "a malformed refusal, fail_open", config: `{}`, answer: plugintest.Answer{Body: "limited requests"}, rejected: 1, failOpen: 1},
		{name: "a malformed refusal, fail_closed", config: `{"on_redis_error":"fail_closed"}`, answer: plugintest.Answer{Body: "limited requests"}, status: 503, code: "rate_limiter_unavailable", rejected: 1},
		{name: "store down, fail_open", config: `{"on_redis_error":"fail_open"}`, answer: plugintest.Answer{Body: "unavailable"}, failOpen: 1},
		{name: "store down, fail_closed", config: `{"on_redis_error":"fail_closed"}`, answer: plugintest.Answer{Body: "unavailable"}, status: 503, code: "rate_limiter_unavailable"},
		{name: "an unknown answer, fail_open", config: `{}`, answer: plugintest.Answer{Body: "maybe"}, failOpen: 1},
		{name: "an unknown answer, fail_closed", config: `{"on_redis_error":"fail_closed"}`, answer: plugintest.Answer{Body: "maybe"}, status: 503, code: "rate_limiter_unavailable"},
		{name: "the call failed, fail_open", config: `{}`, answer: plugintest.Answer{Status: plugintest.Unavailable}, failOpen: 1},
		{name: "the call failed, fail_closed", config: `{"on_redis_error":"fail_closed"}`, answer: plugintest.Answer{Status: plugintest.Timeout}, status: 503, code: "rate_limiter_unavailable"},
		{name: "not served, fail_open", config: `{}`, noService: true, failOpen: 1},
		{name: "not served, fail_closed", config: `{"on_redis_error":"fail_closed"}`, noService: true, status: 503, code: "rate_limiter_unavailable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := plugintest.Load(t, plugintest.Build(t, "."), tt.config)
			if !tt.noService {
				p.Services.AnswerService("ratelimit.admit", func([]byte) plugintest.Answer { return tt.answer })
			}
			res := p.Request(plugintest.Request{Tenant: acme})
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
			if n := len(p.Services.Dispatched()); n != 1 && !tt.noService || n != 0 && tt.noService {
				t.Errorf("%d calls started", n)
			}
		})
	}
}

func TestUnlimited(t *testing.T) {
	if res := load(t, `{}`, "unlimited").Request(plugintest.Request{}); res.Rejected || res.Err != nil {
		t.Fatalf("%+v", res)
	}
}

func TestConfigRefused(t *testing.T) {
	for _, c := range []string{`{"on_redis_error":"maybe"}`, `{"replicas":-1}`, `{"replicas":1001}`, `{"models":[{"match":"a b","rpm":1}]}`,
		`{"models":[{"match":"x"}]}`, `{"nope":1}`, `{"models":[{"match":"[","rpm":1}]}`} {
		if _, err := plugintest.LoadErr(t, plugintest.Build(t, "."), c); err == nil {
			t.Errorf("config %s accepted", c)
		}
	}
}

// TestReplicasFloor: replicas is a floor the host divides by when the live
// replica count is lower; absent is 0 (the live count alone), and the old
// settings (1, 3, ...) stay valid.
func TestReplicasFloor(t *testing.T) {
	for _, tc := range []struct{ config, head string }{
		{`{}`, "fail_open 0 512\n"},
		{`{"replicas":0}`, "fail_open 0 512\n"},
		{`{"replicas":1}`, "fail_open 1 512\n"},
		{`{"replicas":20,"on_redis_error":"fail_closed"}`, "fail_closed 20 512\n"},
		{`{"replicas":1000}`, "fail_open 1000 512\n"},
	} {
		p := load(t, tc.config, "allowed")
		p.Request(plugintest.Request{Tenant: acme})
		if got := admissions(t, p); len(got) != 1 || !strings.HasPrefix(got[0], tc.head) {
			t.Errorf("config %s: admission %q, want it to start %q", tc.config, got, tc.head)
		}
	}
}

func BenchmarkRequest(b *testing.B) {
	p := load(b, `{}`, "allowed")
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		p.Request(plugintest.Request{Tenant: acme})
	}
}

// callbacks counts the request phase's callbacks.
type callbacks struct{ n int }

func (c *callbacks) ObserveDuration(time.Duration) { c.n++ }

// An admission is consumed by the host (sdk.ExpectResponse): one callback
// per admitted request; a refusal or a failure reaches on_call_response.
func TestAdmissionNeedsNoCallback(t *testing.T) {
	tests := []struct {
		answer    plugintest.Answer
		callbacks int
		rejected  bool
	}{
		{plugintest.Answer{Body: "allowed"}, 1, false},
		{plugintest.Answer{Body: "unlimited"}, 1, false},
		{plugintest.Answer{Body: "limited requests 5 1500"}, 2, true},
		{plugintest.Answer{Body: "unavailable"}, 2, true},
		{plugintest.Answer{Status: plugintest.Timeout}, 2, true},
	}
	for _, tt := range tests {
		t.Run(tt.answer.Body, func(t *testing.T) {
			p := plugintest.Load(t, plugintest.Build(t, "."), `{"on_redis_error":"fail_closed"}`)
			var cb callbacks
			p.Instrument(wasmhost.Instruments{Request: &cb})
			p.Services.AnswerService("ratelimit.admit", func([]byte) plugintest.Answer { return tt.answer })
			res := p.Request(plugintest.Request{Tenant: acme})
			if res.Err != nil || res.Rejected != tt.rejected {
				t.Fatalf("got %+v, want rejected %v", res, tt.rejected)
			}
			if cb.n != tt.callbacks {
				t.Errorf("%d callbacks, want %d", cb.n, tt.callbacks)
			}
		})
	}
}
