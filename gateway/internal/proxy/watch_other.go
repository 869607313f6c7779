//go:build !linux

package proxy

import "net"

// clientWatch is unavailable off Linux: a disconnect is noticed at the next
// write to the client.
type clientWatch struct{}

type watchState struct{}

func watchClient(net.Conn, func(error)) *clientWatch { return nil }

func (*clientWatch) stop() {}

func (*clientConn) forget() {}

// readAhead is Linux-only (readahead_linux.go); elsewhere reads go to the
// socket.
type readAhead struct{}
