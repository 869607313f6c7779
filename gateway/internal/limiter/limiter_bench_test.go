package limiter

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/testkit/redistest"
)

// benchRequest is a typical admission: tenant, key and model limits.
func benchRequest() *Request {
	return &Request{
		Tenant: "acme",
		Limits: []Limit{
			{Key: "t", RPM: MaxRPM, TPM: 1 << 40},
			{Key: "k:key-1", RPM: MaxRPM, TPM: 1 << 40},
			{Key: "m:key-1:gpt-4o", RPM: MaxRPM},
		},
		Tokens: 100,
	}
}

// BenchmarkMemoryAdmit is one in-process admission of five cells.
func BenchmarkMemoryAdmit(b *testing.B) {
	m := NewMemory(nil)
	r := benchRequest()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.Admit(ctx, r); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMemoryAdmitParallel is the same from GOMAXPROCS goroutines on
// one tenant: the mutex under contention.
func BenchmarkMemoryAdmitParallel(b *testing.B) {
	m := NewMemory(nil)
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		r := benchRequest()
		for pb.Next() {
			if _, err := m.Admit(ctx, r); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkRedisAdmit is one admission of five cells against a local
// redis-server, one at a time: a round trip per op.
func BenchmarkRedisAdmit(b *testing.B) {
	l := NewRedis(newRedisClient(b, redistest.Start(b), 0), RedisOptions{})
	r := benchRequest()
	ctx := context.Background()
	admitOK(b, l, r)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := l.Admit(ctx, r); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRedisAdmitParallel is the same from 8×GOMAXPROCS goroutines:
// the throughput one client gets from one Redis, commands pipelined.
func BenchmarkRedisAdmitParallel(b *testing.B) {
	l := NewRedis(newRedisClient(b, redistest.Start(b), 0), RedisOptions{})
	ctx := context.Background()
	admitOK(b, l, benchRequest())
	b.ReportAllocs()
	b.SetParallelism(8)
	b.RunParallel(func(pb *testing.PB) {
		r := benchRequest()
		for pb.Next() {
			if _, err := l.Admit(ctx, r); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkMemorySweep is one sweep over 100k idle limits, which Memory
// runs under its mutex once a minute.
func BenchmarkMemorySweep(b *testing.B) {
	clk := newTestClock()
	m := NewMemory(clk.Now)
	keys := make([]Limit, 100_000)
	for i := range keys {
		keys[i] = Limit{Key: "k:" + strconv.Itoa(i), RPM: 60}
	}
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		for i := range keys {
			m.admit(&plan{}, "acme", keys[i:i+1], 0, 1)
		}
		clk.Advance(2 * time.Minute)
		b.StartTimer()
		m.mu.Lock()
		m.sweep(m.clock())
		m.mu.Unlock()
	}
	if m.Len() != 0 {
		b.Fatalf("%d limits left after a sweep", m.Len())
	}
}
