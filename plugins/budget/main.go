// Command budget is Tollgate's spend policy: it holds each request's
// maximum cost against the tenant's monthly budget before anything is sent
// upstream, and settles the actual cost when the reply ends, so total spend
// stays within the budget under any concurrency and across replicas.
//
// The host prices tokens with the model's price and keeps the counter
// (Redis when the gateway has one, in-process otherwise) and the durable
// ledger (call_log and spend_month in Postgres). The plugin decides what to
// reserve and what to do when the money runs out:
//
//   - request: reserve an upper bound of the request's cost, each token at
//     the highest rate of its side: the host's bound of the prompt's
//     tokens (PromptTokensBound; docs/POLICY.md has the argument) plus an
//     output bound — max_tokens (× n); else for a non-streamed request, or
//     a stream of a model with hidden reasoning, the model's most output
//     tokens (from its price), or default_max_tokens when that is unknown
//     (not proven: see unbounded_output); a stream of another model
//     starts at default_max_tokens and grows. Refused → 429
//     insufficient_quota.
//   - chunk: a growing stream counts every streamed byte of text and of
//     tool-call arguments as a token (a token is at least one byte), plus
//     one per event; before that count comes within slack of what is held
//     it extends the hold by extend_tokens (or what is missing), and when
//     the budget cannot cover that and the next event might not fit, it
//     ends the reply with a final event that says why.
//   - end: the host settles the usage (the upstream's, else the gateway's
//     count) on success, error and client disconnect alike, and releases
//     the hold; a request whose gateway dies is released with its lease.
//
// No instance waits on the counter: budget.reserve is dispatched and the
// request phase deferred (sdk.Defer: the host may make the hold in the
// rate limiter's round trip; a hold made needs no second callback,
// sdk.ExpectResponse), and budget.extend is dispatched with the
// event paused (sdk.Pause) until its answer.
//
// Config (all optional):
//
//	{
//	  "on_redis_error": "fail_closed",    // or "fail_open": serve while the counter is unreachable
//	  "default_max_tokens": 1024,         // output tokens held without max_tokens when the model's maximum is unknown
//	  "unbounded_output": "default",      // or "reject": refuse such a request (400) instead of holding default_max_tokens
//	  "unbounded_prompt_tokens": 200000,  // prompt tokens held when the host has no bound (files, server tools; no context window)
//	  "extend_tokens": 1024,              // output tokens added per extension
//	  "lease": "15m",                     // a hold not settled by then is released (a crashed replica)
//	  "unpriced": "",                     // deprecated: the policy's pricing.unpriced decides (below)
//	  "cut_message": "…"                  // the text of the final event of a cut stream
//	                                      // (default: one naming the budget that ran out)
//	}
//
// A model without a price is one knob, the policy's pricing.unpriced: the
// host answers budget.reserve "noprice refuse" under "refuse" (the plugin
// refuses the request, 400 model_not_priced) and "noprice" under "free"
// (served at no cost). The plugin's own "unpriced" predates it: "reject"
// still refuses every unpriced model, "allow" (or unset) leaves the
// decision to the policy.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate/tollgate/sdk"
)

func main() {}

func init() {
	sdk.OnConfigure(configure)
	sdk.OnRequest(onRequest)
	sdk.OnChunk(onChunk)
	sdk.OnCallResponse(onCallResponse)
}

type config struct {
	OnRedisError          string `json:"on_redis_error"`
	DefaultMaxTokens      int64  `json:"default_max_tokens"`
	UnboundedOutput       string `json:"unbounded_output"`
	UnboundedPromptTokens int64  `json:"unbounded_prompt_tokens"`
	ExtendTokens          int64  `json:"extend_tokens"`
	Lease                 string `json:"lease"`
	Unpriced              string `json:"unpriced"`
	CutMessage            string `json:"cut_message"`

	leaseMs int64
}

var cfg config

