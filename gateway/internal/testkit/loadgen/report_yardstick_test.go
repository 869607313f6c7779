package loadgen

import (
	"math"
	"strings"
	"testing"
)

func TestShare(t *testing.T) {
	tests := []struct {
		name   string
		c, y   float64
		noY    bool
		expect string
	}{
		{"half", 500, 1000, false, "50%"},
		{"rounded", 2001, 3000, false, "67%"},
		{"faster than the yardstick", 1200, 1000, false, "120%"},
		{"yardstick not measured", 500, 0, true, "–"},
		{"yardstick at zero", 500, 0, false, "–"},
		{"target without a rate", math.NaN(), 1000, false, "–"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, y := &cell{rps: tt.c}, &cell{rps: tt.y}
			if tt.noY {
				y = nil
			}
			if got := share(c, y); got != tt.expect {
				t.Errorf("share(%v, %v) = %q, want %q", tt.c, tt.y, got, tt.expect)
			}
		})
	}
}

// The table has one row per section and target (the baseline left out),
// the yardstick's own rate in its row, and nothing when the yardstick was
// not measured.
func TestWriteYardstick(t *testing.T) {
	cfg := reportConfig()
	runs := matrix("")
	var b strings.Builder
	bySection := make([][]cell, len(cfg.Sections))
	for i, s := range cfg.Sections {
		bySection[i] = cells(runs, s.Mode, &cfg)
	}
	writeYardstick(&b, cfg, bySection)
	got := b.String()
	for _, want := range []string{
		"| mode | target | c=1 | c=32 | added p50 µs, c=1 |",
		"| non-streaming | nginx | 5214/s | 126708/s | +75.0 |",
		"| non-streaming | tollgate-all4 | 58% | 47% | +215 |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("table lacks %q:\n%s", want, got)
		}
	}
	if n := strings.Count(got, "\n| "); n != 1+8 {
		t.Errorf("%d rows (header included), want 9:\n%s", n, got)
	}
	if strings.Contains(got, "| direct |") {
		t.Errorf("the baseline has a row:\n%s", got)
	}

	cfg.Yardstick = "haproxy"
	b.Reset()
	writeYardstick(&b, cfg, bySection)
	if b.Len() != 0 {
		t.Errorf("a yardstick never measured still wrote:\n%s", b.String())
	}
}
