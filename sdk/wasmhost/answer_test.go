package wasmhost

import (
	"errors"
	"strings"
	"testing"
)

// TestRespondVerdict: a request-phase plugin answers the request itself
// (respond, respond_event, RESPOND); later plugins' on_request do not run,
// the answer's bytes are the plugin's, and the ABI's limits and phases
// hold.
func TestRespondVerdict(t *testing.T) {
	tests := []struct {
		name    string
		configs []string
		noAns   bool
		check   func(t *testing.T, r *Request, err error)
	}{
		{"a whole reply", []string{`{"request":["set_response_header:X-Cache=hit","respond:200 {\"object\":\"chat.completion\"}"]}`, `{"request":"set_header:X-Late=1"}`},
			false, func(t *testing.T, r *Request, err error) {
				var an *Answered
				if !errors.As(err, &an) || an.Plugin != "p0" {
					t.Fatalf("got %v", err)
				}
				a := &r.Answer
				if a.Status != 200 || string(a.Body) != `{"object":"chat.completion"}` || a.IsStream() || a.Source != "p0" {
					t.Fatalf("answer %+v", a)
				}
				if len(r.SetUpstreamHeaders) != 0 {
					t.Error("a later plugin ran:", headers(r.SetUpstreamHeaders))
				}
				if headers(r.SetClientHeaders) != "X-Cache=hit" {
					t.Error("client headers", headers(r.SetClientHeaders))
				}
			}},
		{"a stream", []string{`{"request":["respond_event:{\"a\":1}","respond_event:{\"b\":2}","respond_event:[DONE]","verdict:9"]}`},
			false, func(t *testing.T, r *Request, err error) {
				var an *Answered
				if !errors.As(err, &an) {
					t.Fatalf("got %v", err)
				}
				a := &r.Answer
				if a.Status != 200 || !a.IsStream() || len(a.Events) != 2 || string(a.Events[0]) != `{"a":1}` || string(a.Events[1]) != `{"b":2}` {
					t.Fatalf("answer %+v", a)
				}
				if !strings.Contains(logs.String(), "respond_event: tollgate: invalid") {
					t.Error("[DONE] accepted as an event")
				}
			}},
		{"RESPOND without an answer fails the plugin", []string{`{"request":"verdict:9"}`},
			false, func(t *testing.T, r *Request, err error) {
				var f *FailureError
				if !errors.As(err, &f) || !strings.Contains(err.Error(), "RESPOND without an answer") {
					t.Fatalf("got %v", err)
				}
			}},
		{"an answer set and then not used is dropped", []string{`{"request":["respond:200 {}","continue"]}`, `{"request":"verdict:9"}`},
			false, func(t *testing.T, r *Request, err error) {
				var f *FailureError
				if !errors.As(err, &f) || f.Plugin != "p1" || r.Answer.Status != 0 {
					t.Fatalf("got %v, answer %+v", err, r.Answer)
				}
			}},
		{"an endpoint the gateway cannot answer refuses respond", []string{`{"request":"respond:200 {}"}`},
			true, func(t *testing.T, r *Request, err error) {
				if err != nil || r.Answer.Status != 0 {
					t.Fatalf("got %v, answer %+v", err, r.Answer)
				}
			}},
		{"a status out of range is refused", []string{`{"request":"respond:101 {}"}`},
			false, func(t *testing.T, r *Request, err error) {
				if err != nil || r.Answer.Status != 0 {
					t.Fatalf("got %v, answer %+v", err, r.Answer)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pl := pipeline(t, tt.configs...)
			r := request(`{}`)
			r.NoAnswer = tt.noAns
			defer ReleaseRequest(r)
			tt.check(t, r, pl.Request(r))
		})
	}
}

// TestRespondOnlyInRequest: RESPOND in another phase is a plugin failure.
func TestRespondOnlyInRequest(t *testing.T) {
	pl := pipeline(t, `{"response_headers":"verdict:9"}`)
	r := request(`{}`)
	defer ReleaseRequest(r)
	err := pl.ResponseHeaders(r, 200)
	if err == nil || !strings.Contains(err.Error(), "not allowed in phase response_headers") {
		t.Fatal(err)
	}
}

// TestAnswerReuse: a pooled Request's answer is cleared and its events
// stay valid as the buffer grows.
func TestAnswerReuse(t *testing.T) {
	var a Answer
	a.SetEvents(200, [][]byte{[]byte("one"), []byte(strings.Repeat("x", 5000)), []byte("three")}, "cache")
	if string(a.Events[0]) != "one" || string(a.Events[2]) != "three" || a.Size() != 5008 {
		t.Fatal(a.Events[0], a.Size())
	}
	a.Set(201, []byte("body"), "p")
	if a.IsStream() || string(a.Body) != "body" || a.Status != 201 {
		t.Fatal(a)
	}
	a.Reset()
	if a.Status != 0 || a.Body != nil || len(a.Events) != 0 || a.Source != "" {
		t.Fatal(a)
	}
}
