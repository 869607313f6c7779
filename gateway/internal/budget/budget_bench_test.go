package budget_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/budget"
	"github.com/tollgate/tollgate/gateway/internal/testkit/redistest"
)

// benchReserveSettle is one request's budget traffic: Reserve, then
// Settle. Request ids are formatted in the loop (one allocation of the
// benchmark's own) because a settled id cannot be reserved again.
func benchReserveSettle(b *testing.B, c monthly) {
	ctx := context.Background()
	if _, err := c.Settle(ctx, "acme", month, "warm", 1); err != nil { // seed
		b.Fatal(err)
	}
	if _, err := c.Reserve(ctx, "acme", month, "warm2", 1, 1<<50, time.Minute); err != nil { // load scripts
		b.Fatal(err)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		id := strconv.Itoa(i)
		i++
		res, err := c.Reserve(ctx, "acme", month, id, 1_000_000, 1<<50, time.Minute)
		if err != nil || !res.Admitted {
			b.Fatalf("Reserve = %+v, %v", res, err)
		}
		if _, err := c.Settle(ctx, "acme", month, id, 700_000); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMemoryReserveSettle(b *testing.B) {
	benchReserveSettle(b, monthly{budget.NewMemory(nil, nil)})
}

func BenchmarkRedisReserveSettle(b *testing.B) {
	srv := redistest.Start(b)
	benchReserveSettle(b, monthly{budget.NewRedis(newClient(b, srv), nil, budget.RedisOptions{})})
}
