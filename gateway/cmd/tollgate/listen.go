package main

import (
	"crypto/tls"
	"log/slog"
	"net"

	"github.com/tollgate/tollgate/gateway/internal/config"
	"github.com/tollgate/tollgate/gateway/internal/proxy"
	"github.com/tollgate/tollgate/gateway/internal/tlsconf"
)

// listenerTLS loads a listener's certificate (nil files: plain TCP, a nil
// Server) and starts watching its files for rotation until the Server's
// Close.
func listenerTLS(files *tlsconf.Files, log *slog.Logger) (*tlsconf.Server, error) {
	if files == nil {
		return nil, nil
	}
	s, err := tlsconf.NewServer(*files, log)
	if err != nil {
		return nil, err
	}
	s.Watch(tlsconf.DefaultReloadInterval)
	return s, nil
}

// serverTLSFiles and adminTLSFiles are the listeners' TLS of policy p
// (nil: none).
func serverTLSFiles(p *config.Policy) *tlsconf.Files {
	if p.Server.TLS == nil {
		return nil
	}
	f := tlsconf.ForServer(p.Server.TLS)
	return &f
}

func adminTLSFiles(p *config.Policy) *tlsconf.Files {
	if p.Admin.TLS == nil {
		return nil
	}
	f := tlsconf.ForAdmin(p.Admin.TLS)
	return &f
}

// serveClients runs the public listener, over TLS when t is set. The
// gateway wraps TLS itself, over its raw-syscall socket (docs/adr/0006),
// rather than taking a tls.Listener.
func serveClients(srv *proxy.Server, ln net.Listener, t *tlsconf.Server) error {
	if t == nil {
		return srv.Serve(ln)
	}
	return srv.ServeTLS(ln, t.Config())
}

// adminListener wraps the admin listener in TLS when t is set; net/http
// runs each connection's handshake.
func adminListener(ln net.Listener, t *tlsconf.Server) net.Listener {
	if t == nil {
		return ln
	}
	return tls.NewListener(ln, t.Config())
}
