// Command cache is Tollgate's response cache policy: a request the policy
// deems cacheable is answered from a stored reply of an identical request
// when there is one, and its reply is stored otherwise. The host does the
// mechanics (docs/adr/0028-response-cache.md): it keys the request (its
// scope and the request normalised: model, messages, tools, sampling
// parameters, response format; not stream or user), looks it up in the
// gateway's in-process layer and then Redis (shared by replicas), serves a
// hit as the reply — streamed or whole as the client asked, whichever way
// it was stored — and stores a reply that completed and that no guard
// stopped. The plugin decides which requests take part, for how long and
// at what cost.
//
// Which requests: with "when": "deterministic" (the default) a chat or
// completions request whose temperature is 0, and every embeddings
// request; "always": every request; "header": only requests that ask with
// the header X-Tollgate-Cache: use. In every mode a client's
// X-Tollgate-Cache: use opts a request in, and
// Cache-Control: no-store keeps it out (neither read nor stored),
// Cache-Control: no-cache makes it skip the stored reply and store the new
// one. The response carries X-Tollgate-Cache: hit, miss or bypass (and Age
// on a hit).
//
// The lookup is dispatched (sdk.Dispatch): no plugin instance is held
// while the host waits on Redis, or, with "coalesce", on an identical
// request already in flight on this replica. A miss needs no second
// callback (sdk.ExpectResponse).
//
// Place it after ratelimit and budget: a hit still counts a request
// against the rate limits, and a tenant out of budget is refused before
// the cache is asked. A hit costs "hit_cost" of the stored reply's price
// (default 0: nothing), in tokens and in money.
//
// Config (all optional):
//
//	{
//	  "ttl": "1h",              // how long a stored reply is served (1ms to 24h)
//	  "scope": "tenant",        // or "shared:NAME": tenants whose cache plugin names NAME share entries
//	  "when": "deterministic",  // or "always", "header"
//	  "coalesce": false,        // identical requests in flight on a replica: one goes upstream, the others wait for its reply
//	  "hit_cost": 0             // share of the stored reply's price a hit is charged, 0 to 1
//	}
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate/tollgate/sdk"
	"github.com/tollgate/tollgate/sdk/jsonscan"
)

func main() {}

func init() {
	sdk.OnConfigure(configure)
	sdk.OnRequest(onRequest)
	sdk.OnCallResponse(onCallResponse)
}

type config struct {
	TTL      string  `json:"ttl"`
	Scope    string  `json:"scope"`
	When     string  `json:"when"`
	Coalesce bool    `json:"coalesce"`
	HitCost  float64 `json:"hit_cost"`
}

var (
	cfg config
	// lookup is the cache.lookup request but for its flags: "TTL_MS SCOPE ".
	lookupHead []byte
	hitPPM     int64
	req        []byte
)

func configure(b []byte) error {
	c := config{TTL: "1h", Scope: "tenant", When: "deterministic"}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return errors.New("cache config: " + err.Error())
	}
	ttl, err := time.ParseDuration(c.TTL)
	if err != nil || ttl < time.Millisecond || ttl > 24*time.Hour {
		return errors.New(`cache config: ttl must be a duration from 1ms to 24h, got "` + c.TTL + `"`)
	}
	if c.Scope != "tenant" {
		name, ok := strings.CutPrefix(c.Scope, "shared:")
		if !ok || !validName(name) {
			return errors.New(`cache config: scope must be "tenant" or "shared:NAME" (NAME: 1 to 64 of a-z A-Z 0-9 _ - .), got "` + c.Scope + `"`)
		}
	}
	switch c.When {
	case "deterministic", "always", "header":
	default:
		return errors.New(`cache config: when must be "deterministic", "always" or "header", got "` + c.When + `"`)
	}
	if !(c.HitCost >= 0 && c.HitCost <= 1) {
		return errors.New("cache config: hit_cost must be between 0 and 1")
	}
	cfg = c
	lookupHead = strconv.AppendInt(nil, ttl.Milliseconds(), 10)
	lookupHead = append(append(append(lookupHead, ' '), c.Scope...), ' ')
	hitPPM = int64(c.HitCost*1e6 + 0.5)
	return nil
}

