package meterstore_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/budget"
	"github.com/tollgate/tollgate/gateway/internal/limiter"
	"github.com/tollgate/tollgate/gateway/internal/meterstore"
	"github.com/tollgate/tollgate/gateway/internal/testkit/redistest"
)

// TestFunctionsLost has Redis lose the pairs' functions — FUNCTION FLUSH,
// then a restart, which also loses every counter — between requests, and
// wants the next request served as if nothing had happened: its admission
// and hold answered, its correction and settle applied, counted from the
// counters Redis still has (after the restart: from the seed), with the
// commands the reload took (FCALL, FUNCTION LOAD, FCALL) and no more.
func TestFunctionsLost(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	seed := func(context.Context, string, budget.Scope) (int64, error) { return 100, nil }
	c := newClient(t, srv)
	b := budget.NewRedis(c, seed, budget.RedisOptions{})
	m := meterstore.New(limiter.NewRedis(c, limiter.RedisOptions{}), b)
	if !m.OneTrip() {
		t.Fatal("not one trip")
	}
	ctx := context.Background()
	limits := []limiter.Limit{{Key: "t", RPM: 100, TPM: 10_000}}
	scopes := []budget.Scope{tenantScope(10_000)}
	n := 0
	request := func(step string, wantSpent, wantCommands int64) {
		t.Helper()
		n++
		id := "r" + strconv.Itoa(n)
		before := c.Commands()
		a := m.AdmitReserve(ctx, &limiter.Request{Tenant: "acme", Limits: limits, Tokens: 50},
			&meterstore.Hold{Tenant: "acme", RequestID: id, Scopes: scopes, Amount: 1_000, Lease: time.Minute})
		if a.AdmitErr != nil || !a.Decision.Allowed || a.ReserveErr != nil || !a.Reservation.Admitted {
			t.Fatalf("%s: admit and reserve: %+v", step, a)
		}
		out := m.AdjustSettle(ctx, &meterstore.Correction{Tenant: "acme", Limits: limits, Delta: -10},
			&meterstore.Settlement{Tenant: "acme", RequestID: id, Scopes: scopes, Actual: 300})
		if out.AdjustErr != nil || out.SettleErr != nil {
			t.Fatalf("%s: adjust and settle: %+v", step, out)
		}
		if d := c.Commands() - before; wantCommands >= 0 && d != wantCommands {
			t.Errorf("%s: %d Redis commands, want %d", step, d, wantCommands)
		}
		spent, reserved, err := b.Status(ctx, "acme", scopes[0])
		if err != nil || spent != wantSpent || reserved != 0 {
			t.Fatalf("%s: spent %d, reserved %d, %v; want %d and 0", step, spent, reserved, err, wantSpent)
		}
	}
	// Cold (-1: not counted): the library is loaded and the scope seeded.
	request("first", 400, -1)
	request("warm", 700, 2)

	if _, err := srv.Do("FUNCTION", "FLUSH"); err != nil {
		t.Fatal(err)
	}
	request("after FUNCTION FLUSH", 1_000, 2+2)

	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	redistest.WaitReconnected(t, c, "x")
	request("after a restart", 400, -1) // spent from the seed again
	request("warm after the restart", 700, 2)
}
