//go:build !wasip1

package sdk

import (
	"errors"
	"testing"

	"github.com/tollgate/tollgate/sdk/abi"
	"github.com/tollgate/tollgate/sdk/internal/convo"
)

// rewriteHost is the fake host with set_message_text, over a body it
// splices as the gateway does.
type rewriteHost struct {
	*fakeHost
	body  string
	phase string // "request" allows rewrites
}

func (h *rewriteHost) render() {
	h.messages = string(convo.Append(nil, []byte(h.body)))
	h.fields[abi.FieldBody] = h.body
}

func (h *rewriteHost) setMessageText(record int32, text string) int32 {
	h.calls++
	if h.phase != "request" {
		return int32(ErrNotAllowed)
	}
	_, spans := convo.AppendSpans(nil, []byte(h.body), nil)
	if record < 0 || int(record) >= len(spans) {
		return int32(ErrAbsent)
	}
	if !spans[record].Rewritable() {
		return int32(ErrInvalid)
	}
	h.body = string(convo.Splice(nil, []byte(h.body), spans[record], text))
	h.render()
	return 0
}

func installRewrite(t *testing.T, body string) *rewriteHost {
	h := &rewriteHost{fakeHost: install(t), body: body, phase: "request"}
	testHost = h
	h.render()
	return h
}

func TestSetMessageText(t *testing.T) {
	h := installRewrite(t, `{"system":"sys","messages":[{"role":"user","content":"mail me at a@b.c"},`+
		`{"role":"assistant","content":[{"type":"tool_use","name":"f","input":{}}]}]}`)
	var before, after []MessagePart
	var bodyBefore, bodyAfter string
	var errs []error
	OnRequest(func(r *Request) Verdict {
		before = r.Messages(nil)
		bodyBefore = string(r.Body())
		for _, p := range before {
			if p.Kind == PartText && p.Role[0] == 'u' {
				errs = append(errs, r.SetMessageText(p.Record, "mail me at <EMAIL_1>"))
			}
		}
		errs = append(errs, r.SetMessageText(2, "{}"), r.SetMessageText(3, "x"), r.SetMessageText(-1, "x"))
		after = r.Messages(nil)
		bodyAfter = string(r.Body())
		return Continue
	})
	dispatchRequest(1)
	want := []error{nil, ErrInvalid, ErrAbsent, ErrAbsent}
	if len(errs) != len(want) {
		t.Fatalf("errors %v", errs)
	}
	for i := range want {
		if !errors.Is(errs[i], want[i]) && errs[i] != want[i] {
			t.Fatalf("call %d: %v, want %v", i, errs[i], want[i])
		}
	}
	for i, p := range before {
		if p.Record != i {
			t.Fatalf("part %d has Record %d", i, p.Record)
		}
	}
	// What was read before keeps its value; a new read sees the new body.
	if string(before[1].Text) != "mail me at a@b.c" || string(after[1].Text) != "mail me at <EMAIL_1>" {
		t.Fatalf("before %q, after %q", before[1].Text, after[1].Text)
	}
	if bodyBefore == bodyAfter || bodyAfter != h.body {
		t.Fatalf("body before %s\nafter %s\nhost %s", bodyBefore, bodyAfter, h.body)
	}
}

func TestSetMessageTextOutsideRequest(t *testing.T) {
	h := installRewrite(t, `{"messages":[{"role":"user","content":"x"}]}`)
	h.phase = "chunk"
	var err error
	OnRequest(func(r *Request) Verdict {
		err = r.SetMessageText(0, "y")
		return Continue
	})
	dispatchRequest(1)
	if err != ErrNotAllowed {
		t.Fatalf("%v", err)
	}
}
