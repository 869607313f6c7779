package wasmhost

import (
	"crypto/sha256"
	"sync"
)

// The same module is instrumented many times in one process: every
// configuration variant a plan or tenant asks for loads the policy's
// module again, and so does every reload and every check of a stored
// override. Instrumenting is deterministic (the same bytes in give the same
// bytes out), so its result is kept by the module's SHA-256 and shared.
// In the end-to-end tests it was 18 s of the 66 s of CPU the plugin loads
// took (go test -cpuprofile of gateway/e2e, wasmhost.instrument).
//
// The cache is small and bounded: memoEntries modules, and none larger
// than memoMaxBytes; the oldest entry is dropped first. Results are shared
// read-only: neither wazero nor this package writes to a module's bytes.
const (
	memoEntries  = 16
	memoMaxBytes = 64 << 20
)

var memo struct {
	mu    sync.Mutex // guards m and order; never held while instrumenting
	m     map[[sha256.Size]byte][]byte
	order [][sha256.Size]byte
}

// instrumentShared is instrument with its results kept (see above).
// Failures are not kept: the next load reports the error again.
func instrumentShared(module []byte) ([]byte, error) {
	if len(module) > memoMaxBytes {
		return instrument(module)
	}
	sum := sha256.Sum256(module)
	memo.mu.Lock()
	out, ok := memo.m[sum]
	memo.mu.Unlock()
	if ok {
		return out, nil
	}
	out, err := instrument(module)
	if err != nil {
		return nil, err
	}
	memo.mu.Lock()
	defer memo.mu.Unlock()
	if prev, ok := memo.m[sum]; ok {
		return prev, nil // another load got there first
	}
	if memo.m == nil {
		memo.m = make(map[[sha256.Size]byte][]byte, memoEntries)
	}
	if len(memo.order) == memoEntries {
		delete(memo.m, memo.order[0])
		memo.order = append(memo.order[:0], memo.order[1:]...)
	}
	memo.m[sum] = out
	memo.order = append(memo.order, sum)
	return out, nil
}
