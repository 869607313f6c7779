// Command ratelimit is Tollgate's rate-limit policy: requests per minute
// (GCRA) and tokens per minute per tenant, per API key and per model,
// enforced by the host's limiter — exact across replicas when the gateway
// has a Redis, in-process otherwise.
//
// It runs after preflight (which resolves the tenant). Each request is
// charged one request and an estimate of its tokens (the prompt estimate
// plus max_tokens, or default_max_tokens when absent) against every limit
// that applies; all are charged or none. When the request ends the host
// corrects the tokens with the real usage: a reply that used less gives
// tokens back, one that used more leaves debt. The plugin's whole work is
// one host call per request: the host reads the tenant's limits, matches
// the model patterns and writes the headers natively. The call is
// dispatched (sdk.Dispatch) and the request phase deferred (sdk.Defer), so
// no instance is held while the host waits on Redis, and the admission can
// share its round trip with the budget's hold; an admitted request needs
// no second callback (sdk.ExpectResponse).
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
//	  "replicas": 0,                  // fail_open: a floor under the live replica count (0: none)
//	  "default_max_tokens": 512,      // token estimate for a reply without max_tokens
//	  "models": [{"match": "gpt-4*", "rpm": 100, "tpm": 40000}],
//	  "anonymous": {"rpm": 0, "tpm": 0}
//	}
//
// Under fail_open each replica admits, while Redis is unreachable, every
// limit divided by the number of live gateway replicas: the count of the
// fleet heartbeats in Redis (every second), as the replica last saw it
// before Redis went away. "replicas" is a floor under that count — the
// autoscaler's maximum bounds the fleet's total even for replicas that
// start during an outage, which have never seen a count and divide by the
// floor alone (docs/adr/0024-live-replica-count.md). 0 (the default)
// follows the live count only; policies that set a number keep working,
// the number now being the least divisor.
package main

import (
	"bytes"
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
	sdk.OnCallResponse(onCallResponse)
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
	c := config{OnRedisError: "fail_open", DefaultMaxTokens: 512}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return errors.New("ratelimit config: " + err.Error())
	}
	if c.OnRedisError != "fail_open" && c.OnRedisError != "fail_closed" {
		return errors.New(`ratelimit config: on_redis_error must be "fail_open" or "fail_closed", got "` + c.OnRedisError + `"`)
	}
	if c.Replicas < 0 || c.Replicas > 1000 {
		return errors.New("ratelimit config: replicas must be between 0 (follow the live replica count) and 1000, got " + strconv.Itoa(c.Replicas))
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
	tail = buildTail(c)
	return nil
}

// tail is the limit lines of every admission, built at configure: the
// host fills in the tenant's and key's limits, matches the model patterns
// and skips what does not apply.
var tail []byte

// req is the admission request, rebuilt in place per callback (an instance
// serves one callback at a time); the host copies it.
var req []byte

func buildTail(c config) []byte {
	b := []byte("tenant\nkey\n")
	for _, m := range c.Models {
		b = append(b, "model "...)
		b = append(b, m.Match...)
		b = append(b, ' ')
		b = strconv.AppendInt(b, m.RPM, 10)
		b = append(b, ' ')
		b = strconv.AppendInt(b, m.TPM, 10)
		b = append(b, '\n')
	}
	if c.Anonymous.RPM > 0 || c.Anonymous.TPM > 0 {
		b = append(b, "anon "...)
		b = strconv.AppendInt(b, c.Anonymous.RPM, 10)
		b = append(b, ' ')
		b = strconv.AppendInt(b, c.Anonymous.TPM, 10)
		b = append(b, '\n')
	}
	return b
}

// onRequest dispatches the admission and defers: the plugins after it run
// while the call waits, and the host may serve it together with theirs
// (the budget's hold in the same round trip to Redis). An admission
// ("allowed", "unlimited") is consumed by the host (sdk.ExpectResponse):
// onCallResponse decides the rest.
func onRequest(r *sdk.Request) sdk.Verdict {
	estimate := r.PromptTokensEstimate()
	if m, ok := r.MaxTokens(); ok {
		estimate += m
	} else {
		estimate += cfg.DefaultMaxTokens
	}
	req = append(req[:0], cfg.OnRedisError...)
	req = append(req, ' ')
	req = strconv.AppendInt(req, int64(cfg.Replicas), 10)
	req = append(req, ' ')
	req = strconv.AppendInt(req, estimate, 10)
	req = append(req, '\n')
	req = append(req, tail...)
	id, err := sdk.Dispatch("ratelimit.admit", req)
	if err == nil {
		// An admission needs no callback: admitted answers Continue
		// and does nothing else on these.
		err = sdk.ExpectResponse(id, "allowed", "unlimited")
	}
	if err != nil {
		return unavailable(r, "the rate-limit service is not available: "+err.Error())
	}
	return sdk.Defer
}

// onCallResponse reads the admission's answer; nothing is carried from
// onRequest: the answer and the config are all the verdict needs.
func onCallResponse(c *sdk.CallResponse) sdk.Verdict {
	r := c.Request()
	if r == nil {
		return sdk.Fail // only the request phase dispatches
	}
	if err := c.Err(); err != nil {
		return unavailable(r, "the rate-limit service is not available: "+err.Error())
	}
	return admitted(r, c.Body())
}

// admitted gives the verdict on ratelimit.admit's answer res. Compared as
// string(res) without a copy: an admission allocates nothing.
func admitted(r *sdk.Request, res []byte) sdk.Verdict {
	switch {
	case string(res) == "allowed", string(res) == "unlimited":
		return sdk.Continue
	case string(res) == "unavailable":
		return unavailable(r, "the rate limiter's store is unreachable")
	case bytes.HasPrefix(res, []byte("limited ")):
		sdk.MetricAdd("rejected", 1)
		return reject(r, string(res[len("limited "):]))
	default:
		sdk.Log(sdk.LevelError, "ratelimit: unexpected answer from ratelimit.admit: "+string(res))
		return unavailable(r, "unexpected answer from the limiter")
	}
}

// reject answers 429 from "KIND LIMIT RETRY_AFTER_MS"; the host has set
// Retry-After and the x-ratelimit-* headers.
func reject(r *sdk.Request, answer string) sdk.Verdict {
	f := strings.Fields(answer)
	if len(f) != 3 {
		return unavailable(r, "unexpected answer from the limiter: limited "+answer)
	}
	retry, _ := strconv.ParseInt(f[2], 10, 64)
	unit := "requests per min (RPM)"
	if f[0] == "tokens" {
		unit = "tokens per min (TPM)"
	}
	return r.Reject(429, f[0], "rate_limit_exceeded",
		"Rate limit reached on "+unit+": limit "+f[1]+". Please try again in "+
			(time.Duration(max(retry, 1))*time.Millisecond).String()+".")
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
