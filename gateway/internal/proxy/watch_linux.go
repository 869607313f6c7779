package proxy

import (
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// disconnects notices clients that close their connection while the
// gateway waits on the upstream, so the upstream request is canceled at
// once rather than at the next write (which, before the first token, may be
// many seconds away).
//
// One goroutine waits in epoll_wait on a private epoll instance. A request
// still waiting on its upstream after watchDelay registers its client
// socket for EPOLLRDHUP (peer closed; RST and errors are always reported)
// with EPOLLONESHOT, and unregisters when its reply is done: no goroutine
// per request, and for a request answered within watchDelay no syscall at
// all (a timer only). Pipelined bytes do not trigger it.
type disconnects struct {
	epfd    int
	mu      sync.Mutex // guards waiters; never held across a syscall
	waiters map[uint64]func(error)
	next    atomic.Uint64
}

var watcher = sync.OnceValue(func() *disconnects {
	fd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil // no early disconnect detection; a write still notices
	}
	d := &disconnects{epfd: fd, waiters: make(map[uint64]func(error))}
	go d.loop()
	return d
})

// watchDelay is how long a request runs before its client socket is
// watched; it is part of the time a disconnect may take to cancel the
// upstream (the budget is 100 ms).
const watchDelay = 2 * time.Millisecond

// clientWatch is one request's watch. Watches are pooled with their timer.
type clientWatch struct {
	d     *disconnects
	fd    int
	gone  func(error)
	timer *time.Timer
	done  chan struct{} // receives once register has finished (it fired)
	token uint64        // set by register; 0 if registration failed
}

var watches = sync.Pool{New: func() any {
	w := &clientWatch{done: make(chan struct{}, 1)}
	w.timer = time.AfterFunc(time.Hour, w.register)
	w.timer.Stop()
	return w
}}

// watchClient calls gone(ErrClientGone) if the peer of c closes before
// stop. It returns nil when c has no file descriptor (e.g. TLS) or epoll
// is unavailable: then the disconnect is noticed at the next write.
func watchClient(c net.Conn, gone func(error)) *clientWatch {
	d := watcher()
	sc, ok := c.(syscall.Conn)
	if d == nil || !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	fd := -1
	rc.Control(func(f uintptr) { fd = int(f) })
	if fd < 0 {
		return nil
	}
	w := watches.Get().(*clientWatch)
	w.d, w.fd, w.gone, w.token = d, fd, gone, 0
	w.timer.Reset(watchDelay)
	return w
}

// register runs on the timer's goroutine once the request has lasted
// watchDelay.
func (w *clientWatch) register() {
	defer func() { w.done <- struct{}{} }()
	d := w.d
	token := d.next.Add(1)
	d.mu.Lock()
	d.waiters[token] = w.gone
	d.mu.Unlock()
	ev := syscall.EpollEvent{Events: syscall.EPOLLRDHUP | epollOneShot, Fd: int32(token), Pad: int32(token >> 32)}
	if err := syscall.EpollCtl(d.epfd, syscall.EPOLL_CTL_ADD, w.fd, &ev); err != nil {
		d.mu.Lock()
		delete(d.waiters, token)
		d.mu.Unlock()
		return
	}
	w.token = token
}

const epollOneShot = 1 << 30 // EPOLLONESHOT

// stop ends the watch. Safe on a nil watch. A notification racing with stop
// may still call gone; gone is a context cancel, harmless once the request
// is over.
func (w *clientWatch) stop() {
	if w == nil {
		return
	}
	if !w.timer.Stop() { // it fired: wait for register, then undo it
		<-w.done
		if w.token != 0 {
			syscall.EpollCtl(w.d.epfd, syscall.EPOLL_CTL_DEL, w.fd, nil)
			w.d.mu.Lock()
			delete(w.d.waiters, w.token)
			w.d.mu.Unlock()
		}
	}
	w.d, w.gone = nil, nil
	watches.Put(w)
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
			gone := d.waiters[token]
			delete(d.waiters, token)
			d.mu.Unlock()
			if gone != nil {
				gone(ErrClientGone)
			}
		}
	}
}
