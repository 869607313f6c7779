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
//   - request: reserve prompt estimate × input price + max_tokens × output
//     price (default_max_tokens when the request sets none). Refused → 429
//     insufficient_quota.
//   - chunk: a stream without max_tokens counts its tokens as they arrive;
//     before they pass what is reserved it extends the hold by
//     extend_tokens, and when the budget cannot cover that, it ends the
//     reply with a final event that says why.
//   - end: the host settles the usage (the upstream's, else the gateway's
//     count) on success, error and client disconnect alike, and releases
//     the hold; a request whose gateway dies is released with its lease.
//
// Config (all optional):
//
//	{
//	  "on_redis_error": "fail_closed", // or "fail_open": serve while the counter is unreachable
//	  "default_max_tokens": 1024,      // completion tokens reserved without max_tokens
//	  "extend_tokens": 1024,           // completion tokens added per extension
//	  "lease": "15m",                  // a hold not settled by then is released (a crashed replica)
//	  "unpriced": "",                  // deprecated: the policy's pricing.unpriced decides (below)
//	  "cut_message": "…"               // the text of the final event of a cut stream
//	                                   // (default: one naming the budget that ran out)
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
}

type config struct {
	OnRedisError     string `json:"on_redis_error"`
	DefaultMaxTokens int64  `json:"default_max_tokens"`
	ExtendTokens     int64  `json:"extend_tokens"`
	Lease            string `json:"lease"`
	Unpriced         string `json:"unpriced"`
	CutMessage       string `json:"cut_message"`

	leaseMs int64
}

var cfg config

func configure(b []byte) error {
	c := config{OnRedisError: "fail_closed", DefaultMaxTokens: 1024, ExtendTokens: 1024, Lease: "15m"}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return errors.New("budget config: " + err.Error())
	}
	if c.OnRedisError != "fail_open" && c.OnRedisError != "fail_closed" {
		return errors.New(`budget config: on_redis_error must be "fail_open" or "fail_closed", got "` + c.OnRedisError + `"`)
	}
	if c.DefaultMaxTokens < 1 || c.ExtendTokens < 1 {
		return errors.New("budget config: default_max_tokens and extend_tokens must be at least 1")
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
// how many completion tokens the hold covers and how much of it the reply
// has used ("RESERVED EVENTS BYTES").
type hold struct {
	reserved int64
	events   int64
	bytes    int64
}

func (h *hold) encode(b []byte) []byte {
	b = strconv.AppendInt(b[:0], h.reserved, 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, h.events, 10)
	b = append(b, ' ')
	return strconv.AppendInt(b, h.bytes, 10)
}

func decode(b []byte) (hold, bool) {
	var h hold
	var v [3]int64
	i := 0
	for _, c := range b {
		switch {
		case c == ' ' && i < 2:
			i++
		case c >= '0' && c <= '9':
			v[i] = v[i]*10 + int64(c-'0')
		default:
			return h, false
		}
	}
	return hold{v[0], v[1], v[2]}, i == 2
}

// scratch and res are reused within a callback (an instance serves one at
// a time).
var scratch, res []byte

// cutSlack is how many completion tokens before the end of the hold a
// growing stream extends it (or is cut): more than one event's worth.
const cutSlack = 16

// used estimates the completion tokens of the text seen so far as the host
// does when the upstream reports no usage.
func (h *hold) used() int64 { return max(h.events, (h.bytes+3)/4) }

func onRequest(r *sdk.Request) sdk.Verdict {
	if !r.HasTenant() {
		r.SkipPhases(sdk.PhaseChunk)
		return sdk.Continue // no tenant, no budget (preflight decides who may pass)
	}
	completion, has := r.MaxTokens()
	if !has {
		completion = cfg.DefaultMaxTokens
	}
	scratch = strconv.AppendInt(scratch[:0], r.PromptTokensEstimate(), 10)
	scratch = append(scratch, ' ')
	scratch = strconv.AppendInt(scratch, completion, 10)
	scratch = append(scratch, ' ')
	scratch = strconv.AppendInt(scratch, cfg.leaseMs, 10)
	var err error
	res, err = sdk.AppendCall(res[:0], "budget.reserve", scratch)
	if err != nil {
		r.SkipPhases(sdk.PhaseChunk)
		return unavailable(r, "the budget service is not available: "+err.Error())
	}
	st, rest, _ := bytes.Cut(res, []byte(" "))
	status := word(st)

	grows := !has && r.Stream()
	if status != "ok" || !grows {
		// No hold, or max_tokens bounds it: no per-event counting.
		r.SkipPhases(sdk.PhaseChunk)
	}
	switch status {
	case "ok":
	case "insufficient":
		sdk.MetricAdd("rejected", 1)
		return r.Reject(429, "insufficient_quota", "insufficient_quota",
			"You exceeded your current quota: this request could cost more than what is left of "+budgetName(string(rest))+remaining(string(rest))+".")
	case "unlimited", "notenant":
		return sdk.Continue
	case "noprice":
		// A request without a model (the Files and Batch APIs) has no
		// price to have and no usage to settle: not refused for it.
		if (cfg.Unpriced == "reject" || string(rest) == "refuse") && r.Model() != "" {
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
	if grows {
		h := hold{reserved: completion}
		if err := r.SetState(h.encode(scratch)); err != nil {
			sdk.Log(sdk.LevelError, "budget: cannot keep the hold's state: "+err.Error())
		}
	}
	return sdk.Continue
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

// onChunk runs only for streams without max_tokens: it counts the reply's
// tokens and grows the hold ahead of them, or cuts the reply when the
// budget cannot cover more.
func onChunk(c *sdk.Chunk) sdk.Verdict {
	if !c.HasText() || c.IsWhole() {
		return sdk.Continue
	}
	h, ok := decode(c.State())
	if !ok {
		return sdk.Continue
	}
	h.events++
	h.bytes += int64(c.Len())
	// Extend before the reply reaches what is held, so a cut leaves the
	// settled cost within the hold.
	for h.used()+cutSlack > h.reserved {
		scratch = strconv.AppendInt(scratch[:0], cfg.ExtendTokens, 10)
		scratch = append(scratch, ' ')
		scratch = strconv.AppendInt(scratch, cfg.leaseMs, 10)
		res, err := sdk.Call("budget.extend", scratch)
		status, _, _ := strings.Cut(string(res), " ")
		if err == nil && status == "ok" {
			h.reserved += cfg.ExtendTokens
			continue
		}
		if err == nil && (status == "unlimited" || status == "noprice" ||
			(status == "unavailable" && cfg.OnRedisError == "fail_open")) {
			c.SkipPhases(sdk.PhaseChunk) // serve on; the end settles the cost
			return sdk.Continue
		}
		sdk.MetricAdd("streams_cut", 1)
		c.SetFact("guard_action", "budget:cut")
		c.SkipPhases(sdk.PhaseChunk)
		return c.Stop(cutMessage(string(res)), "length")
	}
	c.SetState(h.encode(scratch))
	return sdk.Continue
}
