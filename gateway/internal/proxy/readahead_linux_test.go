package proxy

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// tcpPair is a connected loopback pair: the server's side wrapped as the
// server wraps it, and the client's. Both are closed when the test ends.
func tcpPair(t *testing.T) (*clientConn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server, err := ln.Accept()
	if err != nil {
		client.Close()
		t.Fatal(err)
	}
	cc := &clientConn{Conn: server}
	t.Cleanup(func() { cc.Close(); client.Close() })
	return cc, client
}

// A one-byte read takes what has arrived; the next reads are served from
// it, and the buffer goes back once drained.
func TestReadAheadServesTheRestFromOneRead(t *testing.T) {
	cc, client := tcpPair(t)
	req := []byte("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
	if _, err := client.Write(req); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond) // the whole request is there
	var first [1]byte
	if n, err := cc.Read(first[:]); n != 1 || err != nil || first[0] != 'P' {
		t.Fatalf("first read: %d %q %v", n, first[:n], err)
	}
	if cc.ahead.buf == nil || cc.ahead.end != len(req) {
		t.Fatalf("read ahead %d bytes, want the whole request (%d)", cc.ahead.end, len(req))
	}
	// The rest, in reads of several sizes, without touching the socket:
	// with the client's side gone quiet, a socket read would block.
	got := append([]byte(nil), first[:]...)
	for _, size := range []int{3, 1, 4096} {
		b := make([]byte, size)
		n, err := cc.Read(b)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, b[:n]...)
	}
	if !bytes.Equal(got, req) {
		t.Fatalf("read %q, want %q", got, req)
	}
	if cc.ahead.buf != nil {
		t.Fatal("the buffer was not returned once drained")
	}
}

// Waiting for the next request holds no buffer; the wait ends with the
// data, with EOF when the client closes, and with a timeout at the read
// deadline.
func TestReadAheadWaitsWithoutABuffer(t *testing.T) {
	cc, client := tcpPair(t)
	done := make(chan []byte)
	go func() {
		var b [1]byte
		n, err := cc.Read(b[:])
		if err != nil {
			t.Error(err)
		}
		done <- b[:n]
	}()
	time.Sleep(20 * time.Millisecond)
	client.Write([]byte("GET / HTTP/1.1\r\n\r\n"))
	if b := <-done; string(b) != "G" {
		t.Fatalf("got %q", b)
	}
	rest := make([]byte, 100)
	n, _ := cc.Read(rest)
	if string(rest[:n]) != "ET / HTTP/1.1\r\n\r\n" {
		t.Fatalf("rest %q", rest[:n])
	}

	// Deadline.
	cc.SetReadDeadline(time.Now().Add(30 * time.Millisecond))
	var b [1]byte
	_, err := cc.Read(b[:])
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("past the deadline: %v, want a timeout", err)
	}
	if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
		t.Fatalf("%v is not a net.Error timeout", err)
	}
	if oe, ok := err.(*net.OpError); !ok || oe.Op != "read" {
		t.Fatalf("%#v is not a *net.OpError \"read\", as a socket read's is", err)
	}
	if cc.ahead.buf != nil {
		t.Fatal("a buffer is held while waiting")
	}
	cc.SetReadDeadline(time.Time{})

	// EOF.
	client.Close()
	if _, err := cc.Read(b[:]); err != io.EOF {
		t.Fatalf("after the client closed: %v, want EOF", err)
	}
	if cc.ahead.buf != nil {
		t.Fatal("a buffer is held after EOF")
	}
}

// Large reads go to the socket; a request larger than the read-ahead
// comes through whole.
func TestReadAheadLargeRequest(t *testing.T) {
	cc, client := tcpPair(t)
	req := bytes.Repeat([]byte("0123456789abcdef"), 3*readAheadSize/16+5)
	go client.Write(req)
	var got []byte
	var b [1]byte
	if _, err := cc.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	got = append(got, b[0])
	buf := make([]byte, 4096)
	for len(got) < len(req) {
		n, err := cc.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, buf[:n]...)
	}
	if !bytes.Equal(got, req) {
		t.Fatal("the request was not read back whole")
	}
}

// A connection that is not a socket is read directly.
func TestReadAheadWithoutASocket(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	cc := &clientConn{Conn: a}
	go b.Write([]byte("hi"))
	var one [1]byte
	if n, err := cc.Read(one[:]); n != 1 || err != nil || one[0] != 'h' {
		t.Fatalf("%d %v", n, err)
	}
	if cc.ahead.raw != noRaw || cc.ahead.buf != nil {
		t.Fatal("a pipe was read ahead")
	}
}
