// Command moderation is a Tollgate plugin that asks a moderation
// classifier (OpenAI's /v1/moderations, or anything answering in its
// shape) about the last user message of each request, and optionally
// about the reply, through the host's HTTP call-out: the request waits on
// the classifier with no plugin instance held. A flagged request gets an
// OpenAI-style 400 (code content_flagged) naming the categories; a flagged
// reply is withheld. A classifier that fails (timeout, refusal, an error
// status, an answer that is not a verdict) fails the callback, so the
// policy's on_error decides: fail_closed refuses, fail_open lets it
// through. See README.md.
//
// Build:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o moderation.wasm ./plugins/moderation
package main

import (
	"unsafe"

	"github.com/tollgate/tollgate/sdk"
)

// main is required of a main package but is not run: a c-shared module's
// _initialize runs the init functions only.
func main() {}

// cfg is the instance's configuration, set once by on_configure.
var cfg *config

// The fact the gateway stores in the call log, and its values.
const (
	factGuardAction = "guard_action"
	actionRefused   = "moderation:refused"
	actionWithheld  = "moderation:withheld"
)

func init() {
	sdk.OnConfigure(func(raw []byte) error {
		c, err := parseConfig(raw)
		if err != nil {
			return err
		}
		cfg = c
		return nil
	})
	sdk.OnRequest(onRequest)
	sdk.OnChunk(onChunk)
	sdk.OnCallResponse(onCallResponse)
}

// Reused by every callback of the instance (one runs at a time).
var (
	parts   []sdk.MessagePart
	text    []byte
	reqBody []byte
	key     []byte
	ans     answer
)

func onRequest(r *sdk.Request) sdk.Verdict {
	if !cfg.checkReply && !cfg.checkStream {
		_ = r.SkipPhases(sdk.PhaseChunk)
	}
	if !cfg.checkRequest {
		return sdk.Continue
	}
	parts = r.Messages(parts[:0])
	text = lastUserText(text[:0], parts)
	if len(text) == 0 {
		return sdk.Continue
	}
	return classify(r.RequestID(), text)
}

func onChunk(c *sdk.Chunk) sdk.Verdict {
	if c.IsWhole() {
		if !cfg.checkReply || c.Len() == 0 {
			return sdk.Continue
		}
		return classify(c.RequestID(), c.Bytes())
	}
	if !cfg.checkStream {
		return sdk.Continue
	}
	// The reply so far lives in the plugin's state; every event is held
	// until the classifier answered on the whole.
	text = append(text[:0], c.State()...)
	if c.HasText() {
		text = append(text, c.Bytes()...)
	}
	if !c.IsDone() {
		if c.HasText() {
			if err := c.SetState(text); err != nil {
				sdk.Log(sdk.LevelWarn, "moderation: request "+c.RequestID()+": holding the reply: "+err.Error())
				return sdk.Fail
			}
		}
		return sdk.Hold
	}
	if len(text) == 0 {
		return sdk.Continue
	}
	return classify(c.RequestID(), text)
}

// classify dispatches the classifier's call for text and pauses the
// phase until it answers.
//
// Both callbacks are on every checked request's path, and a Go guest pays
// dearly for each allocation and each byte-at-a-time loop: they allocate
// nothing in the steady state (headers built at configure, the cache key
// hashed without a digest object, the answer parsed into reused slices
// with the known category names as constants, its scores parsed only for
// thresholds) and the body is encoded by runs. BenchmarkPluginRequest
// (callback-ns/req, both callbacks, on a loaded 2-core machine): ~195 µs
// a request before (167–243), ~127 µs after (108–146); natively the
// parse went from 31 allocations (1096 B) to none.
func classify(requestID string, text []byte) sdk.Verdict {
	reqBody = cfg.appendRequest(reqBody[:0], text)
	h := sdk.HTTPRequest{Method: "POST", URL: cfg.endpoint, Body: reqBody, Header: cfg.callHeaders}
	if cfg.cacheTTL > 0 {
		key = cfg.cacheKey(key[:0], text)
		// DispatchHTTP copies the key before returning: a view of key's
		// bytes, not a copy, is enough.
		h.CacheKey, h.CacheTTL = unsafe.String(unsafe.SliceData(key), len(key)), cfg.cacheTTL
	}
	if _, err := sdk.DispatchHTTP(h); err != nil {
		sdk.Log(sdk.LevelWarn, "moderation: request "+requestID+": cannot call the classifier: "+err.Error())
		return sdk.Fail
	}
	return sdk.Pause
}

func onCallResponse(c *sdk.CallResponse) sdk.Verdict {
	if err := c.Err(); err != nil {
		sdk.Log(sdk.LevelWarn, "moderation: request "+c.RequestID()+": classifier call failed: "+err.Error())
		_ = sdk.MetricAdd("classifier_failed", 1)
		return sdk.Fail
	}
	if st := c.Status(); st < 200 || st > 299 {
		sdk.Log(sdk.LevelWarn, "moderation: request "+c.RequestID()+": classifier answered HTTP "+itoa(st))
		_ = sdk.MetricAdd("classifier_failed", 1)
		return sdk.Fail
	}
	a := &ans
	if err := a.parse(c.Body(), len(cfg.thresholds) > 0); err != nil {
		sdk.Log(sdk.LevelWarn, "moderation: request "+c.RequestID()+": "+err.Error())
		_ = sdk.MetricAdd("classifier_failed", 1)
		return sdk.Fail
	}
	cats := cfg.flaggedCategories(*a)
	if len(cats) == 0 {
		return sdk.Continue // in a stream's last event: every held event goes out
	}
	list := categoryList(cats)
	if r := c.Request(); r != nil {
		act(&c.Exchange, actionRefused, "refused", list)
		return r.Reject(400, "invalid_request_error", "content_flagged",
			"The request was flagged by content moderation ("+list+").")
	}
	if ch := c.Chunk(); ch != nil {
		act(&c.Exchange, actionWithheld, "withheld", list)
		if ch.IsWhole() {
			// The message's content becomes the correction; STOP alone
			// sets a finish_reason, so the upstream's stays.
			return ch.Replace(cfg.correction)
		}
		return ch.Stop(cfg.correction, "content_filter")
	}
	return sdk.Continue
}

// act records a guard action: the fact the call log keeps, a counter, and
// a log line naming the categories, never the text.
func act(x *sdk.Exchange, action, what, categories string) {
	_ = x.SetFact(factGuardAction, action)
	_ = sdk.MetricAdd(what, 1)
	sdk.Log(sdk.LevelInfo, "moderation: request "+x.RequestID()+": "+what+": flagged for "+categories)
}

// lastUserText appends the text of the conversation's last user message
// (all its text parts, newline-separated) to dst.
func lastUserText(dst []byte, parts []sdk.MessagePart) []byte {
	last := -1
	for i := range parts {
		if parts[i].Kind == sdk.PartText && string(parts[i].Role) == "user" {
			last = parts[i].Index
		}
	}
	if last < 0 {
		return dst
	}
	start := len(dst)
	for i := range parts {
		p := &parts[i]
		if p.Index == last && p.Kind == sdk.PartText && string(p.Role) == "user" {
			if len(dst) > start {
				dst = append(dst, '\n')
			}
			dst = append(dst, p.Text...)
		}
	}
	return dst
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	neg := n < 0
	if neg {
		n = -n
	}
	var b [20]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	if neg {
		i--
		b[i] = '-'
	}
	return string(b[i:])
}
