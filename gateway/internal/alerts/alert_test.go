package alerts

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/budget"
)

func TestUSD(t *testing.T) {
	tests := []struct {
		micros int64
		want   string
	}{
		{0, "0"}, {1, "0.000001"}, {1_500_000, "1.5"}, {100_000_000, "100"},
		{123_456_789, "123.456789"}, {-250, "-0.00025"}, {9_000_010, "9.00001"},
	}
	for _, tt := range tests {
		got := string(usd(tt.micros))
		if got != tt.want {
			t.Errorf("usd(%d) = %s, want %s", tt.micros, got, tt.want)
		}
		var f float64
		if err := json.Unmarshal([]byte(got), &f); err != nil || int64(f*1e6+copysign(0.5, f)) != tt.micros {
			t.Errorf("usd(%d) = %s reads back as %v (%v)", tt.micros, got, f, err)
		}
	}
}

func copysign(v, sign float64) float64 {
	if sign < 0 {
		return -v
	}
	return v
}

// An alert's id depends on each field of the unique key, and on nothing
// else (spend, time, reason).
func TestAlertID(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	s := budget.Scope{Kind: budget.ScopeKey, ID: "k1", Window: budget.Day, Period: "2026-12-01", Limit: 5_000_000, Alerts: []int{80, 100}}
	base := newAlert("acme", s, 80, ReasonCrossed, 4_000_000, at)
	same := newAlert("acme", s, 80, ReasonRefused, 4_900_000, at.Add(time.Hour))
	if base.ID != same.ID {
		t.Errorf("the same key gave ids %s and %s", base.ID, same.ID)
	}
	if !strings.HasPrefix(base.ID, "ba_") || len(base.ID) != 27 {
		t.Errorf("id %q, want ba_ and 24 hex digits", base.ID)
	}
	variants := map[string]Alert{
		"tenant":    newAlert("acme2", s, 80, ReasonCrossed, 0, at),
		"threshold": newAlert("acme", s, 100, ReasonCrossed, 0, at),
	}
	for field, mod := range map[string]func(*budget.Scope){
		"kind":   func(s *budget.Scope) { s.Kind = budget.ScopeUser },
		"id":     func(s *budget.Scope) { s.ID = "k2" },
		"period": func(s *budget.Scope) { s.Period = "2026-12-02" },
	} {
		s2 := s
		mod(&s2)
		variants[field] = newAlert("acme", s2, 80, ReasonCrossed, 0, at)
	}
	// Fields joined without a separator would collide here.
	variants["boundary"] = newAlert("acme", budget.Scope{Kind: budget.ScopeKey, ID: "k12026-12-01"}, 80, ReasonCrossed, 0, at)
	for field, a := range variants {
		if a.ID == base.ID {
			t.Errorf("changing the %s kept the id %s", field, a.ID)
		}
	}
}

func TestBody(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 30, 0, 123_000_000, time.FixedZone("x", 3600))
	c := budget.Crossing{Tenant: "acme", Threshold: 80, Before: 79_000_000, After: 80_250_000, At: at,
		Scope: budget.Scope{Kind: budget.ScopeUser, ID: "u-7", Window: budget.Day, Period: "2026-12-01", Limit: 100_000_000}}
	a := FromCrossing(c)
	var got map[string]any
	if err := json.Unmarshal(a.Body(), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"type": "budget.threshold", "id": a.ID, "tenant": "acme",
		"scope":     map[string]any{"kind": "user", "id": "u-7", "window": "day", "period": "2026-12-01"},
		"threshold": 80.0, "reason": "crossed", "spent_usd": 80.25, "limit_usd": 100.0,
		"spent_micros": 80_250_000.0, "limit_micros": 100_000_000.0, "at": "2026-12-01T09:30:00.123Z",
	}
	gj, _ := json.Marshal(got)
	wj, _ := json.Marshal(want)
	if string(gj) != string(wj) {
		t.Errorf("body\n got %s\nwant %s", gj, wj)
	}
}

func TestSign(t *testing.T) {
	body := []byte(`{"type":"budget.threshold"}`)
	at := time.Unix(1_796_000_000, 0)
	h := Sign(testSecret, body, at)
	if !strings.HasPrefix(h, "t=1796000000,v1=") || len(h) != len("t=1796000000,v1=")+64 {
		t.Fatalf("header %q", h)
	}
	tests := []struct {
		name   string
		secret []byte
		body   []byte
		now    time.Time
		ok     bool
	}{
		{"valid", testSecret, body, at.Add(time.Minute), true},
		{"other secret", []byte("other"), body, at, false},
		{"body changed", testSecret, []byte(`{"type":"budget.thresholD"}`), at, false},
		{"too old", testSecret, body, at.Add(6 * time.Minute), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := verify(tt.secret, h, tt.body, tt.now, 5*time.Minute)
			if (err == nil) != tt.ok {
				t.Errorf("verify: %v, want ok=%v", err, tt.ok)
			}
		})
	}
	// A timestamp changed in the header breaks the signature too.
	forged := strings.Replace(h, "t=1796000000", "t=1796000100", 1)
	if err := verify(testSecret, forged, body, at, 5*time.Minute); err == nil {
		t.Error("a changed timestamp verified")
	}
}
