package budget

import (
	"reflect"
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
	base := time.Unix(1_700_000_000, 0).UnixNano()
	next, first := 0, 0
	push := func(n int) {
		for range n {
			q.push(settledMark{key: markOf(strconv.Itoa(next)), end: base + int64(next)})
			next++
		}
	}
	pop := func(n int) {
		for range n {
			m, ok := q.peek()
			if !ok || m.key != markOf(strconv.Itoa(first)) || m.end != base+int64(first) {
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
	// A used-up block is kept for reuse, cleared.
	if cap(q.spare) != markBlock || len(q.spare) != 0 {
		t.Fatalf("spare block len %d cap %d", len(q.spare), cap(q.spare))
	}
	for _, m := range q.spare[:markBlock] {
		if m != (settledMark{}) {
			t.Fatal("a popped marker is still in its block")
		}
	}
}

// BenchmarkMarkQueue is one push and one pop with a full window queued.
func BenchmarkMarkQueue(b *testing.B) {
	var q markQueue
	for i := range 300_000 {
		q.push(settledMark{end: int64(i)})
	}
	for b.Loop() {
		q.push(settledMark{})
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

// TestSettleMarkersHoldNoPointers: a settle marker, in the map and in the
// queue, holds no pointer, so the garbage collector never scans the
// markers (see markKey).
func TestSettleMarkersHoldNoPointers(t *testing.T) {
	var ts tenantState
	for _, typ := range []reflect.Type{
		reflect.TypeOf(ts.settled).Key(), reflect.TypeOf(ts.settled).Elem(), reflect.TypeOf(settledMark{}),
	} {
		if hasPointers(typ) {
			t.Errorf("%v holds a pointer", typ)
		}
	}
}

func hasPointers(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
		return false
	case reflect.Array:
		return t.Len() > 0 && hasPointers(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if hasPointers(t.Field(i).Type) {
				return true
			}
		}
		return false
	}
	return true
}