func configure(b []byte) error {
	c := config{OnRedisError: "fail_closed", DefaultMaxTokens: 1024, UnboundedOutput: "default", UnboundedPromptTokens: 200_000,
		ExtendTokens: 1024, Lease: "15m"}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return errors.New("budget config: " + err.Error())
	}
	if c.OnRedisError != "fail_open" && c.OnRedisError != "fail_closed" {
		return errors.New(`budget config: on_redis_error must be "fail_open" or "fail_closed", got "` + c.OnRedisError + `"`)
	}
	if c.DefaultMaxTokens < 1 || c.ExtendTokens < 1 || c.UnboundedPromptTokens < 1 {
		return errors.New("budget config: default_max_tokens, extend_tokens and unbounded_prompt_tokens must be at least 1")
	}
	if c.UnboundedOutput != "default" && c.UnboundedOutput != "reject" {
		return errors.New(`budget config: unbounded_output must be "default" or "reject", got "` + c.UnboundedOutput + `"`)
	}
	lease, err := time.ParseDuration(c.Lease)
	if err != nil || lease < time.Second || lease > 24*time.Hour {
		return errors.New("budget config: lease must be a duration between 1s and 24h, got \"" + c.Lease + "\"")
	}
	c.leaseMs = lease.Milliseconds()
	if c.Unpriced != "" && c.Unpriced != "allow" && c.Unpriced != "reject" {
		return errors.New(`budget config: unpriced is deprecated (set the policy's pricing.unpriced); if set it must be "allow" or "reject", got "` + c.Unpriced + `"`)
	}
	cfg = c
	return nil
}

// hold is the plugin's per-request state for a stream that grows its hold:
// how many completion tokens the hold covers, how many the reply may have
// used (bytes of text and tool-call arguments, plus events), the largest
// event seen, and while a budget.extend is dispatched the tokens it asks
// for ("RESERVED USED LARGEST [PENDING]"). The request phase keeps it from
// the dispatch of budget.reserve to its answer ("COMPLETION 0 0").
type hold struct {
	reserved int64
	used     int64
	largest  int64
	pending  int64
}

func (h *hold) encode(b []byte) []byte {
	b = strconv.AppendInt(b[:0], h.reserved, 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, h.used, 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, h.largest, 10)
	if h.pending > 0 {
		b = append(b, ' ')
		b = strconv.AppendInt(b, h.pending, 10)
	}
	return b
}

func decode(b []byte) (hold, bool) {
	var h hold
	var v [4]int64
	i := 0
	for _, c := range b {
		switch {
		case c == ' ' && i < 3:
			i++
		case c >= '0' && c <= '9':
			v[i] = v[i]*10 + int64(c-'0')
		default:
			return h, false
		}
	}
	return hold{v[0], v[1], v[2], v[3]}, i == 2 || i == 3
}

// scratch is reused within a callback (an instance serves one at a time):
// a service request (the host copies it) or the state.
var scratch []byte

// minSlack is the least headroom, in tokens, a growing stream keeps
// between what it may have used and what is held; the slack is at least
// twice the largest event seen so far, so that the next event fits.
const minSlack = 256

// slack is the headroom to keep ahead of the reply.
func (h *hold) slack() int64 { return max(minSlack, 2*h.largest) }

