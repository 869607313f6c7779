// Command preflight is Tollgate's first policy: it turns the request's API
// key into a tenant (through the host's tenant service, which keeps keys
// only as SHA-256 hashes and answers from its cache), then checks what the
// tenant's plan allows: the model, max_tokens, and the size of the request.
//
// Config (all optional):
//
//	{
//	  "max_messages": 0,       // more messages than this → 400 (0: no limit)
//	  "max_body_bytes": 0,     // a larger body → 413 (0: the server's limit only)
//	  "require_max_tokens": false  // reject requests without max_tokens when the key has a cap
//	}
//
// Errors are OpenAI's: a missing key and a wrong one are 401 (an unknown,
// revoked or expired key all read "Incorrect API key provided"), a
// suspended tenant and a model outside the plan are 403, a max_tokens over
// the cap is 400. The key itself is never logged.
package main

import (
	"encoding/json"
	"errors"
	"path"
	"strconv"
	"strings"

	"github.com/tollgate/tollgate/sdk"
)

func main() {}

func init() {
	sdk.OnConfigure(configure)
	sdk.OnRequest(onRequest)
}

type config struct {
	MaxMessages      int   `json:"max_messages"`
	MaxBodyBytes     int64 `json:"max_body_bytes"`
	RequireMaxTokens bool  `json:"require_max_tokens"`
}

var cfg config

func configure(b []byte) error {
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil {
		return errors.New("preflight config: " + err.Error())
	}
	if cfg.MaxMessages < 0 || cfg.MaxBodyBytes < 0 {
		return errors.New("preflight config: max_messages and max_body_bytes must not be negative")
	}
	return nil
}

func onRequest(r *sdk.Request) sdk.Verdict {
	key, ok := apiKey(r)
	if !ok {
		return r.Reject(401, "invalid_request_error", "missing_api_key",
			"You didn't provide an API key. Send it as 'Authorization: Bearer YOUR_KEY'.")
	}
	res, err := sdk.Call("tenant.resolve", []byte(key))
	if err != nil {
		sdk.Log(sdk.LevelError, "preflight: tenant service unavailable: "+err.Error())
		return r.Reject(503, "server_error", "tenant_service_unavailable",
			"The gateway cannot check API keys right now; retry shortly.")
	}
	status, allowed, _ := strings.Cut(string(res), "\n")
	switch status {
	case "ok":
	case "suspended":
		return r.Reject(403, "permission_error", "account_suspended", "This account is suspended.")
	default: // unknown, revoked and expired keys read the same
		return r.Reject(401, "invalid_request_error", "invalid_api_key", "Incorrect API key provided.")
	}
	model := r.Model()
	if !modelAllowed(model, allowed) {
		return r.Reject(403, "permission_error", "model_not_allowed",
			"Your API key may not use the model `"+model+"`.")
	}
	if cap := r.TenantMaxTokens(); cap > 0 {
		switch max, has := r.MaxTokens(); {
		case has && max > cap:
			return r.Reject(400, "invalid_request_error", "max_tokens_too_large",
				"max_tokens is "+strconv.FormatInt(max, 10)+", above this key's limit of "+strconv.FormatInt(cap, 10)+".")
		case !has && cfg.RequireMaxTokens:
			return r.Reject(400, "invalid_request_error", "max_tokens_required",
				"This key requires max_tokens (at most "+strconv.FormatInt(cap, 10)+").")
		}
	}
	if cfg.MaxBodyBytes > 0 && r.BodyBytes() > cfg.MaxBodyBytes {
		return r.Reject(413, "invalid_request_error", "request_too_large",
			"The request body is larger than this gateway accepts ("+strconv.FormatInt(cfg.MaxBodyBytes, 10)+" bytes).")
	}
	if cfg.MaxMessages > 0 && r.Messages() > cfg.MaxMessages {
		return r.Reject(400, "invalid_request_error", "too_many_messages",
			"The request has "+strconv.Itoa(r.Messages())+" messages; at most "+strconv.Itoa(cfg.MaxMessages)+" are accepted.")
	}
	return sdk.Continue
}

// apiKey reads "Authorization: Bearer KEY" or "X-Api-Key: KEY".
func apiKey(r *sdk.Request) (string, bool) {
	if v, ok := r.Header("Authorization"); ok {
		if len(v) > 7 && strings.EqualFold(v[:7], "bearer ") {
			k := strings.TrimSpace(v[7:])
			return k, k != ""
		}
		return "", false
	}
	if v, ok := r.Header("X-Api-Key"); ok && strings.TrimSpace(v) != "" {
		return strings.TrimSpace(v), true
	}
	return "", false
}

// modelAllowed matches model against the tenant service's allowed
// patterns, one per line (none: every model).
func modelAllowed(model, allowed string) bool {
	if allowed == "" {
		return true
	}
	for allowed != "" {
		var p string
		p, allowed, _ = strings.Cut(allowed, "\n")
		if p == model {
			return true
		}
		if ok, _ := path.Match(p, model); ok {
			return true
		}
	}
	return false
}
