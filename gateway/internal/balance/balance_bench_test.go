package balance

import (
	"testing"
	"time"
)

// The cost an attempt adds to the request path: pick, outcome, release.

func BenchmarkPickSingle(b *testing.B) {
	benchPick(b, NewSet([]*Upstream{NewUpstream("a", Config{})}, []int{1}))
}

func BenchmarkPickSingleBreakerLimit(b *testing.B) {
	benchPick(b, NewSet([]*Upstream{NewUpstream("a", Config{MaxConcurrent: 1 << 20, BreakerFailures: 5, BreakerOpenFor: time.Second})}, []int{1}))
}

func BenchmarkPickWeighted3(b *testing.B) {
	c := Config{MaxConcurrent: 1 << 20, BreakerFailures: 5, BreakerOpenFor: time.Second}
	benchPick(b, NewSet([]*Upstream{NewUpstream("a", c), NewUpstream("b", c), NewUpstream("c", c)}, []int{3, 2, 1}))
}

func benchPick(b *testing.B, s *Set) {
	b.ReportAllocs()
	b.Run("serial", func(b *testing.B) {
		for b.Loop() {
			tk, _ := s.Pick(0, -1)
			tk.Done(Success, false)
			tk.Release()
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				tk, _ := s.Pick(0, -1)
				tk.Done(Success, false)
				tk.Release()
			}
		})
	})
}