// onRequest dispatches budget.reserve for the request's bound and defers:
// the plugins after it run while the call waits, and the host may serve it
// together with theirs (the rate limiter's admission in the same round
// trip to Redis). A hold ("ok ...") is consumed by the host
// (sdk.ExpectResponse): what reserved would do on it — skip the chunk
// phase unless the hold grows — is done here; reserved decides the rest.
func onRequest(r *sdk.Request) sdk.Verdict {
	if !r.HasTenant() {
		r.SkipPhases(sdk.PhaseChunk)
		return sdk.Continue // no tenant, no budget (preflight decides who may pass)
	}
	prompt, ok := r.PromptTokensBound()
	if !ok {
		// Files, stored conversations or server-side tools, and no
		// context window known: not a proven bound.
		prompt = cfg.UnboundedPromptTokens
	}
	completion, grows, ok := outputBound(r)
	if !ok {
		r.SkipPhases(sdk.PhaseChunk)
		return r.Reject(400, "invalid_request_error", "max_tokens_required",
			"Set max_tokens: without it the most this reply could cost is not known, so it cannot be held against the budget.")
	}
	scratch = strconv.AppendInt(scratch[:0], prompt, 10)
	scratch = append(scratch, ' ')
	scratch = strconv.AppendInt(scratch, completion, 10)
	scratch = append(scratch, ' ')
	scratch = strconv.AppendInt(scratch, cfg.leaseMs, 10)
	id, err := sdk.Dispatch("budget.reserve", scratch)
	if err == nil {
		// A hold ("ok AMOUNT REMAINING") needs no callback: what
		// reserved does on it is done here, before the answer.
		err = sdk.ExpectResponse(id, "ok ")
	}
	if err != nil {
		r.SkipPhases(sdk.PhaseChunk)
		return unavailable(r, "the budget service is not available: "+err.Error())
	}
	if grows {
		// What the answer's handler needs, and a stream with a hold
		// keeps: the hold to grow from.
		h := hold{reserved: completion}
		if err := r.SetState(h.encode(scratch)); err != nil {
			sdk.Log(sdk.LevelError, "budget: cannot keep the hold's state: "+err.Error())
		}
	} else {
		r.SkipPhases(sdk.PhaseChunk) // bounded output: no per-event counting, whatever the answer
	}
	return sdk.Defer
}

// onCallResponse hands a dispatched call's answer to its phase:
// budget.reserve's to reserved, budget.extend's to extended.
func onCallResponse(c *sdk.CallResponse) sdk.Verdict {
	if r := c.Request(); r != nil {
		return reserved(r, c)
	}
	if ch := c.Chunk(); ch != nil {
		return extended(ch, c)
	}
	return sdk.Fail // no other phase dispatches
}

// reserved gives the request phase's verdict on budget.reserve's answer.
// A stream whose hold grows kept the hold in its state (onRequest); any
// other request, and a stream without a hold, skips the chunk phase.
func reserved(r *sdk.Request, c *sdk.CallResponse) sdk.Verdict {
	_, grows := decode(r.State())
	if err := c.Err(); err != nil {
		r.SkipPhases(sdk.PhaseChunk)
		forget(r, grows)
		return unavailable(r, "the budget service is not available: "+err.Error())
	}
	res := c.Body()
	st, rest, _ := bytes.Cut(res, []byte(" "))
	status := word(st)

	if status != "ok" || !grows {
		// No hold, or the output is bounded already: no per-event counting.
		r.SkipPhases(sdk.PhaseChunk)
		forget(r, grows)
	}
	switch status {
	case "ok", "unlimited", "notenant":
		return sdk.Continue
	case "insufficient":
		sdk.MetricAdd("rejected", 1)
		return r.Reject(429, "insufficient_quota", "insufficient_quota",
			"You exceeded your current quota: this request could cost more than what is left of "+budgetName(string(rest))+remaining(string(rest))+".")
	case "noprice":
		// A request without a model (the Files and Batch APIs) has no
		// price to have and no usage to settle: not refused for it. Nor
		// is an MCP message (endpoint mcp): tool calls are not priced.
		if (cfg.Unpriced == "reject" || string(rest) == "refuse") && r.Model() != "" && r.Endpoint() != "mcp" {
			return r.Reject(400, "invalid_request_error", "model_not_priced",
				"The model `"+r.Model()+"` has no price, so its cost cannot be held against the budget.")
		}
		return sdk.Continue
	case "unavailable":
		return unavailable(r, "the budget counter is unreachable")
	default:
		sdk.Log(sdk.LevelError, "budget: unexpected answer from budget.reserve: "+string(res))
		return unavailable(r, "unexpected answer from the budget service")
	}
}

