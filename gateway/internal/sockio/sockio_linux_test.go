package sockio

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"
)

// pair returns two connected loopback TCP connections, both wrapped.
func pair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	client, server = New(c), New(s)
	for _, x := range []net.Conn{client, server} {
		if _, ok := x.(*Conn); !ok {
			t.Fatalf("New(%T) = %T, want *Conn", c, x)
		}
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

func TestRoundTrip(t *testing.T) {
	c, s := pair(t)
	for _, size := range []int{1, 100, 8 << 10, MaxRaw, MaxRaw + 1, 1 << 20} {
		want := make([]byte, size)
		for i := range want {
			want[i] = byte(rand.IntN(256))
		}
		errc := make(chan error, 1)
		go func() {
			n, err := c.Write(want)
			if err == nil && n != size {
				err = io.ErrShortWrite
			}
			errc <- err
		}()
		got := make([]byte, size)
		if _, err := io.ReadFull(s, got); err != nil {
			t.Fatalf("size %d: read: %v", size, err)
		}
		if err := <-errc; err != nil {
			t.Fatalf("size %d: write: %v", size, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("size %d: bytes differ", size)
		}
	}
}

// A read into a buffer larger than MaxRaw is a short read of MaxRaw bytes
// at most, and the rest follows.
func TestLargeReadBuffer(t *testing.T) {
	c, s := pair(t)
	want := bytes.Repeat([]byte("0123456789abcdef"), (MaxRaw+4096)/16)
	go c.Write(want)
	buf := make([]byte, 2*MaxRaw)
	var got []byte
	for len(got) < len(want) {
		n, err := s.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		if n > MaxRaw {
			t.Fatalf("read %d bytes, more than MaxRaw", n)
		}
		got = append(got, buf[:n]...)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("bytes differ")
	}
}

// A write larger than the socket buffers waits until the peer reads, then
// completes (the EAGAIN path: wait for writability, write the rest).
func TestWriteWaitsForPeer(t *testing.T) {
	c, s := pair(t)
	setBuf(t, c, syscall.SO_SNDBUF, 16384)
	setBuf(t, s, syscall.SO_RCVBUF, 16384)
	want := bytes.Repeat([]byte{'x'}, MaxRaw) // raw, and more than both buffers hold
	const delay = 100 * time.Millisecond
	got := make(chan []byte, 1)
	go func() {
		time.Sleep(delay)
		b := make([]byte, len(want))
		io.ReadFull(s, b)
		got <- b
	}()
	start := time.Now()
	n, err := c.Write(want)
	if err != nil || n != len(want) {
		t.Fatalf("Write = %d, %v; want %d, nil", n, err, len(want))
	}
	if d := time.Since(start); d < delay/2 {
		t.Fatalf("Write returned after %v, before the peer read: it did not wait", d)
	}
	if !bytes.Equal(<-got, want) {
		t.Fatal("bytes differ")
	}
}

func setBuf(t *testing.T, c net.Conn, opt, size int) {
	t.Helper()
	raw, _ := c.(*Conn).SyscallConn()
	var serr error
	if err := raw.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, opt, size) }); err != nil {
		t.Fatal(err)
	}
	if serr != nil {
		t.Fatal(serr)
	}
}

func checkTimeout(t *testing.T, op string, err error) {
	t.Helper()
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("%s: %v (%T), want a net.Error timeout", op, err, err)
	}
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("%s: %v, want os.ErrDeadlineExceeded", op, err)
	}
	var oe *net.OpError
	if !errors.As(err, &oe) || oe.Op != op {
		t.Fatalf("%s: %#v, want a *net.OpError with Op %q", op, err, op)
	}
}

func TestReadDeadline(t *testing.T) {
	_, s := pair(t)
	s.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	n, err := s.Read(make([]byte, 10))
	if n != 0 {
		t.Fatalf("read %d bytes from a silent peer", n)
	}
	checkTimeout(t, "read", err)
}

