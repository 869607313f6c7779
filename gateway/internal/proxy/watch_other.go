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
