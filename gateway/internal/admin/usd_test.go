package admin

import "testing"

func TestParseUSD(t *testing.T) {
	tests := []struct {
		in      string
		want    int64
		wantErr bool
	}{
		{"0", 0, false},
		{"12", 12_000_000, false},
		{"12.5", 12_500_000, false},
		{"0.1", 100_000, false},
		{"0.000001", 1, false},
		{"007.250000", 7_250_000, false},
		{"9223372036853", 9_223_372_036_853_000_000, false},
		{"9223372036854", 0, true},
		{"0.0000001", 0, true},
		{"", 0, true},
		{".5", 0, true},
		{"5.", 0, true},
		{"-1", 0, true},
		{"+1", 0, true},
		{"1e3", 0, true},
		{"1,5", 0, true},
		{" 1", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseUSD(tt.in)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("parseUSD(%q) = %d, %v; want %d, error %v", tt.in, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestFormatUSD(t *testing.T) {
	tests := []struct {
		in   int64
		want string
	}{
		{0, "0"}, {1, "0.000001"}, {100_000, "0.1"}, {12_500_000, "12.5"}, {50_000_000, "50"}, {-1_500_000, "-1.5"},
	}
	for _, tt := range tests {
		if got := formatUSD(tt.in); got != tt.want {
			t.Errorf("formatUSD(%d) = %q, want %q", tt.in, got, tt.want)
		}
		if tt.in >= 0 {
			if back, err := parseUSD(tt.want); err != nil || back != tt.in {
				t.Errorf("parseUSD(formatUSD(%d)) = %d, %v", tt.in, back, err)
			}
		}
	}
}