func TestWriteDeadline(t *testing.T) {
	c, s := pair(t)
	setBuf(t, c, syscall.SO_SNDBUF, 4096)
	setBuf(t, s, syscall.SO_RCVBUF, 4096)
	c.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
	p := make([]byte, MaxRaw)
	var total int
	var err error
	for err == nil && total < 64<<20 { // the peer never reads
		var n int
		n, err = c.Write(p)
		total += n
	}
	checkTimeout(t, "write", err)
}

func TestEOF(t *testing.T) {
	c, s := pair(t)
	c.Write([]byte("last"))
	c.Close()
	b, err := io.ReadAll(s)
	if err != nil || string(b) != "last" {
		t.Fatalf("ReadAll = %q, %v; want \"last\", nil", b, err)
	}
	if n, err := s.Read(make([]byte, 4)); n != 0 || err != io.EOF {
		t.Fatalf("Read after EOF = %d, %v", n, err)
	}
}

func TestReset(t *testing.T) {
	c, s := pair(t)
	c.(*Conn).Unwrap().(*net.TCPConn).SetLinger(0)
	c.Close() // RST
	_, err := s.Read(make([]byte, 4))
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("Read after reset: %v, want ECONNRESET", err)
	}
	var oe *net.OpError
	if !errors.As(err, &oe) || oe.Op != "read" || oe.Addr == nil || oe.Source == nil {
		t.Fatalf("Read after reset: %#v, want a *net.OpError \"read\" with addresses", err)
	}
	var werr error
	for range 10 { // the first write after a reset may succeed
		if _, werr = s.Write([]byte("x")); werr != nil {
			break
		}
	}
	if !errors.Is(werr, syscall.EPIPE) && !errors.Is(werr, syscall.ECONNRESET) {
		t.Fatalf("Write after reset: %v, want EPIPE or ECONNRESET", werr)
	}
}

func TestClosed(t *testing.T) {
	_, s := pair(t)
	s.Close()
	if _, err := s.Read(make([]byte, 4)); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Read after Close: %v, want net.ErrClosed", err)
	}
	if _, err := s.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Write after Close: %v, want net.ErrClosed", err)
	}
}

// Close from another goroutine ends a Read waiting for data.
func TestCloseUnblocksRead(t *testing.T) {
	_, s := pair(t)
	errc := make(chan error, 1)
	go func() {
		_, err := s.Read(make([]byte, 4))
		errc <- err
	}()
	time.Sleep(20 * time.Millisecond)
	s.Close()
	select {
	case err := <-errc:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Read: %v, want net.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Read still waiting after Close")
	}
}

func TestZeroLength(t *testing.T) {
	c, _ := pair(t)
	if n, err := c.Write(nil); n != 0 || err != nil {
		t.Fatalf("Write(nil) = %d, %v", n, err)
	}
	if n, err := c.Read(nil); n != 0 || err != nil {
		t.Fatalf("Read(nil) = %d, %v", n, err)
	}
}

// Concurrent reads and writes on one Conn lose and duplicate nothing: the
// calls that find another in progress take the net package's path.
func TestConcurrent(t *testing.T) {
	c, s := pair(t)
	const writers, per, size = 4, 500, 16
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			msg := bytes.Repeat([]byte{byte('a' + w)}, size)
			for range per {
				if _, err := c.Write(msg); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	var mu sync.Mutex
	counts := map[byte]int{}
	var rg sync.WaitGroup
	for range 3 {
		rg.Go(func() {
			b := make([]byte, 7)
			for {
				n, err := s.Read(b)
				mu.Lock()
				for _, x := range b[:n] {
					counts[x]++
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	c.Close() // the readers drain what was written, then see EOF
	rg.Wait()
	for w := range writers {
		if got := counts[byte('a'+w)]; got != per*size {
			t.Errorf("writer %c: %d bytes arrived, want %d", 'a'+w, got, per*size)
		}
	}
}

// Connections without a socket, and those New wrapped already, are
// returned as they are.
func TestNotSocket(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if x := New(a); x != a {
		t.Fatalf("New(pipe) = %T, want the pipe itself", x)
	}
	c, _ := pair(t) // wrapped, as pair checks
	if again := New(c); again != c {
		t.Fatalf("New(New(tcp)) wrapped it again")
	}
}
