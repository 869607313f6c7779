// Package syncbuf is a text buffer that goroutines may write at once: a
// log or a child process's output that a test reads while it is written.
package syncbuf

import (
	"strings"
	"sync"
)

// Buffer collects what is written to it, safe for concurrent use. The
// zero value is ready.
type Buffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
