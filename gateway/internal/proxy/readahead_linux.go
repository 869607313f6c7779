package proxy

import (
	"io"
	"os"
	"sync"
	"syscall"

	"github.com/tollgate/tollgate/gateway/internal/sockio"
)

// Read-ahead on client connections.
//
// The server keeps no buffer on an idle keep-alive connection
// (ReduceMemoryUsage): it waits for a connection's next request by reading
// one byte, and only then takes a read buffer and reads the rest. That is
// two read syscalls for every request, where one would do: by the time
// the first byte has arrived, the whole request usually has.
//
// So a read of fewer than readAheadMin bytes (the one-byte wait) reads
// whatever has arrived, up to readAheadSize, into a pooled buffer in one
// syscall, and the reads that follow are served from it. The buffer is
// taken only once data is there to read (inside the raw read, after the
// socket is readable) and returned as soon as it is drained, so an idle
// connection still holds none. (A connection closed with bytes still in
// its buffer leaves the buffer to the garbage collector: Close may run on
// another goroutine than the reads.) Reads of readAheadMin bytes or more go to
// the socket as before. Measured in docs/BENCHMARKS.md ("What else was
// tried, and one read per request").

const (
	readAheadMin  = 512
	readAheadSize = 8 << 10 // the server's ReadBufferSize: a request's headers fit
)

var readAheadPool = sync.Pool{New: func() any { return new([readAheadSize]byte) }}

// readAhead is a clientConn's read-ahead state.
type readAhead struct {
	raw      syscall.RawConn // nil until the first small read; noRaw: unavailable
	buf      *[readAheadSize]byte
	off, end int
	// The raw read's results, and the raw read itself, bound once so a
	// read allocates nothing.
	n     int
	errno syscall.Errno
	fill  func(fd uintptr) bool
}

// noRaw marks a connection without a file descriptor (not a TCP or Unix
// socket): its reads go to the connection itself.
var noRaw syscall.RawConn = rawUnavailable{}

type rawUnavailable struct{ syscall.RawConn }

// Read implements net.Conn.
func (cc *clientConn) Read(p []byte) (int, error) {
	ra := &cc.ahead
	if ra.buf != nil {
		n := copy(p, ra.buf[ra.off:ra.end])
		ra.off += n
		if ra.off == ra.end {
			ra.release()
		}
		return n, nil
	}
	if len(p) == 0 || len(p) >= readAheadMin {
		return cc.Conn.Read(p)
	}
	if ra.raw == nil {
		ra.raw = noRaw
		if sc, ok := cc.Conn.(syscall.Conn); ok {
			if rc, err := sc.SyscallConn(); err == nil {
				ra.raw = rc
			}
		}
	}
	if ra.raw == noRaw {
		return cc.Conn.Read(p)
	}
	if ra.fill == nil {
		ra.fill = ra.read
	}
	err := ra.raw.Read(ra.fill)
	n, errno := ra.n, ra.errno
	switch {
	case err != nil: // deadline, closed
		ra.release()
		return 0, sockio.OpError(cc, "read", err)
	case errno != 0:
		ra.release()
		return 0, sockio.OpError(cc, "read", os.NewSyscallError("read", errno))
	case n <= 0:
		ra.release()
		return 0, io.EOF
	}
	ra.off, ra.end = 0, n
	return cc.Read(p)
}

// read is the raw read, inside RawConn.Read: it takes a buffer only once
// the socket has data (false: not yet, wait until it is readable).
func (ra *readAhead) read(fd uintptr) bool {
	b := readAheadPool.Get().(*[readAheadSize]byte)
	ra.n, ra.errno = sockio.Read(fd, b[:])
	if ra.errno == syscall.EAGAIN {
		readAheadPool.Put(b)
		return false
	}
	ra.buf = b
	return true
}

func (ra *readAhead) release() {
	if ra.buf != nil {
		readAheadPool.Put(ra.buf)
		ra.buf, ra.off, ra.end = nil, 0, 0
	}
}
