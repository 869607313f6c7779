package proxy

import (
	"crypto/tls"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
)

// disconnects notices clients that close their connection while the
// gateway waits on the upstream or streams to them, so the upstream request
// is canceled at once rather than at the next write (which, before the
// first token, may be many seconds away).
//
// One goroutine waits in epoll_wait on a private epoll instance. A client
// connection is registered there once, at its first forwarded request, for
// EPOLLRDHUP (peer closed; RST and errors are always reported),
// edge-triggered: one event when the peer goes. A request publishes its
// cancel function on the connection while it runs and withdraws it when
// its reply is done, so a request costs no syscall, no timer and no
// goroutine (a timer per request woke an idle thread at low load, about
// one request in three). Pipelined bytes do not trigger it. The kernel
// drops the registration when the socket closes; the server's ConnState
// hook forgets the connection.
type disconnects struct {
	epfd  int
	mu    sync.Mutex // guards conns; never held across a syscall
	conns map[uint64]*clientConn
	next  atomic.Uint64
}

var watcher = sync.OnceValue(func() *disconnects {
	fd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil // no early disconnect detection; a write still notices
	}
	d := &disconnects{epfd: fd, conns: make(map[uint64]*clientConn)}
	go d.loop()
	return d
})

// clientWatch is a connection being watched for its client's disconnect.
type clientWatch = clientConn

// watchState is the disconnect watch's part of a clientConn.
type watchState struct {
	token uint64       // registration; 0: not yet, unwatchable: cannot be
	gone  atomic.Value // func(error): the running request's cancel, or noGone
	// hup is set when the peer's hang-up was seen. The watch is
	// edge-triggered, so an edge that arrives while no request is
	// watching (a client that hangs up while its request is still being
	// read or admitted) comes only once: watchClient reads hup after it
	// stores gone, and the loop reads gone after it sets hup, so one of
	// the two always calls the request's cancel (twice is harmless).
	hup atomic.Bool
}

const unwatchable = ^uint64(0)

func noGone(error) {}

// watchClient calls gone(ErrClientGone) if the client of c closes before
// stop. It returns nil when c cannot be watched (no file descriptor, e.g.
// a pipe, or no epoll): then the disconnect is noticed at the next write.
func watchClient(c net.Conn, gone func(error)) *clientWatch {
	cc, ok := c.(*clientConn)
	if !ok || cc.watch.token == unwatchable {
		return nil
	}
	if cc.watch.token == 0 && !cc.register() {
		cc.watch.token = unwatchable
		return nil
	}
	cc.watch.gone.Store(gone)
	if cc.watch.hup.Load() {
		gone(ErrClientGone)
	}
	return cc
}

// register adds the connection to the watcher's epoll set.
func (cc *clientConn) register() bool {
	d := watcher()
	c := cc.Conn
	if tc, ok := c.(*tls.Conn); ok {
		// The peer's FIN shows on the socket under TLS as well.
		c = tc.NetConn()
	}
	sc, ok := c.(syscall.Conn)
	if d == nil || !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	token := d.next.Add(1)
	d.mu.Lock()
	d.conns[token] = cc
	d.mu.Unlock()
	var cerr error
	err = rc.Control(func(fd uintptr) {
		ev := syscall.EpollEvent{Events: syscall.EPOLLRDHUP | epollET, Fd: int32(token), Pad: int32(token >> 32)}
		cerr = syscall.EpollCtl(d.epfd, syscall.EPOLL_CTL_ADD, int(fd), &ev)
	})
	if err != nil || cerr != nil {
		d.mu.Lock()
		delete(d.conns, token)
		d.mu.Unlock()
		return false
	}
	cc.watch.token = token
	return true
}

const epollET = 1 << 31 // EPOLLET

// stop ends the request's watch. Safe on a nil watch. A notification
// racing with stop may still call the request's gone; gone is a context
// cancel, harmless once the request is over.
func (cc *clientConn) stop() {
	if cc != nil {
		cc.watch.gone.Store(noGone)
	}
}

// forget drops a closed connection from the watcher. Safe on nil.
func (cc *clientConn) forget() {
	if cc == nil {
		return
	}
	if t := cc.watch.token; t != 0 && t != unwatchable {
		d := watcher()
		d.mu.Lock()
		delete(d.conns, t)
		d.mu.Unlock()
		cc.watch.token = unwatchable
	}
}

func (d *disconnects) loop() {
	events := make([]syscall.EpollEvent, 128)
	for {
		n, err := syscall.EpollWait(d.epfd, events, -1)
		if err != nil {
			if err == syscall.EINTR {
				continue
			}
			return
		}
		for i := 0; i < n; i++ {
			token := uint64(uint32(events[i].Fd)) | uint64(uint32(events[i].Pad))<<32
			d.mu.Lock()
			cc := d.conns[token]
			d.mu.Unlock()
			if cc == nil {
				continue
			}
			cc.watch.hup.Store(true)
			if gone, _ := cc.watch.gone.Load().(func(error)); gone != nil {
				gone(ErrClientGone)
			}
		}
	}
}
