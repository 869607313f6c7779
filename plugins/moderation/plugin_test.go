package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/sdk/plugintest"
	"github.com/tollgate/tollgate/sdk/wasmhost"
)

// The whole plugin, built to wasm and run by the gateway's plugin host,
// against a classifier the test plays.

const endpoint = "https://classifier.test/v1/moderations"

// verdict answers as omni-moderation would: categories named in the text
// as [name] score 0.99, [name=0.4] score 0.4.
func verdict(c *plugintest.HTTPCall) plugintest.Answer {
	var req struct{ Model, Input string }
	if err := json.Unmarshal([]byte(c.Body), &req); err != nil {
		return plugintest.Answer{Status: 400, Body: err.Error()}
	}
	cats, scores := map[string]bool{}, map[string]float64{}
	flagged := false
	for _, name := range []string{"hate", "violence", "self-harm"} {
		s := 0.0
		if strings.Contains(req.Input, "["+name+"]") {
			s = 0.99
		}
		fmt.Sscanf(after(req.Input, "["+name+"="), "%g]", &s)
		cats[name], scores[name] = s >= 0.5, s
		flagged = flagged || s >= 0.5
	}
	b, _ := json.Marshal(map[string]any{"results": []any{map[string]any{"flagged": flagged, "categories": cats, "category_scores": scores}}})
	return plugintest.Answer{Body: string(b)}
}

func after(s, sep string) string {
	if _, rest, ok := strings.Cut(s, sep); ok {
		return rest
	}
	return ""
}

func chat(last string) plugintest.Request {
	return plugintest.Request{Body: `{"model":"m","messages":[{"role":"system","content":"[hate] in the system prompt"},` +
		`{"role":"user","content":"[violence] earlier"},{"role":"assistant","content":"ok"},` +
		`{"role":"user","content":[{"type":"text","text":` + quote(last) + `},{"type":"text","text":"second part"}]}]}`}
}

func quote(s string) string { b, _ := json.Marshal(s); return string(b) }

func TestRequests(t *testing.T) {
	wasm := plugintest.Build(t, ".")
	tests := []struct {
		name, config, text string
		failOpen           bool
		answer             func(*plugintest.HTTPCall) plugintest.Answer
		rejected           bool
		message            string
		failure            bool
	}{
		{name: "clean", text: "a friendly question", answer: verdict},
		{name: "flagged", text: "I [hate] and [self-harm]", answer: verdict, rejected: true,
			message: "The request was flagged by content moderation (hate, self-harm)."},
		{name: "below a threshold", config: `,"categories":{"violence":0.8}`, text: "[violence=0.7]", answer: verdict},
		{name: "at a threshold", config: `,"categories":{"violence":0.7}`, text: "[violence=0.7]", answer: verdict, rejected: true,
			message: "The request was flagged by content moderation (violence)."},
		{name: "a category not listed", config: `,"categories":{"violence":0.5}`, text: "[hate]", answer: verdict},
		{name: "timeout, fail_closed", text: "hi", answer: fixed(plugintest.Answer{Status: plugintest.Timeout}), failure: true},
		{name: "timeout, fail_open", text: "hi", failOpen: true, answer: fixed(plugintest.Answer{Status: plugintest.Timeout})},
		{name: "unavailable", text: "hi", answer: fixed(plugintest.Answer{Status: plugintest.Unavailable}), failure: true},
		{name: "too large", text: "hi", answer: fixed(plugintest.Answer{Status: plugintest.TooLarge}), failure: true},
		{name: "busy", text: "hi", answer: fixed(plugintest.Answer{Status: plugintest.Busy}), failure: true},
		{name: "error status", text: "hi", answer: fixed(plugintest.Answer{Status: 503, Body: `{"error":{}}`}), failure: true},
		{name: "garbage", text: "hi", answer: fixed(plugintest.Answer{Body: `{"results": [{"flagged": tru`}), failure: true},
		{name: "no results", text: "hi", answer: fixed(plugintest.Answer{Body: `{"results": []}`}), failure: true},
		{name: "not granted", text: "hi", failure: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := plugintest.Load(t, wasm, `{"endpoint":"`+endpoint+`","headers":{"X-Team":"search"}`+tt.config+`}`,
				plugintest.Options{FailOpen: tt.failOpen})
			if tt.answer != nil {
				p.Services.AnswerHTTP(endpoint, tt.answer)
			}
			res := p.Request(chat(tt.text))
			if res.Rejected != tt.rejected {
				t.Fatalf("rejected %v, want %v: %+v\n%s", res.Rejected, tt.rejected, res, p.Logs())
			}
			if tt.rejected && (res.Status != 400 || res.Type != "invalid_request_error" || res.Code != "content_flagged" || res.Message != tt.message) {
				t.Errorf("rejection %+v", res)
			}
			var f *wasmhost.FailureError
			if tt.failure != errors.As(res.Err, &f) {
				t.Fatalf("err %v, want a failure: %v", res.Err, tt.failure)
			}
			if tt.failure && !strings.Contains(res.Err.Error(), "FAIL") {
				t.Errorf("failure %v: not the plugin's FAIL", res.Err)
			}
			if !tt.failure && res.Err != nil {
				t.Fatal(res.Err)
			}
			d := p.Services.Dispatched()
			if tt.answer == nil {
				if len(d) != 0 {
					t.Fatalf("a call not granted was made: %+v", d)
				}
				return
			}
			if len(d) != 1 || d[0].HTTP == nil {
				t.Fatalf("dispatched %+v", d)
			}
			c := d[0].HTTP
			want := `{"model":"omni-moderation-latest","input":` + quote(tt.text+"\nsecond part") + `}`
			if c.Method != "POST" || c.URL != endpoint || c.Header["Content-Type"] != "application/json" || c.Header["X-Team"] != "search" ||
				c.Body != want || !strings.HasPrefix(c.CacheKey, "moderation:") || c.CacheTTL != 10*time.Minute {
				t.Errorf("http call %+v, want body %s", c, want)
			}
		})
	}
}

