package budget

import (
	"math"
	"math/big"
	"testing"
	"time"
)

// thresholdOracle is ceil(limit × pct / 100) in big integers, saturated at
// math.MaxInt64.
func thresholdOracle(limit int64, pct int) int64 {
	v := new(big.Int).Mul(big.NewInt(limit), big.NewInt(int64(pct)))
	v.Add(v, big.NewInt(99))
	v.Quo(v, big.NewInt(100))
	if !v.IsInt64() {
		return math.MaxInt64
	}
	return v.Int64()
}

func TestThresholdMicros(t *testing.T) {
	tests := []struct {
		limit int64
		pct   int
		want  int64
	}{
		{10_000, 50, 5_000},
		{10_000, 100, 10_000},
		{10_001, 50, 5_001}, // 5000.5 rounds up: the threshold is reached at 5001
		{1, 80, 1},
		{0, 80, 0},
		{3, 33, 1},
		{100, 150, 150},
		{math.MaxInt64, 100, math.MaxInt64},
		{math.MaxInt64, 50, math.MaxInt64/2 + 1},
		{math.MaxInt64, 1000, math.MaxInt64},
		{1 << 53, 100, 1 << 53},
	}
	for _, tt := range tests {
		if got := thresholdMicros(tt.limit, tt.pct); got != tt.want {
			t.Errorf("thresholdMicros(%d, %d) = %d, want %d", tt.limit, tt.pct, got, tt.want)
		}
		if o := thresholdOracle(tt.limit, tt.pct); o != tt.want {
			t.Errorf("oracle(%d, %d) = %d, want %d (the table is wrong)", tt.limit, tt.pct, o, tt.want)
		}
	}
}

func FuzzThresholdMicros(f *testing.F) {
	f.Add(int64(10_000), 50)
	f.Add(int64(math.MaxInt64), 99)
	f.Add(int64(7), 1000)
	f.Fuzz(func(t *testing.T, limit int64, pct int) {
		if limit < 0 || pct <= 0 {
			return // checkScope rejects these
		}
		got, want := thresholdMicros(limit, pct), thresholdOracle(limit, pct)
		if got != want {
			t.Fatalf("thresholdMicros(%d, %d) = %d, want %d", limit, pct, got, want)
		}
		// The crossing rule agrees: a spend reaches the threshold exactly
		// when spend × 100 ≥ limit × pct.
		s := Scope{Limit: limit, Alerts: []int{pct}}
		if got > 0 {
			if c := appendCrossings(nil, "t", s, got-1, got, time.Time{}); len(c) != 1 {
				t.Fatalf("%d→%d did not cross %d%% of %d", got-1, got, pct, limit)
			}
		}
		if got < math.MaxInt64 {
			if c := appendCrossings(nil, "t", s, got, got+1, time.Time{}); len(c) != 0 {
				t.Fatalf("%d→%d crossed %d%% of %d again", got, got+1, pct, limit)
			}
		}
	})
}
