package limiter

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode"
	"unicode/utf8"
)

// Request limits.
const (
	// MaxLimits is the most limits one Request may name.
	MaxLimits = 16
	// MaxKeyLen is the longest Limit.Key in bytes.
	MaxKeyLen = 200
	// MaxRPM is the highest RPM: one request per microsecond.
	MaxRPM = 60_000_000
)

// Limit is one limit a request is charged against.
type Limit struct {
	// Key identifies the limit within the tenant (e.g. "t", "k:key-1",
	// "m:key-1:gpt-4o"): non-empty, at most MaxKeyLen bytes, no whitespace
	// or control characters, unique within a Request.
	Key string
	// RPM is requests per minute, at most MaxRPM; <= 0: requests are not
	// limited by this limit.
	RPM int64
	// TPM is tokens per minute; <= 0: tokens are not limited by this limit.
	TPM int64
}

// FailMode says what to do when Redis cannot be reached.
type FailMode uint8

const (
	// FailClosed: Admit and Adjust return an error wrapping ErrUnavailable.
	FailClosed FailMode = iota
	// FailOpen: decide with the in-process fallback limiter, each limit
	// divided by the live replica count (RedisOptions.Fleet) or Replicas,
	// whichever is larger.
	FailOpen
)

func (m FailMode) String() string {
	switch m {
	case FailClosed:
		return "closed"
	case FailOpen:
		return "open"
	}
	return fmt.Sprintf("FailMode(%d)", uint8(m))
}

// Request is one admission.
type Request struct {
	// Tenant is the tenant id; non-empty.
	Tenant string
	// Limits are the 1..MaxLimits limits the request is charged against,
	// atomically: all admit or none is charged. A limit with neither RPM
	// nor TPM is accepted and charged nothing.
	Limits []Limit
	// Tokens is the estimate charged to every limit with TPM > 0, >= 0.
	Tokens int64
	// OnError is what to do when Redis cannot be reached (Redis only).
	OnError FailMode
	// Replicas is the least number FailOpen divides the limits by (a
	// floor under the live replica count of RedisOptions.Fleet): >= 0;
	// 0 or 1 means the live count alone (1 without one).
	Replicas int
}

// Decision is the outcome of an admission.
type Decision struct {
	Allowed bool
	// LimitRequests, RemainingRequests and ResetRequests describe the most
	// restrictive request limit (least remaining; of equals, the one that
	// takes longest to reset) among Limits with RPM > 0; zeros when none.
	// ResetRequests is the time until its budget is fully replenished.
	// Under a fallback decision LimitRequests is the divided limit.
	LimitRequests, RemainingRequests int64
	ResetRequests                    time.Duration
	// LimitTokens, RemainingTokens and ResetTokens are the same for tokens,
	// among Limits with TPM > 0.
	LimitTokens, RemainingTokens int64
	ResetTokens                  time.Duration
	// RetryAfter, when !Allowed, is how long until this request would be
	// admitted if nothing else is charged meanwhile (> 0). A token estimate
	// above a limit's TPM is never admitted; RetryAfter is then a minute.
	RetryAfter time.Duration
	// Fallback says the in-process fallback decided because Redis failed
	// (FailOpen).
	Fallback bool
}

var (
	// ErrUnavailable is wrapped by the errors of FailClosed calls made while
	// Redis could not be reached or did not answer in time.
	ErrUnavailable = errors.New("rate limiter: redis unavailable")
	// ErrInvalid is wrapped by the errors for a bad Request or Adjust
	// arguments (empty tenant, bad or duplicate key, too many limits, ...).
	ErrInvalid = errors.New("rate limiter: invalid request")
)

// Limiter admits requests against their limits.
type Limiter interface {
	// Admit charges one request and r.Tokens tokens to r.Limits if all of
	// them admit it. The error is nil, wraps ErrInvalid, or (Redis only)
	// wraps ErrUnavailable or reports a Redis reply error.
	Admit(ctx context.Context, r *Request) (Decision, error)
	// Adjust corrects the tokens charged to the limits' TPM at admission by
	// delta (negative gives tokens back, positive leaves debt). Requests are
	// not touched. mode and replicas are as in Request.
	Adjust(ctx context.Context, tenant string, limits []Limit, delta int64, mode FailMode, replicas int) error
}

var (
	_ Limiter = (*Memory)(nil)
	_ Limiter = (*Redis)(nil)
)

// validate checks a Request; it does not allocate unless r is invalid.
func validate(r *Request) error {
	if r == nil {
		return fmt.Errorf("%w: nil request", ErrInvalid)
	}
	if r.Tokens < 0 {
		return fmt.Errorf("%w: negative tokens %d", ErrInvalid, r.Tokens)
	}
	if err := validateMode(r.OnError, r.Replicas); err != nil {
		return err
	}
	return validateLimits(r.Tenant, r.Limits)
}

func validateMode(mode FailMode, replicas int) error {
	if mode > FailOpen {
		return fmt.Errorf("%w: unknown fail mode %d", ErrInvalid, uint8(mode))
	}
	if replicas < 0 {
		return fmt.Errorf("%w: negative replicas %d", ErrInvalid, replicas)
	}
	return nil
}

func validateLimits(tenant string, limits []Limit) error {
	if tenant == "" {
		return fmt.Errorf("%w: empty tenant", ErrInvalid)
	}
	if len(limits) == 0 || len(limits) > MaxLimits {
		return fmt.Errorf("%w: %d limits (want 1 to %d)", ErrInvalid, len(limits), MaxLimits)
	}
	for i := range limits {
		l := &limits[i]
		if why := checkKey(l.Key); why != "" {
			return fmt.Errorf("%w: limit key %q: %s", ErrInvalid, l.Key, why)
		}
		if l.RPM > MaxRPM {
			return fmt.Errorf("%w: limit %q: RPM %d above %d", ErrInvalid, l.Key, l.RPM, MaxRPM)
		}
		for j := range i {
			if limits[j].Key == l.Key {
				return fmt.Errorf("%w: limit key %q named twice", ErrInvalid, l.Key)
			}
		}
	}
	return nil
}

// checkKey returns why key is not a valid Limit.Key, or "".
func checkKey(key string) string {
	if key == "" {
		return "empty"
	}
	if len(key) > MaxKeyLen {
		return "too long"
	}
	for i := 0; i < len(key); {
		b := key[i]
		if b < utf8.RuneSelf {
			if b <= ' ' || b == 0x7f {
				return "whitespace or control character"
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(key[i:])
		if r == utf8.RuneError && n == 1 {
			return "not UTF-8"
		}
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			return "whitespace or control character"
		}
		i += n
	}
	return ""
}
