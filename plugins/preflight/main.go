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
	"bytes"
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

// key and res are reused by every callback (an instance serves one at a
// time): the request path makes no allocation, and the API key is never
// copied into a string.
var key, res []byte

func onRequest(r *sdk.Request) sdk.Verdict {
	var ok bool
	if key, ok = apiKey(r, key[:0]); !ok {
		return r.Reject(401, "invalid_request_error", "missing_api_key",
			"You didn't provide an API key. Send it as 'Authorization: Bearer YOUR_KEY'.")
	}
	var err error
	res, err = sdk.AppendCall(res[:0], "tenant.resolve", key)
	clear(key)
	if err != nil {
		sdk.Log(sdk.LevelError, "preflight: tenant service unavailable: "+err.Error())
		return r.Reject(503, "server_error", "tenant_service_unavailable",
			"The gateway cannot check API keys right now; retry shortly.")
	}
	status, allowed, _ := bytes.Cut(res, []byte("\n"))
	switch string(status) {
	case "ok":
	case "suspended":
		return r.Reject(403, "permission_error", "account_suspended", "This account is suspended.")
	default: // unknown, revoked and expired keys read the same
		return r.Reject(401, "invalid_request_error", "invalid_api_key", "Incorrect API key provided.")
	}
	// A request without a model (the Files and Batch APIs) is not held
	// to the plan's models: the gateway admits those endpoints per plan
	// itself (policy passthrough.files).
	if model := r.Model(); model != "" && !modelAllowed(model, allowed) {
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
	if cfg.MaxMessages > 0 && r.MessageCount() > cfg.MaxMessages {
		return r.Reject(400, "invalid_request_error", "too_many_messages",
			"The request has "+strconv.Itoa(r.MessageCount())+" messages; at most "+strconv.Itoa(cfg.MaxMessages)+" are accepted.")
	}
	return sdk.Continue
}

// apiKey appends the key of "Authorization: Bearer KEY" or "X-Api-Key: KEY"
// to dst.
func apiKey(r *sdk.Request, dst []byte) ([]byte, bool) {
	if b, ok := r.AppendHeader(dst, "Authorization"); ok {
		v := b[len(dst):]
		if len(v) > 7 && bytes.EqualFold(v[:7], []byte("bearer ")) {
			n := copy(v, bytes.TrimSpace(v[7:])) // the key to the front of the value
			clear(v[n:])
			return b[:len(dst)+n], n > 0
		}
		clear(v)
		return dst, false
	}
	if b, ok := r.AppendHeader(dst, "X-Api-Key"); ok {
		v := b[len(dst):]
		n := copy(v, bytes.TrimSpace(v))
		clear(v[n:])
		return b[:len(dst)+n], n > 0
	}
	return dst, false
}

// modelAllowed matches model against the tenant service's allowed
// patterns, one per line (none: every model). Patterns are path.Match's;
// the common shapes, a plain name and "prefix*", are matched without it.
func modelAllowed(model string, allowed []byte) bool {
	if len(allowed) == 0 {
		return true
	}
	for len(allowed) > 0 {
		var p []byte
		p, allowed, _ = bytes.Cut(allowed, []byte("\n"))
		switch i := bytes.IndexAny(p, `*?[\`); {
		case i < 0:
			if string(p) == model {
				return true
			}
		case i == len(p)-1 && p[i] == '*':
			// "prefix*": * matches any run of characters but '/'.
			if len(model) >= i && string(p[:i]) == model[:i] && !strings.Contains(model[i:], "/") {
				return true
			}
		default:
			if ok, _ := path.Match(string(p), model); ok {
				return true
			}
		}
	}
	return false
}
