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
//   - end: settle the usage (the upstream's, else the gateway's count) on
//     success, error and client disconnect alike.
//
// Config (all optional):
//
//	{
//	  "on_redis_error": "fail_closed", // or "fail_open": serve while the counter is unreachable
//	  "default_max_tokens": 1024,      // completion tokens reserved without max_tokens
//	  "extend_tokens": 1024,           // completion tokens added per extension
//	  "lease": "15m",                  // a hold not settled by then is released (a crashed replica)
//	  "unpriced": "allow",             // or "reject": a model without a price is refused
//	  "cut_message": "…"               // the text of the final event of a cut stream
//	}
package main

import (
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
	sdk.OnEnd(onEnd)
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
	c := config{OnRedisError: "fail_closed", DefaultMaxTokens: 1024, ExtendTokens: 1024, Lease: "15m", Unpriced: "allow",
		CutMessage: "\n\n[The reply was cut: the monthly budget is exhausted.]"}
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
	if c.Unpriced != "allow" && c.Unpriced != "reject" {
		return errors.New(`budget config: unpriced must be "allow" or "reject", got "` + c.Unpriced + `"`)
	}
	cfg = c
	return nil
}

// hold is the plugin's per-request state: what is reserved and, for a
// stream that grows its hold, how much of it the reply has used.
type hold struct {
	month    string
	reserved int64 // completion tokens covered by the hold
	grows    bool  // no max_tokens: extend as the stream goes
	events   int64 // text events seen
	bytes    int64 // text bytes seen
	cut      bool
}

func (h *hold) encode() []byte {
	b := append([]byte(h.month), ' ')
	b = strconv.AppendInt(b, h.reserved, 10)
	b = append(b, ' ')
	b = strconv.AppendBool(b, h.grows)
	b = append(b, ' ')
	b = strconv.AppendInt(b, h.events, 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, h.bytes, 10)
	b = append(b, ' ')
	return strconv.AppendBool(b, h.cut)
}

func decode(b []byte) (hold, bool) {
	f := strings.Fields(string(b))
	if len(f) != 6 {
		return hold{}, false
	}
	var h hold
	var err [5]error
	h.month = f[0]
	h.reserved, err[0] = strconv.ParseInt(f[1], 10, 64)
	h.grows, err[1] = strconv.ParseBool(f[2])
	h.events, err[2] = strconv.ParseInt(f[3], 10, 64)
	h.bytes, err[3] = strconv.ParseInt(f[4], 10, 64)
	h.cut, err[4] = strconv.ParseBool(f[5])
	return h, errors.Join(err[:]...) == nil
}

// cutSlack is how many completion tokens before the end of the hold a
// growing stream extends it (or is cut): more than one event's worth.
const cutSlack = 16

// used estimates the completion tokens of the text seen so far as the host
// does when the upstream reports no usage.
func (h *hold) used() int64 { return max(h.events, (h.bytes+3)/4) }

func onRequest(r *sdk.Request) sdk.Verdict {
	if _, ok := r.Tenant(); !ok {
		return sdk.Continue // no tenant, no budget (preflight decides who may pass)
	}
	completion, has := r.MaxTokens()
	if !has {
		completion = cfg.DefaultMaxTokens
	}
	req := strconv.FormatInt(r.PromptTokensEstimate(), 10) + " " + strconv.FormatInt(completion, 10) + " " + strconv.FormatInt(cfg.leaseMs, 10)
	res, err := sdk.Call("budget.reserve", []byte(req))
	if err != nil {
		return unavailable(r, "the budget service is not available: "+err.Error())
	}
	status, rest, _ := strings.Cut(string(res), " ")
	switch status {
	case "ok":
	case "insufficient":
		sdk.MetricAdd("rejected", 1)
		return r.Reject(429, "insufficient_quota", "insufficient_quota",
			"You exceeded your current quota: this request could cost more than what is left of the monthly budget"+remaining(rest)+".")
	case "unlimited", "notenant":
		return sdk.Continue
	case "noprice":
		if cfg.Unpriced == "reject" {
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
	month, _, _ := strings.Cut(rest, " ")
	h := hold{month: month, reserved: completion, grows: !has && r.Stream()}
	if err := r.SetState(h.encode()); err != nil {
		sdk.Log(sdk.LevelError, "budget: cannot keep the hold's state: "+err.Error())
	}
	return sdk.Continue
}

// remaining renders ": 1.234567 USD left" from a reservation answer
// ("MONTH AMOUNT SPENT RESERVED REMAINING").
func remaining(rest string) string {
	f := strings.Fields(rest)
	if len(f) != 5 {
		return ""
	}
	left, err := strconv.ParseInt(f[4], 10, 64)
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

func onChunk(c *sdk.Chunk) sdk.Verdict {
	if !c.HasText() || c.IsWhole() {
		return sdk.Continue
	}
	st := c.State()
	if len(st) == 0 {
		return sdk.Continue
	}
	h, ok := decode(st)
	if !ok || !h.grows || h.cut {
		return sdk.Continue
	}
	h.events++
	h.bytes += int64(c.Len())
	// Extend before the reply reaches what is held, so a cut leaves the
	// settled cost within the hold.
	for h.used()+cutSlack > h.reserved {
		req := h.month + " " + strconv.FormatInt(cfg.ExtendTokens, 10) + " " + strconv.FormatInt(cfg.leaseMs, 10)
		res, err := sdk.Call("budget.extend", []byte(req))
		status, _, _ := strings.Cut(string(res), " ")
		if err == nil && status == "ok" {
			h.reserved += cfg.ExtendTokens
			continue
		}
		if err == nil && status == "unavailable" && cfg.OnRedisError == "fail_open" {
			break // serve on; settle corrects the counter
		}
		if err == nil && (status == "unlimited" || status == "noprice") {
			break
		}
		h.cut = true
		c.SetState(h.encode())
		sdk.MetricAdd("streams_cut", 1)
		c.SetFact("guard_action", "budget:cut")
		return c.Stop(cfg.CutMessage, "length")
	}
	c.SetState(h.encode())
	return sdk.Continue
}

func onEnd(e *sdk.End) {
	st := e.State()
	if len(st) == 0 {
		return
	}
	h, ok := decode(st)
	if !ok {
		return
	}
	u := e.Usage()
	req := h.month + " " + strconv.FormatInt(max(u.PromptTokens, 0), 10) + " " + strconv.FormatInt(max(u.CompletionTokens, 0), 10)
	res, err := sdk.Call("budget.settle", []byte(req))
	if err != nil || !strings.HasPrefix(string(res), "ok ") {
		sdk.Log(sdk.LevelWarn, "budget: settle not confirmed ("+string(res)+"); the ledger records the cost and reconcile corrects the counter")
	}
}
