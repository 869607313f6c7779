package budget_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/budget"
	"github.com/tollgate/tollgate/gateway/internal/redisx"
	"github.com/tollgate/tollgate/gateway/internal/testkit/redistest"
)

// TestRedisKeyLayout pins the documented layout (operators and the
// reconcile job read these keys).
func TestRedisKeyLayout(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	c := monthly{budget.NewRedis(newClient(t, srv), nil, budget.RedisOptions{Prefix: "tg:b:", SettledTTL: time.Minute, KeyTTL: time.Hour})}
	if _, err := c.Reserve(ctx, "a:b", month, "r1", 300, 1000, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Reserve(ctx, "a:b", month, "r2", 200, 1000, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Settle(ctx, "a:b", month, "r2", 150); err != nil {
		t.Fatal(err)
	}
	tag := "tg:b:{a:b}:"
	base := tag + "tenant::2026-11:"
	now := float64(time.Now().UnixMicro())
	checks := []struct {
		cmd    []string
		want   func(string) bool
		expect string
	}{
		{[]string{"GET", base + "spent"}, eq("150"), "150"},
		{[]string{"HGET", base + "holds", "r1"}, eq("300"), "300"},
		{[]string{"HGET", base + "holds", ""}, eq("300"), "300 (the sum)"},
		{[]string{"HLEN", base + "holds"}, eq("2"), "2"},
		{[]string{"ZSCORE", base + "leases", "r1"}, within(now+50e6, now+70e6), "now + 1 min in µs"},
		{[]string{"ZCARD", base + "leases"}, eq("1"), "1"},
		{[]string{"PTTL", base + "spent"}, within(3590e3, 3600e3), "about 1h"},
		{[]string{"PTTL", base + "holds"}, within(3590e3, 3600e3), "about 1h"},
		{[]string{"PTTL", base + "leases"}, within(3590e3, 3600e3), "about 1h"},
		{[]string{"PTTL", tag + "settled:r2"}, within(50e3, 60e3), "about 1 min"},
		{[]string{"EXISTS", tag + "settled:r1"}, eq("0"), "0"},
	}
	for _, ch := range checks {
		got, err := srv.Do(ch.cmd...)
		if err != nil || !ch.want(got) {
			t.Errorf("%v = %q, %v; want %s", ch.cmd, got, err, ch.expect)
		}
	}
}

func eq(want string) func(string) bool { return func(s string) bool { return s == want } }

func within(lo, hi float64) func(string) bool {
	return func(s string) bool {
		f, err := strconv.ParseFloat(s, 64)
		return err == nil && f >= lo && f <= hi
	}
}

// TestRedisCluster runs the counter against a one-node Redis Cluster, where
// a script whose keys span slots is refused: tenant ids with braces must
// still keep a tenant-month in one slot.
func TestRedisCluster(t *testing.T) {
	srv := redistest.Start(t, "--cluster-enabled", "yes")
	if _, err := srv.Do("CLUSTER", "ADDSLOTSRANGE", "0", "16383"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, err := srv.Do("CLUSTER", "INFO")
		if err == nil && strings.Contains(info, "cluster_state:ok") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("cluster not ok: %q, %v", info, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	ctx := context.Background()
	c := monthly{budget.NewRedis(newClient(t, srv), nil, budget.RedisOptions{})}
	for i, tenant := range []string{"acme", "}x", "a}b{c", "{", "%7D", ""} {
		t.Run(fmt.Sprintf("%d %q", i, tenant), func(t *testing.T) {
			if res, err := c.Reserve(ctx, tenant, month, "r", 10, 100, time.Minute); err != nil || res != admitted(0, 10, 90) {
				t.Fatalf("Reserve = %+v, %v", res, err)
			}
			if res, err := c.Extend(ctx, tenant, month, "r", 10, 100, time.Minute); err != nil || res != admitted(0, 20, 80) {
				t.Fatalf("Extend = %+v, %v", res, err)
			}
			if spent, err := c.Settle(ctx, tenant, month, "r", 15); err != nil || spent != 15 {
				t.Fatalf("Settle = %d, %v", spent, err)
			}
			if err := c.Correct(ctx, tenant, month, 16); err != nil {
				t.Fatal(err)
			}
			if spent, reserved, err := c.Status(ctx, tenant, month); err != nil || spent != 16 || reserved != 0 {
				t.Fatalf("Status = %d, %d, %v", spent, reserved, err)
			}
			// Every scope of the tenant, whatever its id, is in the
			// tenant's slot: one script may hold them all.
			scopes := []budget.Scope{
				tenantMonth(month, 100),
				{Kind: budget.ScopeKey, ID: "}k{", Window: budget.Day, Period: "2026-11-03", Limit: 50},
				{Kind: budget.ScopeUser, ID: "{" + tenant + "}", Window: budget.Month, Period: month, Limit: 40},
			}
			if res, err := c.c.Reserve(ctx, tenant, "r3", scopes, 30, time.Minute); err != nil || !res.Admitted || res.Remaining != 10 {
				t.Fatalf("Reserve in three scopes = %+v, %v", res, err)
			}
			if res, err := c.c.Extend(ctx, tenant, "r3", scopes, 11, time.Minute); err != nil || res.Admitted || res.Refused.Kind != budget.ScopeUser {
				t.Fatalf("Extend in three scopes = %+v, %v; want refused by the user's", res, err)
			}
			if err := c.c.Shrink(ctx, tenant, "r3", scopes, 20); err != nil {
				t.Fatal(err)
			}
			if _, err := c.c.Settle(ctx, tenant, "r3", scopes, 20); err != nil {
				t.Fatal(err)
			}
			for j, want := range []int64{36, 20, 20} {
				if spent, reserved, err := c.c.Status(ctx, tenant, scopes[j]); err != nil || spent != want || reserved != 0 {
					t.Errorf("Status(%s) = %d, %d, %v; want %d, 0", scopes[j], spent, reserved, err, want)
				}
			}
		})
	}
}

func TestRedisPrefixWithBracePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("a prefix with a brace was accepted")
		}
	}()
	c, err := redisx.New(redisx.Options{Addrs: []string{"127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	budget.NewRedis(c, nil, budget.RedisOptions{Prefix: "tg:{x}:"})
}

// TestRedisHoldKeysNeverWithoutTTL: a reserve restarts the TTL of a
// scope's holds and leases keys only when it makes the scope's first hold
// (the sum of holds 0), not with every hold. The invariant that makes that
// sound: after every operation each of the two keys is either gone or has
// a TTL. The sequence is chosen to break it: holds of 0 (a sum of 0 with
// holds), leases that end (the leases set emptied and deleted by a later
// reserve's purge while the holds hash stays), settles of every hold (the
// set deleted by ZREM), shrinks and extends, on two scopes.
func TestRedisHoldKeysNeverWithoutTTL(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	c := budget.NewRedis(newClient(t, srv), newLedger(nil).seed, budget.RedisOptions{KeyTTL: time.Hour})
	scopes := []budget.Scope{tenantMonth(month, 1<<40), {Kind: budget.ScopeKey, ID: "k", Window: budget.Month, Period: month, Limit: 1 << 40}}
	keys := []string{
		"tollgate:budget:{acme}:tenant::" + month + ":holds", "tollgate:budget:{acme}:tenant::" + month + ":leases",
		"tollgate:budget:{acme}:key:k:" + month + ":holds", "tollgate:budget:{acme}:key:k:" + month + ":leases",
	}
	rng := rand.New(rand.NewPCG(7, 27))
	var gen [3]int // a settled id is refused: its slot takes a fresh one
	for i := range 1000 {
		slot := rng.IntN(len(gen))
		id := fmt.Sprintf("r%d.%d", slot, gen[slot])
		amount := int64(rng.IntN(3)) * 100 // a third of the holds are 0
		lease := time.Minute
		if rng.IntN(4) == 0 {
			lease = time.Millisecond // ends before a later reserve purges it
		}
		var op string
		var err error
		switch k := rng.IntN(20); {
		case k < 9:
			op = "reserve"
			_, err = c.Reserve(ctx, "acme", id, scopes, amount, lease)
		case k < 10:
			op = "extend"
			_, err = c.Extend(ctx, "acme", id, scopes, amount, lease)
		case k < 12:
			op = "shrink"
			err = c.Shrink(ctx, "acme", id, scopes, amount/2)
		default:
			op = "settle"
			_, err = c.Settle(ctx, "acme", id, scopes, amount)
			gen[slot]++
		}
		if err != nil && !errors.Is(err, budget.ErrSettled) {
			t.Fatalf("step %d: %s %s: %v", i, op, id, err)
		}
		if rng.IntN(3) == 0 {
			time.Sleep(2 * time.Millisecond)
		}
		for _, k := range keys {
			if got, err := srv.Do("PTTL", k); err != nil || got == "-1" {
				t.Fatalf("step %d (%s %s, amount %d): PTTL %s = %q, %v: a key left without a TTL", i, op, id, amount, k, got, err)
			}
		}
	}
}

// TestRedisReserveRenewsTTLOnFirstHold: with holds outstanding a reserve
// sends no PEXPIRE (but for the one reserve in 64 that renews anyway); the
// first hold after they are all settled renews both keys of each scope.
func TestRedisReserveRenewsTTLOnFirstHold(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	c := budget.NewRedis(newClient(t, srv), newLedger(nil).seed, budget.RedisOptions{})
	scopes := []budget.Scope{tenantMonth(month, 1<<40)}
	if _, err := c.Reserve(ctx, "acme", "first", scopes, 10, time.Minute); err != nil {
		t.Fatal(err)
	}
	resetStats(t, srv)
	const n = 200
	for i := range n {
		if _, err := c.Reserve(ctx, "acme", fmt.Sprintf("r%d", i), scopes, 10, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	if got := commandStats(t, srv)["pexpire"]; got > 2*n/8 {
		t.Errorf("%d reserves with holds outstanding sent %d PEXPIREs, want about 2 in 64 of them", n, got)
	}
	for i := range n {
		if _, err := c.Settle(ctx, "acme", fmt.Sprintf("r%d", i), scopes, 10); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Settle(ctx, "acme", "first", scopes, 10); err != nil {
		t.Fatal(err)
	}
	resetStats(t, srv)
	if _, err := c.Reserve(ctx, "acme", "again", scopes, 10, time.Minute); err != nil {
		t.Fatal(err)
	}
	if got := commandStats(t, srv)["pexpire"]; got != 2 {
		t.Errorf("the first hold after all were settled sent %d PEXPIREs, want 2", got)
	}
}
