package tenant_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/tollgate/tollgate/gateway/internal/tenant"
)

func benchCache(b *testing.B) *tenant.Cache {
	st := newFakeStore()
	st.putKey(snapshot("tg_bench", "acme", "basic", "v1"))
	st.putPrice(&tenant.Price{Model: "gpt-bench"})
	c, err := tenant.NewCache(st, tenant.CacheOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Close)
	return c
}

// BenchmarkCacheKeyHit is the request path's key lookup with a warm cache.
func BenchmarkCacheKeyHit(b *testing.B) {
	c := benchCache(b)
	ctx := context.Background()
	h := tenant.HashKey("tg_bench")
	if _, err := c.Key(ctx, h); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Key(ctx, h); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCacheKeyHitParallel is BenchmarkCacheKeyHit from every P at once.
func BenchmarkCacheKeyHitParallel(b *testing.B) {
	c := benchCache(b)
	ctx := context.Background()
	h := tenant.HashKey("tg_bench")
	if _, err := c.Key(ctx, h); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.Key(ctx, h); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkCachePriceHit is the price lookup with a warm cache.
func BenchmarkCachePriceHit(b *testing.B) {
	c := benchCache(b)
	ctx := context.Background()
	if _, err := c.Price(ctx, "gpt-bench"); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Price(ctx, "gpt-bench"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCacheKeyHitParallelSpread looks up 1024 warm keys from every P:
// unlike one hot key, lookups land on different ristretto shards.
func BenchmarkCacheKeyHitParallelSpread(b *testing.B) {
	st := newFakeStore()
	hashes := make([]tenant.KeyHash, 1024)
	for i := range hashes {
		key := fmt.Sprintf("tg_bench_%d", i)
		st.putKey(snapshot(key, "acme", "basic", "v1"))
		hashes[i] = tenant.HashKey(key)
	}
	c, err := tenant.NewCache(st, tenant.CacheOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Close)
	ctx := context.Background()
	for _, h := range hashes {
		if _, err := c.Key(ctx, h); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	var next atomic.Uint32
	b.RunParallel(func(pb *testing.PB) {
		i := next.Add(97)
		for pb.Next() {
			i++
			if _, err := c.Key(ctx, hashes[i%uint32(len(hashes))]); err != nil {
				b.Error(err)
				return
			}
		}
	})
	if s := c.Stats(); s.Misses != uint64(len(hashes)) {
		b.Errorf("misses = %d, want only the %d warm-up loads", s.Misses, len(hashes))
	}
}