// forget drops the hold kept for a stream that holds nothing after all.
func forget(r *sdk.Request, kept bool) {
	if kept {
		r.SetState(nil)
	}
}

// outputBound is the completion tokens to hold, and whether the hold grows
// with the reply (a stream counted as it flows); false when the request
// must be refused (unbounded_output "reject").
func outputBound(r *sdk.Request) (completion int64, grows, ok bool) {
	if r.Endpoint() == "embeddings" {
		return 0, false, true // no output tokens
	}
	choices := r.Choices()
	if n, has := r.MaxTokens(); has {
		return satMul(n, choices), false, true
	}
	reasoning, _ := r.ModelReasoning()
	if r.Stream() && !reasoning {
		// Streamed text bounds the output: hold some, grow with it.
		return satMul(cfg.DefaultMaxTokens, choices), true, true
	}
	if n, known := r.ModelMaxOutput(); known {
		return satMul(n, choices), false, true
	}
	if cfg.UnboundedOutput == "reject" {
		return 0, false, false
	}
	// Not a proven bound: the model's maximum output is unknown.
	sdk.MetricAdd("unbounded_output", 1)
	return satMul(cfg.DefaultMaxTokens, choices), false, true
}

// satMul is a×b for a, b ≥ 1, saturating instead of overflowing.
func satMul(a, b int64) int64 {
	if b > 1 && a > (1<<63-1)/b {
		return 1<<63 - 1
	}
	return a * b
}

// word returns a service answer's status word, as a constant for the
// known ones: reading an answer allocates nothing.
func word(b []byte) string {
	for _, w := range [...]string{"ok", "insufficient", "unlimited", "notenant", "noprice", "unavailable"} {
		if string(b) == w {
			return w
		}
	}
	return string(b)
}

// cutMessage is the final text of a stream cut after budget.extend
// answered res: cut_message, or by default one naming the budget that
// ran out ("the API key's daily budget is exhausted").
func cutMessage(res string) string {
	if cfg.CutMessage != "" {
		return cfg.CutMessage
	}
	_, rest, _ := strings.Cut(res, " ")
	return "\n\n[The reply was cut: " + budgetName(rest) + " is exhausted.]"
}

// budgetName names the budget that refused, from the SCOPE of "AMOUNT
// REMAINING SCOPE" ("key:day" is "the key's daily budget"); a host that
// names none refused for the tenant's month.
func budgetName(rest string) string {
	f := strings.Fields(rest)
	if len(f) < 3 {
		return "the monthly budget"
	}
	kind, window, _ := strings.Cut(f[2], ":")
	who := map[string]string{"tenant": "the tenant's", "key": "the API key's", "user": "the end user's"}[kind]
	if who == "" {
		who = "a"
	}
	per := "monthly"
	if window == "day" {
		per = "daily"
	}
	return who + " " + per + " budget"
}

// remaining renders " (1.234567 USD left)" from "AMOUNT REMAINING [SCOPE]".
func remaining(rest string) string {
	f := strings.Fields(rest)
	if len(f) < 2 {
		return ""
	}
	left, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return ""
	}
	left = max(left, 0)
	return " (" + strconv.FormatInt(left/1_000_000, 10) + "." + pad6(left%1_000_000) + " USD left)"
}

func pad6(n int64) string {
	s := strconv.FormatInt(n, 10)
	return strings.Repeat("0", 6-len(s)) + s
}

func unavailable(r *sdk.Request, why string) sdk.Verdict {
	if cfg.OnRedisError == "fail_open" {
		sdk.Log(sdk.LevelWarn, "budget: "+why+"; admitting (fail_open)")
		sdk.MetricAdd("fail_open_admissions", 1)
		return sdk.Continue
	}
	sdk.Log(sdk.LevelError, "budget: "+why+"; refusing (fail_closed)")
	return r.Reject(503, "server_error", "budget_unavailable",
		"The gateway cannot check the budget right now; retry shortly.")
}

