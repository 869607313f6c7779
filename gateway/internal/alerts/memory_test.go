package alerts

import (
	"errors"
	"testing"
	"time"
)

// outboxContract runs the Outbox contract against ob; advance moves ob's
// clock forward (or waits, for Postgres).
func outboxContract(t *testing.T, ob Outbox, advance func(time.Duration)) {
	ctx := t.Context()
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	cs := crossings(3, 80, at)
	batch := []Alert{FromCrossing(cs[0]), FromCrossing(cs[1]), FromCrossing(cs[0])}
	added, err := ob.Add(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	if len(added) != 2 || added[0].ID != batch[0].ID || added[1].ID != batch[1].ID {
		t.Fatalf("added %v, want the first two (a repeat within a batch is skipped)", ids(added))
	}
	added, err = ob.Add(ctx, []Alert{FromCrossing(cs[1]), FromCrossing(cs[2])})
	if err != nil || len(added) != 1 || added[0].ID != FromCrossing(cs[2]).ID {
		t.Fatalf("second add: %v %v, want only the third", ids(added), err)
	}
	if n, _ := ob.Pending(ctx); n != 3 {
		t.Fatalf("pending %d, want 3", n)
	}
	first, err := ob.Claim(ctx, 2, time.Hour)
	if err != nil || len(first) != 2 {
		t.Fatalf("claim: %d, %v", len(first), err)
	}
	rest, _ := ob.Claim(ctx, 5, time.Hour)
	if len(rest) != 1 || rest[0].Attempt != 1 || rest[0].At != at || rest[0].Spent != 80_000_000 {
		t.Fatalf("second claim %+v, want the third alert once, first attempt, as stored", rest)
	}
	if again, _ := ob.Claim(ctx, 5, time.Hour); len(again) != 0 {
		t.Fatalf("leased alerts claimed again: %v", again)
	}
	if err := ob.Delivered(ctx, first[0].ID); err != nil {
		t.Fatal(err)
	}
	gaveUp, err := ob.Failed(ctx, first[1].ID, "webhook replied 500", 0, time.Hour)
	if err != nil || gaveUp {
		t.Fatalf("failed: %v %v", gaveUp, err)
	}
	retry, _ := ob.Claim(ctx, 5, time.Hour)
	if len(retry) != 1 || retry[0].ID != first[1].ID || retry[0].Attempt != 2 {
		t.Fatalf("retry claim %+v, want %s at attempt 2", retry, first[1].ID)
	}
	advance(20 * time.Millisecond)
	gaveUp, err = ob.Failed(ctx, retry[0].ID, "timeout", 0, 10*time.Millisecond)
	if err != nil || !gaveUp {
		t.Fatalf("failed past max age: gave up %v, %v", gaveUp, err)
	}
	if n, _ := ob.Pending(ctx); n != 1 {
		t.Fatalf("pending %d, want 1 (the leased third)", n)
	}
	// Delivered and given-up alerts are never claimed or added again;
	// a late Failed does not undo a delivery.
	if gaveUp, _ := ob.Failed(ctx, first[0].ID, "late", 0, 0); gaveUp {
		t.Error("a delivered alert was given up")
	}
	if added, _ := ob.Add(ctx, []Alert{FromCrossing(cs[0]), FromCrossing(cs[1])}); len(added) != 0 {
		t.Errorf("finished alerts added again: %v", ids(added))
	}
	if c, _ := ob.Claim(ctx, 5, 0); len(c) != 0 {
		t.Errorf("claimed %v, want nothing due", ids2(c))
	}
}

func ids(as []Alert) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.ID
	}
	return out
}

func ids2(cs []Claimed) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.ID
	}
	return out
}

func TestMemoryOutbox(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	m := NewMemory(0, func() time.Time { return now })
	outboxContract(t, m, func(d time.Duration) { now = now.Add(d) })
}

// The memory outbox holds at most its capacity of pending alerts and
// refuses a batch that does not fit, whole.
func TestMemoryOutboxFull(t *testing.T) {
	m := NewMemory(2, nil)
	cs := crossings(3, 80, time.Now())
	if _, err := m.Add(t.Context(), []Alert{FromCrossing(cs[0])}); err != nil {
		t.Fatal(err)
	}
	_, err := m.Add(t.Context(), []Alert{FromCrossing(cs[1]), FromCrossing(cs[2])})
	if !errors.Is(err, ErrOutboxFull) {
		t.Fatalf("add beyond capacity: %v, want ErrOutboxFull", err)
	}
	if n, _ := m.Pending(t.Context()); n != 1 {
		t.Fatalf("pending %d after a refused batch, want 1", n)
	}
	c, _ := m.Claim(t.Context(), 1, time.Hour)
	if err := m.Delivered(t.Context(), c[0].ID); err != nil {
		t.Fatal(err)
	}
	if added, err := m.Add(t.Context(), []Alert{FromCrossing(cs[1]), FromCrossing(cs[2])}); err != nil || len(added) != 2 {
		t.Fatalf("add after a delivery: %d, %v", len(added), err)
	}
}
