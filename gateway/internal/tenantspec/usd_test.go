package tenantspec

import (
	"math"
	"strings"
	"testing"
)

func TestUSDToMicros(t *testing.T) {
	tests := []struct {
		usd     float64
		want    int64
		wantErr string
	}{
		{0, 0, ""},
		{12.5, 12_500_000, ""},
		{0.1, 100_000, ""},
		{19.99, 19_990_000, ""},
		{0.000001, 1, ""},
		{0.150001, 150_001, ""},
		{1e6, 1_000_000_000_000, ""},
		{123456789.123456, 123_456_789_123_456, ""},
		{0.0000001, 0, "more than 6 decimals"},
		{1.0000005, 0, "more than 6 decimals"},
		{-0.5, 0, "negative"},
		{1e19, 0, "too large"},
		{math.NaN(), 0, "finite"},
		{math.Inf(1), 0, "finite"},
	}
	for _, tt := range tests {
		got, err := usdToMicros(tt.usd)
		switch {
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("usdToMicros(%v) = %d, %v; want error %q", tt.usd, got, err, tt.wantErr)
		case tt.wantErr == "" && (err != nil || got != tt.want):
			t.Errorf("usdToMicros(%v) = %d, %v; want %d", tt.usd, got, err, tt.want)
		}
	}
}

// FuzzUSDToMicros checks that an accepted amount converts back to the same
// float64: the micros are the decimal the YAML number denotes.
func FuzzUSDToMicros(f *testing.F) {
	for _, v := range []float64{0, 0.1, 12.5, 19.99, 0.000001, 1e-7, 123456789.123456, 1e19, -1} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v float64) {
		m, err := usdToMicros(v)
		if err != nil {
			return
		}
		if m < 0 {
			t.Fatalf("usdToMicros(%v) = %d", v, m)
		}
		if m < 1<<53 && float64(m)/1e6 != v {
			t.Fatalf("usdToMicros(%v) = %d, which is %v", v, m, float64(m)/1e6)
		}
	})
}
