package sdk_test

import (
	"bytes"
	"encoding/binary"
	"regexp"
	"strconv"
	"strings"

	"github.com/tollgate/tollgate/sdk"
)

// These examples compile on any platform; they run only inside a plugin
// (built with GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared), which
// is why none has an Output comment. In a plugin, the bodies of these
// examples go in the main package's init function.

// A request guard: reject requests for models outside an allow-list, and
// tag the ones it passes.
func ExampleOnRequest() {
	allowed := map[string]bool{"gpt-4o-mini": true, "mock-1": true}
	sdk.OnRequest(func(r *sdk.Request) sdk.Verdict {
		if !allowed[r.Model()] {
			return r.Reject(403, "invalid_request_error", "model_not_allowed",
				"The model "+r.Model()+" is not allowed for this key.")
		}
		if n, ok := r.MaxTokens(); !ok || n > 4096 {
			// Cap the reply; the upstream sees the header.
			r.SetHeader("X-Max-Tokens-Cap", "4096")
		}
		r.SetResponseHeader("X-Model-Guard", "passed")
		return sdk.Continue
	})
}

// A configurable plugin: the config is parsed once per instance, and a bad
// config stops the plugin from loading with a message naming the setting.
func ExampleOnConfigure() {
	var deny *regexp.Regexp
	sdk.OnConfigure(func(cfg []byte) error {
		// A real plugin would decode JSON; see plugins/keywordguard.
		pattern := strings.Trim(string(bytes.TrimSpace(cfg)), `{}"`)
		re, err := regexp.Compile(pattern)
		if err != nil {
			return err // the operator sees err.Error()
		}
		deny = re
		return nil
	})
	sdk.OnRequest(func(r *sdk.Request) sdk.Verdict {
		if deny.Match(r.Body()) {
			return r.Reject(400, "invalid_request_error", "content_policy_violation", "Blocked by policy.")
		}
		return sdk.Continue
	})
}

// A streaming output guard: replace a word in every streamed event, and end
// the reply when a forbidden phrase appears. Chunk.Bytes and Chunk.EmitBytes
// do not allocate, and the reusable buffer keeps the handler
// allocation-free.
func ExampleOnChunk() {
	word, forbidden := []byte("darn"), []byte("BEGIN PRIVATE KEY")
	var out []byte
	sdk.OnChunk(func(c *sdk.Chunk) sdk.Verdict {
		text := c.Bytes()
		switch {
		case bytes.Contains(text, forbidden):
			return c.Stop("[The reply was stopped by policy.]", "content_filter")
		case bytes.Contains(text, word):
			out = append(out[:0], text...)
			out = bytes.ReplaceAll(out, word, []byte("d**n"))
			c.EmitBytes(out)
			return sdk.Replace
		}
		return sdk.Continue
	})
}

// Per-request state: count the streamed events of each request in the
// plugin's state (not in a global: the events of one request may reach
// different instances), and report the count when the exchange ends.
func ExampleExchange_State() {
	count := func(x *sdk.Exchange) uint64 {
		if st := x.State(); len(st) == 8 {
			return binary.LittleEndian.Uint64(st)
		}
		return 0
	}
	sdk.OnChunk(func(c *sdk.Chunk) sdk.Verdict {
		c.SetState(binary.LittleEndian.AppendUint64(nil, count(&c.Exchange)+1))
		return sdk.Continue
	})
	sdk.OnEnd(func(e *sdk.End) {
		sdk.MetricAdd("events", int64(count(&e.Exchange)))
		if e.Stopped() {
			sdk.Logf(sdk.LevelInfo, "request %s stopped after %d events", e.RequestID(), count(&e.Exchange))
		}
	})
}

// Facts pass data between the plugins of one request: an earlier plugin
// sets a fact, a later one (or a later phase) reads it.
func ExampleExchange_Fact() {
	sdk.OnRequest(func(r *sdk.Request) sdk.Verdict {
		if plan, ok := r.Fact("tenant.plan"); ok && plan == "free" && r.Stream() {
			return r.Reject(402, "", "plan_limit", "Streaming needs a paid plan.")
		}
		r.SetFact("guard.checked", "1")
		return sdk.Continue
	})
}

