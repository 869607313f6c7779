// Command ratelimit is Tollgate's rate-limit policy: requests per minute
// (GCRA) and tokens per minute per tenant, per API key and per model,
// enforced by the host's limiter — exact across replicas when the gateway
// has a Redis, in-process otherwise.
//
// It runs after preflight (which resolves the tenant). Each request is
// charged one request and an estimate of its tokens (the prompt estimate
// plus max_tokens, or default_max_tokens when absent) against every limit
// that applies; all are charged or none. At the end the tokens are
// corrected with the real usage: a reply that used less gives tokens back,
// one that used more leaves debt.
//
// Limits that apply to a request:
//
//   - "t": the plan's rpm/tpm, shared by all keys of the tenant;
//   - "k:KEY": the key's own rpm/tpm overrides, if set, on that key alone;
//   - "m:PATTERN": the first entry of config "models" whose pattern matches
//     the model, per tenant;
//   - "anon": config "anonymous", for requests without a tenant.
//
// Every response of a limited request carries OpenAI's headers
// x-ratelimit-{limit,remaining,reset}-{requests,tokens} (for the most
// restrictive limit); a refused one is a 429 with Retry-After.
//
// Config (all optional):
//
//	{
//	  "on_redis_error": "fail_open",  // or "fail_closed": 503 while Redis is unreachable
//	  "replicas": 1,                  // fail_open: each replica allows limit ÷ replicas
//	  "default_max_tokens": 512,      // token estimate for a reply without max_tokens
//	  "models": [{"match": "gpt-4*", "rpm": 100, "tpm": 40000}],
//	  "anonymous": {"rpm": 0, "tpm": 0}
//	}
package main

import (
	"encoding/json"
	"errors"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate/tollgate/sdk"
)

func main() {}

func init() {
	sdk.OnConfigure(configure)
	sdk.OnRequest(onRequest)
	sdk.OnEnd(onEnd)
}

type limits struct {
	RPM int64 `json:"rpm"`
	TPM int64 `json:"tpm"`
}

type modelLimits struct {
	Match string `json:"match"`
	limits
}

type config struct {
	OnRedisError     string        `json:"on_redis_error"`
	Replicas         int           `json:"replicas"`
	DefaultMaxTokens int64         `json:"default_max_tokens"`
	Models           []modelLimits `json:"models"`
	Anonymous        limits        `json:"anonymous"`
}

var cfg config

func configure(b []byte) error {
	c := config{OnRedisError: "fail_open", Replicas: 1, DefaultMaxTokens: 512}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return errors.New("ratelimit config: " + err.Error())
	}
	if c.OnRedisError != "fail_open" && c.OnRedisError != "fail_closed" {
		return errors.New(`ratelimit config: on_redis_error must be "fail_open" or "fail_closed", got "` + c.OnRedisError + `"`)
	}
	if c.Replicas < 1 || c.Replicas > 1000 {
		return errors.New("ratelimit config: replicas must be between 1 and 1000")
	}
	if c.DefaultMaxTokens < 0 {
		return errors.New("ratelimit config: default_max_tokens must not be negative")
	}
	for i, m := range c.Models {
		at := "ratelimit config: models[" + strconv.Itoa(i) + "]"
		if m.Match == "" || strings.ContainsAny(m.Match, " \t\n") {
			return errors.New(at + ".match must be a model name or pattern without spaces")
		}
		if _, err := path.Match(m.Match, ""); err != nil {
			return errors.New(at + ".match: " + err.Error())
		}
		if m.RPM < 0 || m.TPM < 0 || (m.RPM == 0 && m.TPM == 0) {
			return errors.New(at + ": set rpm and/or tpm (positive)")
		}
	}
	if c.Anonymous.RPM < 0 || c.Anonymous.TPM < 0 {
		return errors.New("ratelimit config: anonymous limits must not be negative")
	}
	cfg = c
	return nil
}

// appendLimit adds "KEY RPM TPM\n" when either limit is set.
func appendLimit(b []byte, key string, rpm, tpm int64) []byte {
	if rpm <= 0 && tpm <= 0 {
		return b
	}
	b = append(b, key...)
	b = append(b, ' ')
	b = strconv.AppendInt(b, max(rpm, 0), 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, max(tpm, 0), 10)
	return append(b, '\n')
}

// requestLimits renders the limits that apply to the request, and whether
// any of them counts tokens.
func requestLimits(x *sdk.Request) (lines []byte, tokens bool) {
	t, ok := x.Tenant()
	if !ok {
		lines = appendLimit(nil, "anon", cfg.Anonymous.RPM, cfg.Anonymous.TPM)
		return lines, cfg.Anonymous.TPM > 0
	}
	lines = appendLimit(lines, "t", t.PlanRPM, t.PlanTPM)
	lines = appendLimit(lines, "k:"+t.KeyID, t.KeyRPM, t.KeyTPM)
	tokens = t.PlanTPM > 0 || t.KeyTPM > 0
	model := x.Model()
	for _, m := range cfg.Models {
		if ok, _ := path.Match(m.Match, model); ok {
			lines = appendLimit(lines, "m:"+m.Match, m.RPM, m.TPM)
			tokens = tokens || m.TPM > 0
			break
		}
	}
	return lines, tokens
}

