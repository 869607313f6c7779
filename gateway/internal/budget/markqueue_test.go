package budget

import (
	"strconv"
	"testing"
	"time"
)

// The settle markers' queue keeps their order across blocks, and popping
// releases them.
func TestMarkQueue(t *testing.T) {
	var q markQueue
	if _, ok := q.peek(); ok || q.len() != 0 {
		t.Fatal("a new queue is not empty")
	}
	base := time.Unix(0, 0)
	next, first := 0, 0
	push := func(n int) {
		for range n {
			q.push(settledMark{id: strconv.Itoa(next), end: base.Add(time.Duration(next))})
			next++
		}
	}
	pop := func(n int) {
		for range n {
			m, ok := q.peek()
			if !ok || m.id != strconv.Itoa(first) || !m.end.Equal(base.Add(time.Duration(first))) {
				t.Fatalf("peek = %+v, %v; want marker %d", m, ok, first)
			}
			q.pop()
			first++
		}
	}
	// Interleaved, across several blocks, down to empty and up again.
	for _, step := range [][2]int{{10, 3}, {markBlock, markBlock}, {3 * markBlock, 2*markBlock + 5}, {1, markBlock + 3}, {0, 0}, {markBlock + 1, markBlock + 1}} {
		push(step[0])
		pop(step[1])
		if got, want := q.len(), next-first; got != want {
			t.Fatalf("len = %d, want %d", got, want)
		}
	}
	if _, ok := q.peek(); ok || q.blocks != nil {
		t.Fatalf("drained queue holds %d blocks", len(q.blocks))
	}
	// A used-up block is kept for reuse, cleared: it holds no id.
	if cap(q.spare) != markBlock || len(q.spare) != 0 {
		t.Fatalf("spare block len %d cap %d", len(q.spare), cap(q.spare))
	}
	for _, m := range q.spare[:markBlock] {
		if m.id != "" {
			t.Fatal("a popped marker still holds its id")
		}
	}
}

// BenchmarkMarkQueue is one push and one pop with a full window queued.
func BenchmarkMarkQueue(b *testing.B) {
	var q markQueue
	for i := range 300_000 {
		q.push(settledMark{id: "x", end: time.Unix(int64(i), 0)})
	}
	for b.Loop() {
		q.push(settledMark{id: "x"})
		q.pop()
	}
}

// len is the number of markers queued.
func (q *markQueue) len() int {
	if len(q.blocks) == 0 {
		return 0
	}
	return (len(q.blocks)-1)*markBlock + len(q.blocks[len(q.blocks)-1]) - q.head
}
