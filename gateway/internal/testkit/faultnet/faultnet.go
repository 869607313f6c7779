// Package faultnet is a fault-injecting TCP proxy for tests: it listens
// on a free port of 127.0.0.1 and forwards every connection to a target,
// and can be switched at run time between
//
//   - pass: bytes are forwarded as they come;
//   - delay: every chunk is delivered a fixed time after it was read, in
//     each direction (a round trip takes twice the delay longer), in order;
//   - blackhole: a network partition that drops packets rather than
//     refusing them. New connections are accepted and kept open but never
//     reach the target; connections already open hang too. Bytes sent
//     either way are swallowed: nothing is refused, nothing is reset,
//     nothing is closed, so a client learns of it only from its own
//     timeouts;
//
// and healed (back to pass).
//
// A connection that was open when the partition began (or was accepted
// during it) stays hung for good, even after the heal: what was swallowed
// is gone, so its byte stream cannot be resumed. Its client must give up
// on it. The partition hides closes too: when such a client closes, the
// target sees the close only once the partition heals (as a FIN that is
// retransmitted until it gets through), and a target's close never reaches
// the client. After the heal, new connections pass.
package faultnet

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Mode is what the proxy does to the bytes it forwards.
type Mode int

const (
	// Pass forwards bytes as they come.
	Pass Mode = iota
	// Delay delivers each chunk a fixed time after it was read.
	Delay
	// Blackhole swallows everything and hangs every connection.
	Blackhole
)

func (m Mode) String() string {
	switch m {
	case Pass:
		return "pass"
	case Delay:
		return "delay"
	case Blackhole:
		return "blackhole"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// dialTimeout bounds connecting to the target.
const dialTimeout = 5 * time.Second

// queueChunks bounds the chunks in flight in one direction of a delayed
// connection (up to 32 KiB each): past it the proxy stops reading, and the
// sender's writes back up as on a slow link.
const queueChunks = 256

// Proxy forwards connections to a target. Its methods are safe for
// concurrent use.
type Proxy struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	mode   Mode
	delay  time.Duration
	conns  map[*conn]struct{}
	closed bool

	accepted atomic.Int64
	reads    atomic.Int64  // reads that returned bytes from clients
	done     chan struct{} // closed by Close
	wg       sync.WaitGroup
}

// Stats counts the proxy's connections.
type Stats struct {
	// Accepted is every connection accepted since the start.
	Accepted int64
	// Open is the connections whose client has not closed them.
	Open int
	// Hung is those of Open that a partition hung (for good).
	Hung int
	// ClientReads is the reads that returned bytes sent by clients since
	// the start: bytes a client wrote together, or that arrived together,
	// are one (how many writes the clients made, when they are spaced).
	ClientReads int64
}

// New starts a proxy to target (host:port) on a free port of 127.0.0.1,
// in Pass mode. Close it when done.
func New(target string) (*Proxy, error) {
	if _, _, err := net.SplitHostPort(target); err != nil {
		return nil, fmt.Errorf("faultnet: target %q: %w (want host:port)", target, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultnet: %w", err)
	}
	p := &Proxy{ln: ln, target: target, conns: map[*conn]struct{}{}, done: make(chan struct{})}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Start is New for a test: it fails the test on error and closes the
// proxy when the test ends.
func Start(t testing.TB, target string) *Proxy {
	t.Helper()
	p, err := New(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Mode returns the current mode and, in Delay, the delay.
func (p *Proxy) Mode() (Mode, time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode, p.delay
}

// SetDelay adds d of latency to every chunk, each way, from now on
// (chunks already queued keep theirs). d must be positive.
func (p *Proxy) SetDelay(d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("faultnet: delay %v: must be positive (Heal to stop delaying)", d)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mode == Blackhole {
		return errors.New("faultnet: delay during a partition: Heal first")
	}
	p.mode, p.delay = Delay, d
	return nil
}

// Partition starts a partition (Blackhole): every open connection hangs
// for good, new ones are accepted and hang, bytes are swallowed.
func (p *Proxy) Partition() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mode, p.delay = Blackhole, 0
	for c := range p.conns {
		c.dead = true
	}
}

// Heal goes back to Pass. Connections a partition hung stay hung; the
// target sees the close of those whose client closed them.
func (p *Proxy) Heal() {
	p.mu.Lock()
	p.mode, p.delay = Pass, 0
	var closing []net.Conn
	for c := range p.conns {
		if c.dead && c.clientGone && c.target != nil {
			closing = append(closing, c.target)
		}
	}
	p.mu.Unlock()
	for _, t := range closing {
		t.Close()
	}
}

// Stats returns the connection counts.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := Stats{Accepted: p.accepted.Load(), ClientReads: p.reads.Load()}
	for c := range p.conns {
		if c.clientGone {
			continue
		}
		s.Open++
		if c.dead {
			s.Hung++
		}
	}
	return s
}

// Close stops listening, closes every connection and waits for the
// proxy's goroutines.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	close(p.done)
	var all []*conn
	for c := range p.conns {
		all = append(all, c)
	}
	p.mu.Unlock()
	err := p.ln.Close()
	for _, c := range all {
		c.closeBoth()
	}
	p.wg.Wait()
	return err
}

// conn is one proxied connection.
type conn struct {
	p      *Proxy
	client net.Conn
	target net.Conn // nil: accepted during a partition
	// Guarded by p.mu.
	dead       bool // hung by a partition, for good
	clientGone bool // the client side was closed
	readers    int  // reader goroutines still running
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		cl, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		p.accepted.Add(1)
		p.mu.Lock()
		blackhole, closed := p.mode == Blackhole, p.closed
		p.mu.Unlock()
		if closed {
			cl.Close()
			return
		}
		c := &conn{p: p, client: cl}
		if !blackhole {
			// Dialing takes the accept loop's time only when the target is
			// slow to accept: a test's target is on loopback.
			tg, err := net.DialTimeout("tcp", p.target, dialTimeout)
			if err != nil {
				cl.Close() // the target refused: so does the proxy
				continue
			}
			c.target = tg
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.closeBoth()
			return
		}
		if p.mode == Blackhole || c.target == nil {
			c.dead = true
		}
		p.conns[c] = struct{}{}
		if c.target == nil {
			c.readers = 1
			p.wg.Add(1)
			go c.swallow()
		} else {
			c.readers = 2
			p.wg.Add(4)
			go c.pipe(c.client, c.target, true)
			go c.pipe(c.target, c.client, false)
		}
		p.mu.Unlock()
	}
}

// swallow reads a connection accepted during a partition until its client
// closes it.
func (c *conn) swallow() {
	defer c.p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		if _, err := c.client.Read(buf); err != nil {
			c.readerDone(true)
			return
		}
	}
}

