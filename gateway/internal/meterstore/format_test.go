package meterstore_test

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/budget"
	"github.com/tollgate/tollgate/gateway/internal/limiter"
	"github.com/tollgate/tollgate/gateway/internal/meterstore"
	"github.com/tollgate/tollgate/gateway/internal/testkit/redistest"
)

// TestStoredNumbers reads back the bytes the functions write — rate-limit
// TATs, hold amounts and sums, lease ends — and wants every one a plain
// integer with all its digits (a µs clock has 16): the functions format
// numbers with %d, and a float format (1.7e+15) or Lua's 14-digit
// tostring would round them.
func TestStoredNumbers(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := newClient(t, srv)
	m := meterstore.New(limiter.NewRedis(c, limiter.RedisOptions{Prefix: "rl:"}),
		budget.NewRedis(c, nil, budget.RedisOptions{Prefix: "b:"}))
	ctx := context.Background()
	limits := []limiter.Limit{{Key: "t", RPM: 60, TPM: 1_000_000}}
	scopes := []budget.Scope{tenantScope(1 << 50)}
	const amount = 123_456_789_012 // 12 digits: no float format prints it whole
	before := time.Now().UnixMicro()
	a := m.AdmitReserve(ctx, &limiter.Request{Tenant: "acme", Limits: limits, Tokens: 7},
		&meterstore.Hold{Tenant: "acme", RequestID: "r1", Scopes: scopes, Amount: amount, Lease: time.Hour})
	if a.AdmitErr != nil || a.ReserveErr != nil || !a.Reservation.Admitted {
		t.Fatalf("%+v", a)
	}
	digits := regexp.MustCompile(`^[0-9]+$`)
	get := func(args ...string) string {
		t.Helper()
		v, err := srv.Do(args...)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return strings.TrimSpace(v)
	}
	// A TAT, a lease end: µs of the server clock, from about now on.
	clock := func(name, v string, min, max int64) {
		t.Helper()
		n, err := strconv.ParseInt(v, 10, 64)
		if !digits.MatchString(v) || err != nil || len(v) != 16 || n < min || n > max {
			t.Errorf("%s = %q, want 16 digits in [%d, %d]", name, v, min, max)
		}
	}
	after := time.Now().UnixMicro() + 5*time.Second.Microseconds() // clock skew between Redis and us
	tests := []struct {
		name string
		key  []string
		want func(name, v string)
	}{
		{"request cell TAT", []string{"GET", "rl:{acme}:t:r"}, func(n, v string) {
			clock(n, v, before, after+time.Second.Microseconds())
		}},
		{"token cell TAT", []string{"GET", "rl:{acme}:t:t"}, func(n, v string) {
			clock(n, v, before, after+time.Second.Microseconds())
		}},
		{"lease end", []string{"ZSCORE", "b:{acme}:tenant::" + month + ":leases", "r1"}, func(n, v string) {
			clock(n, v, before+time.Hour.Microseconds()-5*time.Second.Microseconds(), after+time.Hour.Microseconds())
		}},
		{"hold", []string{"HGET", "b:{acme}:tenant::" + month + ":holds", "r1"}, func(n, v string) {
			if v != strconv.Itoa(amount) {
				t.Errorf("%s = %q, want %d", n, v, amount)
			}
		}},
		{"sum of holds", []string{"HGET", "b:{acme}:tenant::" + month + ":holds", ""}, func(n, v string) {
			if v != strconv.Itoa(amount) {
				t.Errorf("%s = %q, want %d", n, v, amount)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.want(tt.name, get(tt.key...)) })
	}
}