// Calling a host service: the request and the result are JSON.
func ExampleCall() {
	sdk.OnRequest(func(r *sdk.Request) sdk.Verdict {
		res, err := sdk.Call("ratelimit", []byte(`{"key":"`+r.RequestID()+`"}`))
		switch {
		case err == sdk.ErrUnavailable:
			return sdk.Continue // no rate limiter configured: let it pass
		case err != nil:
			sdk.Log(sdk.LevelWarn, "ratelimit: "+err.Error())
			return sdk.Continue
		case bytes.Contains(res, []byte(`"allowed":false`)):
			return r.Reject(429, "", "rate_limit_exceeded", "Too many requests.")
		}
		return sdk.Continue
	})
}

// A guard over the conversation: the SDK hands over each message's parts
// already decoded, so the plugin needs no JSON parser. Reusing the slice
// across callbacks makes the read allocation-free.
func ExampleExchange_Messages() {
	var parts []sdk.MessagePart
	sdk.OnRequest(func(r *sdk.Request) sdk.Verdict {
		parts = r.Messages(parts[:0])
		for _, p := range parts {
			if p.Kind == sdk.PartToolCall {
				continue // the model's own calls; check what users and tools said
			}
			if bytes.Contains(bytes.ToLower(p.Text), []byte("ignore previous instructions")) {
				sdk.Log(sdk.LevelInfo, "blocked: message "+strconv.Itoa(p.Index)+" ("+string(p.Role)+")")
				return r.Reject(400, "invalid_request_error", "content_blocked",
					"The request contains a blocked phrase.")
			}
		}
		return sdk.Continue
	})
}

// A guard that asks a classifier over HTTP: the request handler dispatches
// the call and pauses, holding no instance while the classifier thinks;
// the response handler decides. A failed call answers Fail, so the
// policy's on_error decides whether the request goes through.
func ExampleDispatchHTTP() {
	sdk.OnRequest(func(r *sdk.Request) sdk.Verdict {
		body := []byte(`{"input":` + strconv.Quote(r.Model()) + `}`)
		_, err := sdk.DispatchHTTP(sdk.HTTPRequest{
			Method: "POST", URL: "https://classifier.internal/v1/moderations",
			Header: [][2]string{{"Content-Type", "application/json"}}, Body: body,
		})
		if err != nil {
			return sdk.Fail
		}
		return sdk.Pause
	})
	sdk.OnCallResponse(func(c *sdk.CallResponse) sdk.Verdict {
		if c.Err() != nil || c.Status() != 200 {
			return sdk.Fail
		}
		if bytes.Contains(c.Body(), []byte(`"flagged":true`)) {
			return c.Request().Reject(400, "invalid_request_error", "content_flagged", "The request was flagged.")
		}
		return sdk.Continue
	})
}

// A quota check that defers: the request handler dispatches a host
// service's call and answers Defer, so the plugins after it run their
// on_request while the call waits, and the host may serve it together
// with theirs (one round trip to the store for every counter of the
// request). The response handler decides, as after Pause.
func ExampleDispatch_defer() {
	sdk.OnRequest(func(r *sdk.Request) sdk.Verdict {
		if _, err := sdk.Dispatch("ratelimit.admit", []byte("fail_open 1 512\ntenant\n")); err != nil {
			return sdk.Fail
		}
		return sdk.Defer
	})
	sdk.OnCallResponse(func(c *sdk.CallResponse) sdk.Verdict {
		if c.Err() != nil {
			return sdk.Fail
		}
		if bytes.HasPrefix(c.Body(), []byte("limited ")) {
			return c.Request().Reject(429, "requests", "rate_limit_exceeded", "Rate limit reached.")
		}
		return sdk.Continue
	})
}