// onChunk runs only for streams that grow their hold: it counts what the
// reply may have used and grows the hold ahead of it, or cuts the reply
// when the budget cannot cover more. Growing dispatches budget.extend and
// pauses the event (it is not forwarded before the answer); extended goes
// on from the answer.
func onChunk(c *sdk.Chunk) sdk.Verdict {
	if c.IsWhole() || !c.HasText() && !c.HasToolCalls() {
		return sdk.Continue
	}
	h, ok := decode(c.State())
	if !ok {
		return sdk.Continue
	}
	// Every token is at least one byte of what is streamed; one more per
	// event covers tokens that stream nothing (an end of turn).
	n := int64(c.Len()) + int64(len(c.ToolCalls())) + 1
	h.used += n
	h.largest = max(h.largest, n)
	return grow(c, h)
}

// grow extends the hold before the reply reaches it, so a cut leaves the
// settled cost within the hold: it asks for extend_tokens (or what is
// missing), or, when the hold is far enough ahead, keeps the count and
// lets the event through.
func grow(c *sdk.Chunk, h hold) sdk.Verdict {
	if h.used+h.slack() <= h.reserved {
		c.SetState(h.encode(scratch))
		return sdk.Continue
	}
	deficit := h.used + h.slack() - h.reserved
	return extend(c, h, max(cfg.ExtendTokens, deficit))
}

// extend dispatches budget.extend for more completion tokens and pauses,
// keeping the count and what it asked for in the state; a call that cannot
// be dispatched is answered as a failed one.
func extend(c *sdk.Chunk, h hold, more int64) sdk.Verdict {
	scratch = strconv.AppendInt(scratch[:0], more, 10)
	scratch = append(scratch, ' ')
	scratch = strconv.AppendInt(scratch, cfg.leaseMs, 10)
	if _, err := sdk.Dispatch("budget.extend", scratch); err != nil {
		return extendedBy(c, h, more, "", "")
	}
	h.pending = more
	c.SetState(h.encode(scratch))
	return sdk.Pause
}

// extended reads budget.extend's answer: its status word ("" when the
// call failed) and the whole answer.
func extended(c *sdk.Chunk, r *sdk.CallResponse) sdk.Verdict {
	h, ok := decode(c.State())
	if !ok || h.pending == 0 {
		sdk.Log(sdk.LevelError, "budget: an extension's answer without its request in the state")
		return sdk.Fail
	}
	more := h.pending
	h.pending = 0
	if r.Err() != nil {
		return extendedBy(c, h, more, "", "")
	}
	res := string(r.Body())
	status, _, _ := strings.Cut(res, " ")
	return extendedBy(c, h, more, status, res)
}

// extendedBy decides on the answer (status, res) to an extension of the
// hold h by more tokens: grow on, serve on without counting, let the event
// through, or cut the reply.
func extendedBy(c *sdk.Chunk, h hold, more int64, status, res string) sdk.Verdict {
	deficit := h.used + h.slack() - h.reserved
	switch {
	case status == "insufficient" && more > deficit:
		return extend(c, h, deficit) // a smaller step may still fit the budget
	case status == "ok":
		h.reserved += more
		return grow(c, h)
	case status == "unlimited" || status == "noprice" || status == "unavailable" && cfg.OnRedisError == "fail_open":
		c.SkipPhases(sdk.PhaseChunk) // serve on; the end settles the cost
		return sdk.Continue
	case status == "insufficient" && h.used+2*h.largest <= h.reserved:
		// No slack left, but the next event fits even if twice the
		// largest so far: go on, and ask again after it.
		c.SetState(h.encode(scratch))
		return sdk.Continue
	}
	sdk.MetricAdd("streams_cut", 1)
	c.SetFact("guard_action", "budget:cut")
	c.SkipPhases(sdk.PhaseChunk)
	return c.Stop(cutMessage(res), "length")
}
