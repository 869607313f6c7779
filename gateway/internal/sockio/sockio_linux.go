package sockio

import (
	"io"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// Conn is a socket connection whose small reads and writes are raw
// syscalls. It is safe for concurrent use as a net.Conn is: a call that
// finds another of its kind in progress takes the wrapped connection's
// path, which the net package serializes.
type Conn struct {
	net.Conn
	raw syscall.RawConn
	rd  op
	wr  op
}

// op is one direction's call in progress. fn is bound once, when the Conn
// is made, so a call allocates nothing.
type op struct {
	busy  atomic.Bool
	p     []byte
	n     int
	errno syscall.Errno
	fn    func(fd uintptr) bool
}

// New wraps c when it has a socket file descriptor (TCP, Unix); any other
// connection (TLS, a pipe, one New wrapped already) is returned as it is.
// Wrap a TLS connection's underlying socket instead, before the handshake.
func New(c net.Conn) net.Conn {
	if _, ok := c.(*Conn); ok {
		return c
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return c
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return c
	}
	x := &Conn{Conn: c, raw: raw}
	x.rd.fn, x.wr.fn = x.rd.read, x.wr.write
	return x
}

// SyscallConn returns the wrapped connection's raw connection.
func (c *Conn) SyscallConn() (syscall.RawConn, error) { return c.raw, nil }

// Unwrap returns the wrapped connection.
func (c *Conn) Unwrap() net.Conn { return c.Conn }

// Read implements net.Conn.
func (c *Conn) Read(p []byte) (int, error) {
	if len(p) == 0 || !c.rd.busy.CompareAndSwap(false, true) {
		return c.Conn.Read(p)
	}
	if len(p) > MaxRaw {
		p = p[:MaxRaw]
	}
	c.rd.p, c.rd.n, c.rd.errno = p, 0, 0
	err := c.raw.Read(c.rd.fn)
	n, errno := c.rd.n, c.rd.errno
	c.rd.p = nil
	c.rd.busy.Store(false)
	switch {
	case err != nil: // deadline, closed
		return 0, OpError(c, "read", err)
	case errno != 0:
		return 0, OpError(c, "read", os.NewSyscallError("read", errno))
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// Write implements net.Conn.
func (c *Conn) Write(p []byte) (int, error) {
	if len(p) > MaxRaw || !c.wr.busy.CompareAndSwap(false, true) {
		return c.Conn.Write(p)
	}
	c.wr.p, c.wr.n, c.wr.errno = p, 0, 0
	var err error
	if len(p) > 0 {
		err = c.raw.Write(c.wr.fn)
	}
	n, errno := c.wr.n, c.wr.errno
	c.wr.p = nil
	c.wr.busy.Store(false)
	switch {
	case err != nil:
		return n, OpError(c, "write", err)
	case errno != 0:
		return n, OpError(c, "write", os.NewSyscallError("write", errno))
	}
	return n, nil
}

// read is the raw read, run by RawConn.Read: false asks it to wait until
// the socket is readable and call again.
func (o *op) read(fd uintptr) bool {
	n, errno := Read(fd, o.p)
	if errno == syscall.EAGAIN {
		return false
	}
	o.n, o.errno = n, errno
	return true
}

// write writes all of o.p, or as much as fits before EAGAIN (false: wait
// until the socket is writable and call again with the rest).
func (o *op) write(fd uintptr) bool {
	for len(o.p) > 0 {
		r, _, errno := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&o.p[0])), uintptr(len(o.p)))
		switch errno {
		case 0:
			o.n += int(r)
			o.p = o.p[r:]
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false
		default:
			o.errno = errno
			return true
		}
	}
	return true
}

// Read reads from the non-blocking socket fd into p (len(p) > 0) with a raw
// syscall, retrying on EINTR; EAGAIN is the caller's to handle. For callers
// inside a RawConn.Read of their own.
func Read(fd uintptr, p []byte) (int, syscall.Errno) {
	for {
		r, _, errno := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
		if errno != syscall.EINTR {
			if errno != 0 {
				return 0, errno
			}
			return int(r), 0
		}
	}
}