func validName(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for _, ch := range []byte(s) {
		if !(ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '_' || ch == '-' || ch == '.') {
			return false
		}
	}
	return true
}

var hdr []byte

func onRequest(r *sdk.Request) sdk.Verdict {
	noStore, noCache := false, false
	if v, ok := r.AppendHeader(hdr[:0], "Cache-Control"); ok {
		hdr = v
		noStore, noCache = directive(v, "no-store"), directive(v, "no-cache")
	}
	optIn := false
	if v, ok := r.AppendHeader(hdr[:0], "X-Tollgate-Cache"); ok {
		hdr = v
		optIn = bytes.EqualFold(bytes.TrimSpace(v), []byte("use"))
	}
	switch {
	case noStore:
		return skip("no-store")
	case optIn, cfg.When == "always":
	case cfg.When == "header":
		return skip("not-asked")
	case !deterministic(r):
		return skip("nondeterministic")
	}
	req = append(req[:0], lookupHead...)
	flags := req[len(req):]
	if cfg.Coalesce {
		flags = append(flags, "coalesce"...)
	}
	if noCache {
		if len(flags) > 0 {
			flags = append(flags, ',')
		}
		flags = append(flags, "refresh"...)
	}
	if len(flags) == 0 {
		flags = append(flags, '-')
	}
	req = append(req[:len(req)], flags...)
	req = append(req, ' ')
	req = strconv.AppendInt(req, hitPPM, 10)
	id, err := sdk.Dispatch("cache.lookup", req)
	if err == nil {
		err = sdk.ExpectResponse(id, "miss", "bypass")
	}
	if err != nil {
		sdk.Log(sdk.LevelWarn, "cache: lookup not made: "+err.Error())
		return sdk.Continue // the cache is an optimisation: the request goes upstream
	}
	return sdk.Pause
}

// onCallResponse answers a hit with the stored reply the host set; any
// other answer (a failed lookup included) lets the request go upstream.
func onCallResponse(c *sdk.CallResponse) sdk.Verdict {
	if c.Err() == nil && bytes.HasPrefix(c.Body(), []byte("hit")) {
		return sdk.Respond
	}
	return sdk.Continue
}

// skipBuf holds cache.skip's answer, reused: a request allocates nothing
// that outlives it.
var skipBuf []byte

func skip(reason string) sdk.Verdict {
	skipBuf, _ = sdk.AppendCall(skipBuf[:0], "cache.skip", []byte(reason))
	return sdk.Continue
}

// directive reports whether a Cache-Control value holds the directive d.
func directive(v []byte, d string) bool {
	for len(v) > 0 {
		part := v
		if i := bytes.IndexByte(v, ','); i >= 0 {
			part, v = v[:i], v[i+1:]
		} else {
			v = nil
		}
		part = bytes.TrimSpace(part)
		if i := bytes.IndexByte(part, '='); i >= 0 {
			part = part[:i]
		}
		if strings.EqualFold(string(part), d) {
			return true
		}
	}
	return false
}

var scan jsonscan.Scanner

// isZero reports whether the JSON number n is zero: no digit of its
// significand other than 0 (0, -0, 0.0, 0e5).
func isZero(n []byte) bool {
	for _, c := range n {
		switch {
		case c == 'e' || c == 'E':
			return true
		case c >= '1' && c <= '9':
			return false
		}
	}
	return true
}

// deterministic reports whether the request asks for a reply that does
// not vary: an embedding, or a temperature of 0.
func deterministic(r *sdk.Request) bool {
	if r.Endpoint() == "embeddings" {
		return true
	}
	scan.Reset(r.Body())
	zero := false
	err := scan.Object(func(key []byte) error {
		if string(key) != "temperature" {
			return scan.Skip()
		}
		n, err := scan.Number()
		if err != nil {
			return err
		}
		zero = isZero(n)
		return nil
	})
	return err == nil && zero
}
