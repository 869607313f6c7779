package wasmhost

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// expectDispatcher answers the service "ok" with the host-service result
// "allowed 5", "no" with "limited x", "down" with a timeout, and others
// as dispatcher does (HTTP 200).
func expectDispatcher() *dispatcher {
	return &dispatcher{delay: time.Millisecond, results: map[string]CallResult{
		"ok":   {Body: []byte("allowed 5")},
		"no":   {Body: []byte("limited x")},
		"down": {Status: StatusTimeout},
	}}
}

func TestExpectResponseRequestPhase(t *testing.T) {
	long := strings.Repeat("x", maxExpectPrefix)
	tests := []struct {
		name      string
		config    string
		skip      bool // a BatchDispatcher that skips "ok" in its batch
		wantErr   string
		responses string
		errors    string
		started   string
	}{
		{name: "a matching answer skips on_call_response",
			config:  `{"request":["dispatch:ok=a","expect:allowed","pause"],"call_response":["record_response","reject"]}`,
			started: "ok=a"},
		{name: "an answer matching none is delivered",
			config:    `{"request":["dispatch:no=a","expect:allowed","pause"],"call_response":"record_response"}`,
			responses: "0:0:limited x:;", started: "no=a"},
		{name: "any of the prefixes matches",
			config:  `{"request":["dispatch:ok=a","expect:limited","expect:allowed 5","pause"],"call_response":["record_response","reject"]}`,
			started: "ok=a"},
		{name: "an HTTP answer is delivered",
			config:    `{"request":["dispatch:svc=a","expect:svc","pause"],"call_response":"record_response"}`,
			responses: "0:200:svc:a:t;", started: "svc=a"},
		{name: "a failed call is delivered, even to an empty prefix",
			config:    `{"request":["dispatch:down=a","expect:","pause"],"call_response":"record_response"}`,
			responses: "0:-5::;", started: "down=a"},
		{name: "a skipped call then a delivered one: the delivered decides",
			config:  `{"request":["dispatch:ok=a","expect:allowed","dispatch:no=b","expect:allowed","pause"],"call_response":["record_response","reject"]}`,
			wantErr: "reject", responses: "1:0:limited x:;", started: "ok=a,no=b"},
		{name: "a delivered call then a skipped last one: continue",
			config:    `{"request":["dispatch:no=a","expect:allowed","dispatch:ok=b","expect:allowed","pause"],"call_response":["record_response","pause"]}`,
			responses: "0:0:limited x:;", started: "no=a,ok=b"},
		{name: "a call without prefixes is delivered",
			config:    `{"request":["dispatch:ok=a","expect:allowed","dispatch:ok=b","pause"],"call_response":["record_response","continue"]}`,
			responses: "1:0:allowed 5:;", started: "ok=a,ok=b"},
		{name: "after its start a call takes no prefix",
			config:    `{"request":["dispatch:no=a","pause"],"call_response":["expect_id:0=limited","record_response"]}`,
			errors:    "expect:tollgate: invalid argument;",
			responses: "0:0:limited x:;", started: "no=a"},
		{name: "an id not dispatched takes no prefix",
			config: `{"request":["dispatch:ok=a","expect_id:1=x","expect_id:-1=x","continue"]}`,
			errors: "expect:tollgate: invalid argument;expect:tollgate: invalid argument;"},
		{name: "at most four prefixes",
			config: `{"request":["dispatch:ok=a","expect:a","expect:b","expect:c","expect:d","expect:e","continue"]}`,
			errors: "expect:tollgate: invalid argument;"},
		{name: "a prefix of at most 64 bytes",
			config: `{"request":["dispatch:ok=a","expect:` + long + `","expect:` + long + `x","continue"]}`,
			errors: "expect:tollgate: invalid argument;"},
		{name: "defer: a matching answer skips on_call_response",
			config:  `{"request":["dispatch:ok=a","expect:allowed","defer"],"call_response":["record_response","reject"]}`,
			started: "ok=a"},
		{name: "a call skipped by a batch and started again keeps its prefixes",
			config:  `{"request":["dispatch:ok=a","expect:allowed","defer"],"call_response":["record_response","reject"]}`,
			skip:    true,
			started: "ok=a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := expectDispatcher()
			pl := dispatchPipeline(t, FailClosed, tt.config)
			r := request(`{}`)
			defer ReleaseRequest(r)
			r.Services = d
			var b *batchDispatcher
			if tt.skip {
				b = &batchDispatcher{dispatcher: d, skip: map[string]bool{"ok": true}}
				r.Services = b
			}
			err := pl.Request(r)
			switch tt.wantErr {
			case "":
				if err != nil {
					t.Fatalf("err %v", err)
				}
			case "reject":
				var rej *RejectError
				if !errors.As(err, &rej) {
					t.Fatalf("err %v, want the plugin's reject", err)
				}
			}
			if got := fact(r, "responses"); got != tt.responses {
				t.Errorf("responses %q, want %q", got, tt.responses)
			}
			if got := fact(r, "dispatch_errors"); got != tt.errors {
				t.Errorf("dispatch errors %q, want %q", got, tt.errors)
			}
			if got := d.startedCalls(); got != tt.started {
				t.Errorf("started %q, want %q", got, tt.started)
			}
			if b != nil {
				if got := b.batchesStarted(); got != "ok=a" {
					t.Errorf("batches %q, want the call's", got)
				}
			}
		})
	}
}

// In the chunk phase, an expected answer continues (the event passes as
// it was: the callback's emitted text is discarded); another is delivered
// and decides.
func TestExpectResponseChunkPhase(t *testing.T) {
	tests := []struct {
		service   string
		verdict   Verdict
		text      string
		responses string
	}{
		{"ok", Continue, "", ""},
		{"no", Replace, "<ABC", "0:0:limited x:;"},
	}
	for _, tt := range tests {
		t.Run(tt.service, func(t *testing.T) {
			pl := dispatchPipeline(t, FailClosed, `{"chunk":["emit:<","dispatch:`+tt.service+`=a","expect:allowed","pause"],`+
				`"call_response":["record_response","replace_upper"]}`)
			r := request(`{}`)
			defer ReleaseRequest(r)
			r.Services = expectDispatcher()
			res, err := pl.Chunk(r, []byte("abc"), ChunkText)
			if err != nil || res.Verdict != tt.verdict || string(res.Text) != tt.text {
				t.Fatalf("got %v %q %v, want %v %q", res.Verdict, res.Text, err, tt.verdict, tt.text)
			}
			if got := fact(r, "responses"); got != tt.responses {
				t.Fatalf("responses %q, want %q", got, tt.responses)
			}
		})
	}
}
