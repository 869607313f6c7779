package proxy

import (
	"errors"
	"net"
	"sync"
	"syscall"
	"time"
)

// ErrClientGone is the cancel cause of a request whose client closed its
// connection.
var ErrClientGone = errors.New("client closed the connection")

// clientWatch notices a client that closes its connection while the gateway
// waits on the upstream, so the upstream request is canceled at once rather
// than at the next write (which, before the first token, may be many
// seconds away).
//
// It waits in the runtime's network poller for the socket to become
// readable and then peeks (MSG_PEEK) without consuming: zero bytes means
// the peer closed; bytes mean a pipelined request, which is left for the
// server to read, and the watch ends. One parked goroutine per watched
// request; no polling.
type clientWatch struct {
	conn net.Conn
	done chan struct{}
}

var watchPool = sync.Pool{New: func() any { return &clientWatch{done: make(chan struct{}, 1)} }}

// watchClient starts watching c and calls gone once if the peer closes.
// It returns nil when c does not expose its file descriptor (then a
// disconnect is noticed at the next write).
func watchClient(c net.Conn, gone func(error)) *clientWatch {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	// The server's read deadline for this request has served its purpose;
	// left in place it would end the watch of a long stream early.
	c.SetReadDeadline(time.Time{})
	w := watchPool.Get().(*clientWatch)
	w.conn = c
	go w.run(rc, gone)
	return w
}

func (w *clientWatch) run(rc syscall.RawConn, gone func(error)) {
	closed := false
	var buf [1]byte
	rc.Read(func(fd uintptr) bool {
		n, _, err := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case err == syscall.EAGAIN || err == syscall.EINTR:
			return false // park in the poller until readable
		case err != nil || n == 0:
			closed = true
		}
		return true
	})
	// rc.Read returns early with a deadline error when stop is called.
	if closed {
		gone(ErrClientGone)
	}
	w.done <- struct{}{}
}

// stop ends the watch and waits for its goroutine, then clears the read
// deadline it used to interrupt the wait. Safe on a nil watch.
func (w *clientWatch) stop() {
	if w == nil {
		return
	}
	w.conn.SetReadDeadline(time.Unix(1, 0))
	<-w.done
	w.conn.SetReadDeadline(time.Time{})
	w.conn = nil
	watchPool.Put(w)
}
