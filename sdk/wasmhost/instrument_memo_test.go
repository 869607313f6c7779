package wasmhost

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
)

// withCustom returns module with a custom section named name appended: a
// different module (another SHA-256) that instruments the same way.
func withCustom(module []byte, name string) []byte {
	body := append([]byte{byte(len(name))}, name...)
	out := append([]byte(nil), module...)
	out = append(out, 0, byte(len(body)))
	return append(out, body...)
}

// TestInstrumentShared: the shared result is instrument's, is kept for the
// same bytes, is not confused between modules, stays bounded, and holds
// under concurrent loads.
func TestInstrumentShared(t *testing.T) {
	base := testPlugin(t)
	want, err := instrument(base)
	if err != nil {
		t.Fatal(err)
	}
	first, err := instrumentShared(base)
	if err != nil || !bytes.Equal(first, want) {
		t.Fatalf("shared result differs from instrument's (err %v)", err)
	}
	again, _ := instrumentShared(append([]byte(nil), base...))
	if &again[0] != &first[0] {
		t.Error("the same module's bytes were instrumented again")
	}

	// Distinct modules, concurrently: each gets its own result.
	var wg sync.WaitGroup
	for i := range 2 * memoEntries {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := withCustom(base, fmt.Sprintf("variant-%d", i))
			got, err := instrumentShared(m)
			direct, derr := instrument(m)
			if err != nil || derr != nil || !bytes.Equal(got, direct) {
				t.Errorf("variant %d: shared and direct results differ (%v, %v)", i, err, derr)
			}
		}()
	}
	wg.Wait()
	memo.mu.Lock()
	n, order := len(memo.m), len(memo.order)
	memo.mu.Unlock()
	if n > memoEntries || n != order {
		t.Errorf("memo holds %d entries (%d in order), want at most %d", n, order, memoEntries)
	}

	// Failures are not kept.
	if _, err := instrumentShared([]byte("not wasm")); err == nil {
		t.Error("garbage instrumented")
	}
}
