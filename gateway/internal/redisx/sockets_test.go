//go:build linux

package redisx

import (
	"crypto/tls"
	"net"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/tollgate/tollgate/gateway/internal/sockio"
)

// TestDialRawSockets: the Client's connections, plain and under TLS, are
// sockio's, so a call made when the process was idle does not wake the
// runtime's monitor thread (docs/adr/0006-raw-socket-syscalls.md), and
// they carry commands either way.
func TestDialRawSockets(t *testing.T) {
	ca, srv, tlsAddr := startTLSRedis(t)
	cfg := &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost"}
	for _, tt := range []struct {
		name string
		opts Options
	}{
		{"plain", Options{Addrs: []string{srv.Addr()}}},
		{"TLS", Options{Addrs: []string{tlsAddr}, TLS: cfg}},
		{"TLS from TLSFor", Options{Addrs: []string{tlsAddr}, TLSFor: func() *tls.Config { return cfg }}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := New(tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if err := c.Connect(ctxTimeout(t, 5*time.Second)); err != nil {
				t.Fatal(err)
			}
			got, err := c.Do(ctxTimeout(t, 5*time.Second), func(b rueidis.Builder) rueidis.Completed { return b.Ping().Build() }).ToString()
			if err != nil || got != "PONG" {
				t.Fatalf("PING = %q, %v", got, err)
			}
			// The dial the Client gives rueidis, called as rueidis does.
			nc, err := c.dialFunc()(ctxTimeout(t, 5*time.Second), tt.opts.Addrs[0], &net.Dialer{Timeout: time.Second}, c.opts.TLS)
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			sock := nc
			if tc, ok := nc.(*tls.Conn); ok {
				sock = tc.NetConn()
			} else if tt.opts.TLS != nil || tt.opts.TLSFor != nil {
				t.Fatalf("connection %T, want a *tls.Conn", nc)
			}
			if _, ok := sock.(*sockio.Conn); !ok {
				t.Fatalf("socket %T, want a *sockio.Conn", sock)
			}
		})
	}
}