// chunk is bytes read and when they are due at the other side.
type chunk struct {
	b   []byte
	due time.Time
}

// pipe forwards src to dst (a reader goroutine and a writer goroutine).
func (c *conn) pipe(src, dst net.Conn, fromClient bool) {
	q := make(chan chunk, queueChunks)
	go c.write(dst, q)
	defer c.p.wg.Done()
	for {
		buf := make([]byte, 32<<10)
		n, err := src.Read(buf)
		if n > 0 {
			if fromClient {
				c.p.reads.Add(1)
			}
			c.p.mu.Lock()
			if c.p.mode == Blackhole {
				c.dead = true
			}
			dead, delay := c.dead, c.p.delay
			c.p.mu.Unlock()
			if !dead {
				select {
				case q <- chunk{b: buf[:n], due: time.Now().Add(delay)}:
				case <-c.p.done:
				}
			}
		}
		if err != nil {
			close(q)
			c.readerDone(fromClient)
			return
		}
	}
}

// write delivers q's chunks to dst when they are due, unless the
// connection is hung.
func (c *conn) write(dst net.Conn, q <-chan chunk) {
	defer c.p.wg.Done()
	var timer *time.Timer
	for ch := range q {
		if wait := time.Until(ch.due); wait > 0 {
			if timer == nil {
				timer = time.NewTimer(wait)
			} else {
				timer.Reset(wait)
			}
			select {
			case <-timer.C:
			case <-c.p.done:
				timer.Stop()
				continue // drain q: its reader ends once Close closes src
			}
		}
		c.p.mu.Lock()
		dead := c.dead
		c.p.mu.Unlock()
		if dead {
			continue
		}
		if _, err := dst.Write(ch.b); err != nil {
			c.lost()
		}
	}
}

// readerDone: a reader's source ended (its peer closed, or the proxy
// closed it).
func (c *conn) readerDone(fromClient bool) {
	p := c.p
	p.mu.Lock()
	c.readers--
	if c.readers == 0 {
		delete(p.conns, c)
	}
	if !c.dead {
		p.mu.Unlock()
		c.closeBoth() // a healthy connection ends as a whole
		return
	}
	var closeTarget bool
	if fromClient {
		c.clientGone = true
		// The partition hides the close from the target until it heals.
		closeTarget = p.mode != Blackhole && c.target != nil
	}
	p.mu.Unlock()
	if fromClient {
		c.client.Close()
		if closeTarget {
			c.target.Close()
		}
	}
	// A target's close never reaches a hung client.
}

// lost: a write failed on a healthy connection: it ends as a whole.
func (c *conn) lost() {
	c.p.mu.Lock()
	dead := c.dead
	c.p.mu.Unlock()
	if !dead {
		c.closeBoth()
	}
}

func (c *conn) closeBoth() {
	c.client.Close()
	if c.target != nil {
		c.target.Close()
	}
}
