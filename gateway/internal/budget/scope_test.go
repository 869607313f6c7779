package budget

import (
	"testing"
	"time"
)

// Period names the UTC window holding t, across day, month and year ends
// and before 1970, whatever was asked before (the name is kept per day).
func TestWindowPeriod(t *testing.T) {
	tests := []struct {
		at         string
		month, day string
	}{
		{"2026-12-01T00:00:00Z", "2026-12", "2026-12-01"},
		{"2026-11-30T23:59:59.999Z", "2026-11", "2026-11-30"},
		{"2026-12-31T23:59:59Z", "2026-12", "2026-12-31"},
		{"2027-01-01T00:00:00Z", "2027-01", "2027-01-01"},
		{"2026-12-01T08:00:00+09:00", "2026-11", "2026-11-30"},
		{"1969-12-31T23:59:59Z", "1969-12", "1969-12-31"},
		{"1970-01-01T00:00:00Z", "1970-01", "1970-01-01"},
		{"2026-12-01T12:00:00Z", "2026-12", "2026-12-01"},
	}
	for round := 0; round < 2; round++ { // the second round reads the kept names
		for _, tt := range tests {
			at, err := time.Parse(time.RFC3339Nano, tt.at)
			if err != nil {
				t.Fatal(err)
			}
			if got := Month.Period(at); got != tt.month {
				t.Errorf("Month.Period(%s) = %q, want %q", tt.at, got, tt.month)
			}
			if got := Day.Period(at); got != tt.day {
				t.Errorf("Day.Period(%s) = %q, want %q", tt.at, got, tt.day)
			}
		}
	}
}
