package obs

import (
	"fmt"
	"sync"
	"testing"
)

// The first max values get their own T, in the order seen; the rest, and
// "other" itself, share other's; build runs once per admitted value.
func TestLabelCap(t *testing.T) {
	tests := []struct {
		name   string
		max    int
		values []string
		want   []string // Get's answer for each value
		builds int      // build calls, other's included
	}{
		{"under the cap", 3, []string{"a", "b", "a"}, []string{"a", "b", "a"}, 3},
		{"at the cap", 2, []string{"a", "b", "c", "a", "d", "b"}, []string{"a", "b", "other", "a", "other", "b"}, 3},
		{"no label", 0, []string{"a", "b"}, []string{"other", "other"}, 1},
		{"negative is none", -1, []string{"a"}, []string{"other"}, 1},
		{"a value named other is other", 2, []string{"other", "a", "b", "c"}, []string{"other", "a", "b", "other"}, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			builds := 0
			c := NewLabelCap(tt.max, func(v string) string { builds++; return v })
			for i, v := range tt.values {
				if got := c.Get(v); got != tt.want[i] {
					t.Errorf("Get(%q) #%d = %q, want %q", v, i, got, tt.want[i])
				}
			}
			if builds != tt.builds {
				t.Errorf("build called %d times, want %d", builds, tt.builds)
			}
			if want := min(max(tt.max, 0), tt.builds-1); c.Len() != want {
				t.Errorf("Len %d, want %d", c.Len(), want)
			}
		})
	}
}

// Concurrent callers never admit more than max values, and every caller
// of one value gets the same T.
func TestLabelCapConcurrent(t *testing.T) {
	const capN, goroutines, values = 10, 8, 50
	c := NewLabelCap(capN, func(v string) *string { return &v })
	got := make([][]*string, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range values {
				got[g] = append(got[g], c.Get(fmt.Sprint((i+g)%values)))
			}
		}()
	}
	wg.Wait()
	if c.Len() != capN {
		t.Fatalf("admitted %d values, want %d", c.Len(), capN)
	}
	distinct := map[*string]bool{}
	for g := range got {
		for i, p := range got[g] {
			distinct[p] = true
			if want := c.Get(fmt.Sprint((i + g) % values)); p != want {
				t.Fatalf("goroutine %d value %d: a different T than Get now returns", g, i)
			}
		}
	}
	if len(distinct) != capN+1 {
		t.Fatalf("%d distinct Ts, want %d (the admitted and other)", len(distinct), capN+1)
	}
}

// Get allocates nothing, for an admitted value and for one past the cap.
func TestLabelCapAllocs(t *testing.T) {
	c := NewLabelCap(1, func(v string) *string { return &v })
	in, out := string([]byte("tenant-a")), string([]byte("tenant-b"))
	c.Get(in)
	for _, v := range []string{in, out} {
		if n := testing.AllocsPerRun(1000, func() { c.Get(v) }); n != 0 {
			t.Errorf("Get(%q): %v allocations, want 0", v, n)
		}
	}
}
