package wasmhost

import (
	"context"
	"syscall"

	"github.com/tetratelabs/wazero/experimental"
)

// withLinearMemory makes the instances created with ctx keep their linear
// memory in an address range reserved once for the memory's maximum: a
// guest's memory.grow then only lengthens the slice. wazero's default
// backing is a Go slice that grows by reallocation, so every growth of a
// Go guest's heap (a few hundred KiB at a time, until its GC settles,
// about 100,000 callbacks in) copied the whole memory during a callback
// and faulted in every page again (perf: 2% of the gateway's CPU and most
// of its page faults at 1 concurrent with the four built-in plugins). The
// reservation is MAP_NORESERVE: untouched pages cost nothing.
func withLinearMemory(ctx context.Context) context.Context {
	return experimental.WithMemoryAllocator(ctx, experimental.MemoryAllocatorFunc(allocateLinear))
}

// reservedMemory is one instance's linear memory.
type reservedMemory struct {
	buf []byte // the whole reservation; len is the maximum
}

func allocateLinear(capacity, max uint64) experimental.LinearMemory {
	if max > 0 && max <= 1<<32 {
		b, err := syscall.Mmap(-1, 0, int(max), syscall.PROT_READ|syscall.PROT_WRITE,
			syscall.MAP_PRIVATE|syscall.MAP_ANONYMOUS|syscall.MAP_NORESERVE)
		if err == nil {
			return &reservedMemory{buf: b}
		}
	}
	// No reservation (address space exhausted?): a Go slice, as wazero's
	// default.
	return &sliceMemory{buf: make([]byte, 0, capacity)}
}

// sliceMemory grows by reallocation.
type sliceMemory struct{ buf []byte }

func (m *sliceMemory) Reallocate(size uint64) []byte {
	if n := uint64(len(m.buf)); size > n {
		m.buf = append(m.buf, make([]byte, size-n)...)
	}
	return m.buf[:size]
}

func (m *sliceMemory) Free() { m.buf = nil }

// Reallocate implements experimental.LinearMemory: the memory never
// moves, and pages past the old length are fresh (zero).
func (m *reservedMemory) Reallocate(size uint64) []byte {
	if m.buf == nil || size > uint64(len(m.buf)) {
		return nil
	}
	return m.buf[:size:size]
}

// Free implements experimental.LinearMemory.
func (m *reservedMemory) Free() {
	if m.buf != nil {
		_ = syscall.Munmap(m.buf)
		m.buf = nil
	}
}