func onRequest(r *sdk.Request) sdk.Verdict {
	lines, tokens := requestLimits(r)
	if len(lines) == 0 {
		return sdk.Continue
	}
	estimate := r.PromptTokensEstimate()
	if m, ok := r.MaxTokens(); ok {
		estimate += m
	} else {
		estimate += cfg.DefaultMaxTokens
	}
	head := cfg.OnRedisError + " " + strconv.Itoa(cfg.Replicas) + " "
	req := append([]byte(head+strconv.FormatInt(estimate, 10)+"\n"), lines...)
	res, err := sdk.Call("ratelimit.admit", req)
	if err != nil {
		return unavailable(r, "the rate-limit service is not available: "+err.Error())
	}
	status, rest, _ := strings.Cut(string(res), " ")
	if status == "unavailable" {
		return unavailable(r, "the rate limiter's store is unreachable")
	}
	d, ok := parseDecision(rest)
	if !ok {
		sdk.Log(sdk.LevelError, "ratelimit: unexpected answer from ratelimit.admit: "+string(res))
		return unavailable(r, "unexpected answer from the limiter")
	}
	setHeaders(r, d)
	if d.fallback {
		sdk.MetricAdd("fallback_decisions", 1)
	}
	if status != "allowed" {
		sdk.MetricAdd("rejected", 1)
		return reject(r, d)
	}
	if tokens {
		// The end phase corrects the estimate; keep what it needs.
		st := append([]byte(head), strconv.FormatInt(estimate, 10)...)
		st = append(st, '\n')
		st = append(st, lines...)
		if err := r.SetState(st); err != nil {
			sdk.Log(sdk.LevelWarn, "ratelimit: cannot keep state for the token correction: "+err.Error())
		}
	}
	return sdk.Continue
}

type decision struct {
	limitReq, remainingReq, resetReqMs int64
	limitTok, remainingTok, resetTokMs int64
	retryMs                            int64
	fallback                           bool
}

func parseDecision(s string) (decision, bool) {
	f := strings.Fields(s)
	if len(f) != 8 {
		return decision{}, false
	}
	var v [8]int64
	for i, x := range f {
		n, err := strconv.ParseInt(x, 10, 64)
		if err != nil {
			return decision{}, false
		}
		v[i] = n
	}
	return decision{v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7] == 1}, true
}

func setHeaders(r *sdk.Request, d decision) {
	if d.limitReq > 0 {
		r.SetResponseHeader("x-ratelimit-limit-requests", strconv.FormatInt(d.limitReq, 10))
		r.SetResponseHeader("x-ratelimit-remaining-requests", strconv.FormatInt(d.remainingReq, 10))
		r.SetResponseHeader("x-ratelimit-reset-requests", resetString(d.resetReqMs))
	}
	if d.limitTok > 0 {
		r.SetResponseHeader("x-ratelimit-limit-tokens", strconv.FormatInt(d.limitTok, 10))
		r.SetResponseHeader("x-ratelimit-remaining-tokens", strconv.FormatInt(d.remainingTok, 10))
		r.SetResponseHeader("x-ratelimit-reset-tokens", resetString(d.resetTokMs))
	}
}

// resetString formats a reset time as OpenAI does: "20ms", "1.5s", "6m0s".
func resetString(ms int64) string {
	return (time.Duration(max(ms, 0)) * time.Millisecond).String()
}

func reject(r *sdk.Request, d decision) sdk.Verdict {
	retry := max(d.retryMs, 1)
	r.SetResponseHeader("Retry-After", strconv.FormatInt((retry+999)/1000, 10))
	r.SetResponseHeader("retry-after-ms", strconv.FormatInt(retry, 10))
	kind, unit, limit := "requests", "requests per min (RPM)", d.limitReq
	if d.limitReq <= 0 || d.remainingReq > 0 {
		kind, unit, limit = "tokens", "tokens per min (TPM)", d.limitTok
	}
	return r.Reject(429, kind, "rate_limit_exceeded",
		"Rate limit reached on "+unit+": limit "+strconv.FormatInt(limit, 10)+
			". Please try again in "+resetString(retry)+".")
}

func unavailable(r *sdk.Request, why string) sdk.Verdict {
	if cfg.OnRedisError == "fail_open" {
		sdk.Log(sdk.LevelWarn, "ratelimit: "+why+"; admitting (fail_open)")
		sdk.MetricAdd("fail_open_admissions", 1)
		return sdk.Continue
	}
	sdk.Log(sdk.LevelError, "ratelimit: "+why+"; refusing (fail_closed)")
	return r.Reject(503, "server_error", "rate_limiter_unavailable",
		"The gateway cannot check rate limits right now; retry shortly.")
}

func onEnd(e *sdk.End) {
	st := e.State()
	if len(st) == 0 {
		return
	}
	head, lines, _ := strings.Cut(string(st), "\n")
	i := strings.LastIndexByte(head, ' ')
	if i < 0 {
		return
	}
	estimate, err := strconv.ParseInt(head[i+1:], 10, 64)
	if err != nil {
		return
	}
	u := e.Usage()
	actual := max(u.PromptTokens, 0) + max(u.CompletionTokens, 0)
	delta := actual - estimate
	if delta == 0 {
		return
	}
	req := head[:i+1] + strconv.FormatInt(delta, 10) + "\n" + lines
	if _, err := sdk.Call("ratelimit.adjust", []byte(req)); err != nil {
		sdk.Log(sdk.LevelWarn, "ratelimit: token correction failed: "+err.Error())
	}
}
