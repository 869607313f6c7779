package hostsvc

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/budget"
	"github.com/tollgate/tollgate/gateway/internal/limiter"
	"github.com/tollgate/tollgate/sdk/wasmhost"
)

// The session serves what its set registered, by name, and nothing when
// it is not bound; a registered service sees the session it was called
// through.
func TestSessionCall(t *testing.T) {
	set := fuzzServices()
	var seen *Session
	set.Register("test.echo", ServiceFunc(func(c *Session, _ *wasmhost.Request, req []byte) ([]byte, error) {
		seen = c
		return append([]byte("echo "), req...), nil
	}))
	tests := []struct {
		name    string
		bind    bool
		service string
		want    string
		wantErr error
	}{
		{"registered", true, "test.echo", "echo hi", nil},
		{"built in", true, "tenant.resolve", "invalid", nil},
		{"unknown", true, "test.nope", "", wasmhost.ErrNoService},
		{"unbound", false, "test.echo", "", wasmhost.ErrNoService},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c Session
			if tt.bind {
				c.Bind(set)
			}
			r := wasmhost.AcquireRequest()
			defer wasmhost.ReleaseRequest(r)
			seen = nil
			out, err := c.Call(r, tt.service, []byte("hi"))
			if !errors.Is(err, tt.wantErr) || string(out) != tt.want {
				t.Fatalf("Call(%q) = %q, %v; want %q, %v", tt.service, out, err, tt.want, tt.wantErr)
			}
			if tt.service == "test.echo" && tt.wantErr == nil && seen != &c {
				t.Errorf("the service saw session %p, want %p", seen, &c)
			}
		})
	}
}

// holdCounter records the request ids the budget counter is given.
type holdCounter struct {
	*budget.Memory
	ids []string
}

func (h *holdCounter) Reserve(ctx context.Context, tenant, id string, scopes []budget.Scope, amount int64, lease time.Duration) (budget.Reservation, error) {
	h.ids = append(h.ids, "reserve:"+id)
	return h.Memory.Reserve(ctx, tenant, id, scopes, amount, lease)
}

func (h *holdCounter) Extend(ctx context.Context, tenant, id string, scopes []budget.Scope, more int64, lease time.Duration) (budget.Reservation, error) {
	h.ids = append(h.ids, "extend:"+id)
	return h.Memory.Extend(ctx, tenant, id, scopes, more, lease)
}

func (h *holdCounter) Settle(ctx context.Context, tenant, id string, scopes []budget.Scope, actual int64) ([]budget.Crossing, error) {
	h.ids = append(h.ids, "settle:"+id)
	return h.Memory.Settle(ctx, tenant, id, scopes, actual)
}

// A request's hold is known by one id the gateway made for it (never the
// client's request id) from reserve through extend to settle; the next
// request on the same session, once reset, gets a new one. Settle prices
// the real usage into the request.
func TestSessionHoldAndSettle(t *testing.T) {
	counter := &holdCounter{Memory: budget.NewMemory(nil, nil)}
	n := 0
	set := NewSet(Config{
		Log:     slog.New(slog.NewTextHandler(io.Discard, nil)),
		Prices:  fuzzPrices{},
		Limiter: limiter.NewMemory(nil), Budget: counter,
		NewID: func(dst []byte) []byte { n++; return strconv.AppendInt(append(dst, "hold-"...), int64(n), 10) },
	})
	var c Session
	for round, want := range [][]string{
		{"reserve:hold-1", "extend:hold-1", "settle:hold-1"},
		{"reserve:hold-2", "extend:hold-2", "settle:hold-2"},
	} {
		counter.ids = nil
		c.Bind(set)
		r := wasmhost.AcquireRequest()
		r.Model, r.RequestID = []byte("mock-1"), []byte("client-chosen")
		r.Tenant = &wasmhost.Tenant{ID: "acme", BudgetMicros: 1_000_000}
		if out, err := c.Call(r, "budget.reserve", []byte("10 100 60000")); err != nil || string(out[:3]) != "ok " {
			t.Fatalf("round %d: reserve = %q, %v", round, out, err)
		}
		if out, err := c.Call(r, "budget.extend", []byte("50 60000")); err != nil || string(out[:3]) != "ok " {
			t.Fatalf("round %d: extend = %q, %v", round, out, err)
		}
		if !c.NeedsUsage() {
			t.Fatalf("round %d: an open hold needs the usage", round)
		}
		c.Settle(r, 1000, 2000)
		// 1000 prompt tokens at 1 USD/Mtok, 2000 completion at 10 USD/Mtok.
		if !r.CostSettled || r.CostMicros != 1_000+20_000 {
			t.Errorf("round %d: cost %d (settled %v), want 21000", round, r.CostMicros, r.CostSettled)
		}
		if c.NeedsUsage() {
			t.Errorf("round %d: still needs the usage after Settle", round)
		}
		if len(counter.ids) != len(want) {
			t.Fatalf("round %d: ids %q, want %q", round, counter.ids, want)
		}
		for i := range want {
			if counter.ids[i] != want[i] {
				t.Fatalf("round %d: ids %q, want %q", round, counter.ids, want)
			}
		}
		wasmhost.ReleaseRequest(r)
		c.Reset()
	}
}
