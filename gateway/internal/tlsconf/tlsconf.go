// Package tlsconf builds the gateway's TLS configurations from the policy:
// the listeners' server side, whose certificate and client CAs are read
// again when their files change, and the Redis client's.
//
// Rotation (docs/adr/0021-tls-certificate-reload.md): a goroutine stats the
// files on a short interval and, when one changed, loads the new set and
// publishes a complete *tls.Config through an atomic pointer that the
// handshake's GetConfigForClient reads. A handshake does no I/O and takes
// no lock; a new set that does not load (a key that does not match its
// certificate, a file half written) is logged and the previous one kept,
// and is tried again when the files change again.
package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/config"
)

// DefaultReloadInterval is how often a Server stats its files.
const DefaultReloadInterval = time.Second

// Files is what a TLS listener serves: a certificate, its key, and for
// mutual TLS the CAs client certificates are verified against.
type Files struct {
	CertFile, KeyFile string
	ClientCAFile      string // "" without client certificates
	ClientAuth        tls.ClientAuthType
	MinVersion        uint16
}

// ForServer returns the files of the public listener's policy.
func ForServer(t *config.ServerTLS) Files {
	return Files{CertFile: t.CertFile, KeyFile: t.KeyFile, MinVersion: config.TLSVersion(t.MinVersion)}
}

// ForAdmin returns the files of the admin listener's policy.
func ForAdmin(t *config.AdminTLS) Files {
	f := Files{CertFile: t.CertFile, KeyFile: t.KeyFile, MinVersion: config.TLSVersion(t.MinVersion),
		ClientAuth: config.ClientAuthType(t.ClientAuth)}
	if f.ClientAuth != tls.NoClientCert {
		f.ClientCAFile = t.ClientCAFile
	}
	return f
}

// Server is the server side of a TLS listener. Config is safe for
// concurrent use with the reloads.
type Server struct {
	files Files
	log   *slog.Logger
	cur   atomic.Pointer[tls.Config]
	base  *tls.Config
	poll  *poller
}

// NewServer loads files; an error says which file is wrong. Watch starts
// the reloads; log (nil: slog.Default()) receives them.
func NewServer(files Files, log *slog.Logger) (*Server, error) {
	if log == nil {
		log = slog.Default()
	}
	s := &Server{files: files, log: log, poll: newPoller(files.CertFile, files.KeyFile, files.ClientCAFile)}
	cfg, err := s.load()
	if err != nil {
		return nil, err
	}
	s.cur.Store(cfg)
	s.base = &tls.Config{
		MinVersion: files.MinVersion,
		NextProtos: []string{"http/1.1"},
		// Every handshake takes the configuration last loaded: one atomic
		// load, no I/O.
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) { return s.cur.Load(), nil },
	}
	return s, nil
}

// Config is the listener's configuration (tls.NewListener, tls.Server).
func (s *Server) Config() *tls.Config { return s.base }

// Certificate is the certificate being served.
func (s *Server) Certificate() *x509.Certificate { return s.cur.Load().Certificates[0].Leaf }

// Watch stats the files every interval (0: DefaultReloadInterval) until
// Close and reloads them when they changed.
func (s *Server) Watch(every time.Duration) { s.poll.watch(every, func() { s.Reload() }) }

// Close stops Watch; safe to call more than once, without Watch, or on
// nil.
func (s *Server) Close() {
	if s != nil {
		s.poll.close()
	}
}

// Reload loads the files if they changed since the last load or failed
// attempt, and reports whether a new configuration is being served.
// Watch calls it; it must not be called concurrently with itself.
func (s *Server) Reload() bool {
	if !s.poll.changed() {
		return false
	}
	cfg, err := s.load()
	if err != nil {
		s.log.Error("tls: new certificate files not loaded; serving the previous certificate",
			"cert_file", s.files.CertFile, "err", err)
		return false
	}
	s.cur.Store(cfg)
	leaf := cfg.Certificates[0].Leaf
	s.log.Info("tls: certificate reloaded", "cert_file", s.files.CertFile,
		"serial", leaf.SerialNumber.Text(16), "not_after", leaf.NotAfter)
	return true
}

// load reads the files into a complete configuration.
func (s *Server) load() (*tls.Config, error) {
	pair, err := tls.LoadX509KeyPair(s.files.CertFile, s.files.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("certificate %s and key %s: %w", s.files.CertFile, s.files.KeyFile, err)
	}
	cfg := &tls.Config{
		Certificates: []tls.Certificate{pair},
		MinVersion:   s.files.MinVersion,
		NextProtos:   []string{"http/1.1"},
		ClientAuth:   s.files.ClientAuth,
	}
	if s.files.ClientCAFile != "" {
		if cfg.ClientCAs, err = config.LoadCertPool(s.files.ClientCAFile); err != nil {
			return nil, err
		}
	}
	return cfg, nil
}