func fixed(a plugintest.Answer) func(*plugintest.HTTPCall) plugintest.Answer {
	return func(*plugintest.HTTPCall) plugintest.Answer { return a }
}

// A request without a user message is not sent, and neither is one when
// check.request is off.
func TestNothingToCheck(t *testing.T) {
	wasm := plugintest.Build(t, ".")
	p := plugintest.Load(t, wasm, `{"endpoint":"`+endpoint+`"}`)
	p.Services.AnswerHTTP(endpoint, verdict)
	res := p.Request(plugintest.Request{Body: `{"model":"m","messages":[{"role":"system","content":"[hate]"}]}`})
	if res.Rejected || res.Err != nil || len(p.Services.Dispatched()) != 0 {
		t.Fatalf("%+v, dispatched %+v", res, p.Services.Dispatched())
	}
	off := plugintest.Load(t, wasm, `{"endpoint":"`+endpoint+`","check":{"request":false,"reply":true}}`)
	off.Services.AnswerHTTP(endpoint, verdict)
	if res := off.Request(chat("[hate]")); res.Rejected || res.Err != nil || len(off.Services.Dispatched()) != 0 {
		t.Fatalf("check.request off: %+v, dispatched %+v", res, off.Services.Dispatched())
	}
}

func TestReplies(t *testing.T) {
	wasm := plugintest.Build(t, ".")
	p := plugintest.Load(t, wasm, `{"endpoint":"`+endpoint+`","check":{"request":false,"reply":true,"stream":true},"correction":"[withheld]"}`)
	p.Services.AnswerHTTP(endpoint, verdict)
	req := chat("anything")

	if res := p.Whole(req, "a calm reply"); res.Err != nil || res.Text != "a calm reply" {
		t.Errorf("clean whole reply: %+v", res)
	}
	if res := p.Whole(req, "you [hate] it"); res.Err != nil || res.Text != "[withheld]" {
		t.Errorf("flagged whole reply: %+v", res)
	}
	deltas := []string{"a ", "calm ", "stream"}
	if res := p.Stream(req, deltas); res.Err != nil || res.Stopped || res.Text != "a calm stream" {
		t.Errorf("clean stream: %+v", res)
	}
	// A trigger split across events is seen: the classifier gets the
	// whole reply at its end.
	if res := p.Stream(req, []string{"you [vio", "lence] it", " now"}); res.Err != nil || !res.Stopped || res.Text != "[withheld]" || res.FinishReason != "content_filter" {
		t.Errorf("flagged stream: %+v", res)
	}
	var inputs []string
	for _, d := range p.Services.Dispatched() {
		var body struct{ Input string }
		json.Unmarshal([]byte(d.HTTP.Body), &body)
		inputs = append(inputs, body.Input)
	}
	if got := strings.Join(inputs, "|"); got != "a calm reply|you [hate] it|a calm stream|you [violence] it now" {
		t.Errorf("the classifier got %q", got)
	}
	// A classifier failure at a stream's end fails the callback.
	failing := plugintest.Load(t, wasm, `{"endpoint":"`+endpoint+`","check":{"request":false,"stream":true}}`)
	failing.Services.AnswerHTTP(endpoint, fixed(plugintest.Answer{Status: plugintest.Timeout}))
	if res := failing.Stream(req, deltas); res.Err == nil {
		t.Errorf("a timeout at the stream's end: %+v", res)
	}
	// check.reply alone lets streams through unheld and unchecked.
	whole := plugintest.Load(t, wasm, `{"endpoint":"`+endpoint+`","check":{"request":false,"reply":true}}`)
	whole.Services.AnswerHTTP(endpoint, verdict)
	if res := whole.Stream(req, []string{"[hate]"}); res.Err != nil || res.Stopped || res.Text != "[hate]" || len(whole.Services.Dispatched()) != 0 {
		t.Errorf("unchecked stream: %+v", res)
	}
}

func TestRefusesBadConfig(t *testing.T) {
	_, err := plugintest.LoadErr(t, plugintest.Build(t, "."), `{"endpoint":"`+endpoint+`","categories":{"hate":2}}`)
	if err == nil || !strings.Contains(err.Error(), `"categories.hate" is 2`) {
		t.Fatalf("got %v", err)
	}
}
