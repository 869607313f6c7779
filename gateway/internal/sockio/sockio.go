// Package sockio does a socket's small reads and writes without the Go
// scheduler's syscall bookkeeping.
//
// A read or write through the net package enters the kernel through the
// runtime's entersyscall and exitsyscall. When every P was idle a moment
// before — a proxy at one request at a time, between requests — entering
// a syscall also wakes the runtime's monitor thread (sysmon) from its deep
// sleep with a futex, and sysmon then polls every 20 µs or more until the
// process goes idle again, on the core the client and the upstream need.
// On a proxy's sockets every read and write is one of those: with the four
// built-in plugins on, the gateway made 1.3 futex calls and 1.6 nanosleeps
// per request for it, and spent 44 µs more CPU per request than without
// (docs/BENCHMARKS.md, "Sockets without the scheduler's syscall
// bookkeeping"; docs/adr/0006-raw-socket-syscalls.md).
//
// A socket in the net package is non-blocking: a read or write returns at
// once, with what could be done or EAGAIN. Conn makes such calls as raw
// syscalls (the runtime treats them as ordinary code), and waits for
// readiness the usual way, through the net package's poller, when one
// returns EAGAIN. Deadlines, Close and the net package's errors behave as
// for the connection it wraps. Transfers of more than MaxRaw bytes go the
// standard way, so the kernel copying a large body never holds a P for
// long; so do a Read or Write made while another Read (Write) of the same
// Conn is in progress.
package sockio

import (
	"errors"
	"net"
)

// MaxRaw is the largest read or write made as a raw syscall. A larger Read
// reads at most MaxRaw bytes (a short read, as a socket's can be); a larger
// Write goes through the wrapped connection.
const MaxRaw = 64 << 10

// OpError gives err, from a read or write of c (op), the form the net
// package's Read and Write give theirs: a *net.OpError with c's addresses.
// An error from a RawConn's Read or Write (op "raw-read", "raw-write") is
// given the plain op.
func OpError(c net.Conn, op string, err error) error {
	var oe *net.OpError
	if errors.As(err, &oe) {
		err = oe.Err
	}
	return &net.OpError{Op: op, Net: c.LocalAddr().Network(), Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
}
