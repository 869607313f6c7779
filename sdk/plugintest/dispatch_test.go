package plugintest_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/sdk/plugintest"
	"github.com/tollgate/tollgate/sdk/wasmhost"
)

const classifierURL = "https://classifier.test/v1/classify"

func classifierRequest(text string) plugintest.Request {
	return plugintest.Request{Body: `{"model":"m","messages":[{"role":"system","content":"be nice"},{"role":"user","content":"` + text + `"}]}`}
}

func TestDispatchedHTTP(t *testing.T) {
	wasm := plugintest.Build(t, "testdata/dispatchplugin")
	tests := []struct {
		name     string
		failOpen bool
		prefix   string // the URL prefix answered ("" none: not granted)
		answer   plugintest.Answer
		text     string
		rejected bool
		header   string // X-Classified
		failure  string // in the plugin failure's error
	}{
		{name: "passes", prefix: "https://classifier.test/", answer: plugintest.Answer{Body: "ok"}, text: "hello", header: "ok"},
		{name: "flagged", prefix: "https://classifier.test/v1/", answer: plugintest.Answer{Body: "flagged"}, text: "bad", rejected: true},
		{name: "timeout under fail_closed", prefix: "https://classifier.test/", answer: plugintest.Answer{Status: plugintest.Timeout}, text: "hi", failure: "FAIL"},
		{name: "timeout under fail_open", failOpen: true, prefix: "https://classifier.test/", answer: plugintest.Answer{Status: plugintest.Timeout}, text: "hi"},
		{name: "an error status", prefix: "https://classifier.test/", answer: plugintest.Answer{Status: 503, Body: "down"}, text: "hi", failure: "FAIL"},
		{name: "a URL not granted", prefix: "https://other.test/", text: "hi", failure: "FAIL"},
		{name: "a slow answer", prefix: "https://classifier.test/", answer: plugintest.Answer{Body: "slow", Delay: 300 * time.Millisecond}, text: "hi", header: "slow"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A deadline well under the slow answer's delay: the wait
			// does not count against it.
			p := plugintest.Load(t, wasm, `{"url":"`+classifierURL+`"}`, plugintest.Options{FailOpen: tt.failOpen, Deadline: 100 * time.Millisecond})
			p.Services.AnswerHTTP(tt.prefix, func(c *plugintest.HTTPCall) plugintest.Answer { return tt.answer })
			res := p.Request(classifierRequest(tt.text))
			if res.Rejected != tt.rejected || res.ClientHeaders["X-Classified"] != tt.header {
				t.Fatalf("got %+v", res)
			}
			if tt.rejected && (res.Status != 400 || res.Code != "content_flagged") {
				t.Errorf("rejection %+v", res)
			}
			var f *wasmhost.FailureError
			if tt.failure != "" && (!errors.As(res.Err, &f) || !strings.Contains(res.Err.Error(), tt.failure)) {
				t.Fatalf("err %v, want a failure with %q", res.Err, tt.failure)
			}
			if tt.failure == "" && res.Err != nil {
				t.Fatal(res.Err)
			}
			d := p.Services.Dispatched()
			if !strings.HasPrefix(classifierURL, tt.prefix) {
				if len(d) != 0 {
					t.Fatalf("a call not granted was made: %+v", d)
				}
				return
			}
			if len(d) != 1 || d[0].Service != "http" {
				t.Fatalf("dispatched %+v", d)
			}
			c := d[0].HTTP
			if c.Method != "POST" || c.URL != classifierURL || c.Header["Content-Type"] != "text/plain" ||
				c.Body != tt.text || c.CacheKey != tt.text || c.CacheTTL != time.Minute {
				t.Errorf("http call %+v", c)
			}
		})
	}
}

// Host services are dispatched too: answered by AnswerService, else by the
// Handle handlers with status 0; from on_request, after PAUSE or DEFER
// alike.
func TestDispatchedService(t *testing.T) {
	wasm := plugintest.Build(t, testPlugin)
	for _, verdict := range []string{"pause", "defer"} {
		t.Run(verdict, func(t *testing.T) {
			p := plugintest.Load(t, wasm, `{"request":["dispatch:quota.check=a","dispatch:score=b","dispatch:missing=c","`+verdict+`"],`+
				`"call_response":["record_response","pause_until:2"]}`)
			p.Services.Handle("quota.check", func(req []byte) ([]byte, error) { return []byte("ok " + string(req)), nil })
			p.Services.AnswerService("score", func(req []byte) plugintest.Answer {
				return plugintest.Answer{Body: "0.9", Header: map[string]string{"X-Test": "h"}}
			})
			res := p.Request(plugintest.Request{Body: `{}`})
			if res.Err != nil {
				t.Fatal(res.Err)
			}
			var got []string
			for _, d := range p.Services.Dispatched() {
				got = append(got, d.Service+"="+d.Request+"→"+d.Answer.Body)
			}
			if strings.Join(got, ",") != "quota.check=a→ok a,score=b→0.9" {
				t.Fatalf("dispatched %q", got)
			}
			if len(p.Services.Calls()) != 0 {
				t.Errorf("dispatched calls recorded as calls: %+v", p.Services.Calls())
			}
		})
	}
}

// callbacks counts a phase's callbacks (wasmhost.Instruments).
type callbacks struct{ n int }

func (c *callbacks) ObserveDuration(time.Duration) { c.n++ }

// A host service's answer the plugin expects (sdk.ExpectResponse) skips
// its OnCallResponse, as in the gateway; another is delivered.
func TestExpectedAnswer(t *testing.T) {
	wasm := plugintest.Build(t, testPlugin)
	tests := []struct {
		answer    string
		responses string
		callbacks int // on_request and the on_call_responses
	}{
		{"ok 1", "", 1},
		{"refused", "0:0:refused:;", 2},
	}
	for _, tt := range tests {
		t.Run(tt.answer, func(t *testing.T) {
			p := plugintest.Load(t, wasm, `{"request":["dispatch:quota.check=a","expect:ok ","defer"],"call_response":"record_response"}`)
			var cb callbacks
			p.Instrument(wasmhost.Instruments{Request: &cb})
			p.Services.Handle("quota.check", func([]byte) ([]byte, error) { return []byte(tt.answer), nil })
			s := p.Session(plugintest.Request{Body: `{}`})
			defer s.Close()
			if res := s.Request(); res.Err != nil || res.Rejected {
				t.Fatalf("got %+v", res)
			}
			if got, _ := s.Fact("responses"); got != tt.responses {
				t.Errorf("responses %q, want %q", got, tt.responses)
			}
			if cb.n != tt.callbacks {
				t.Errorf("%d callbacks, want %d", cb.n, tt.callbacks)
			}
			if d := p.Services.Dispatched(); len(d) != 1 || d[0].Answer.Body != tt.answer {
				t.Errorf("dispatched %+v", d)
			}
		})
	}
}
