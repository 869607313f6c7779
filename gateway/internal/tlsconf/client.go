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

// Client is the TLS of the connections to Redis (redis.tls): the CA bundle
// the server's certificate is verified against and the client certificate,
// read again when their files change, as a listener's are
// (docs/adr/0021-tls-certificate-reload.md).
//
// Redis connections are long-lived, so a reload does not touch the open
// ones: each connection made afterwards — rueidis makes one when a
// connection breaks, Redis restarts or fails over, or a cluster moves a
// slot — calls Config and presents the new certificate and trusts the new
// bundle. Config does no I/O and takes no lock.
type Client struct {
	tls  config.RedisTLS
	log  *slog.Logger
	cur  atomic.Pointer[clientFiles]
	poll *poller
}

// clientFiles is one load of the files: the pool and the pair always come
// from the same load.
type clientFiles struct {
	roots *x509.CertPool    // nil: the system's roots
	certs []tls.Certificate // none without a client certificate
}

// NewClient loads the files of t (nil: no TLS, and a nil Client); an error
// says which file is wrong. Watch starts the reloads; log (nil:
// slog.Default()) receives them.
func NewClient(t *config.RedisTLS, log *slog.Logger) (*Client, error) {
	if t == nil {
		return nil, nil
	}
	if log == nil {
		log = slog.Default()
	}
	c := &Client{tls: *t, log: log, poll: newPoller(t.CAFile, t.CertFile, t.KeyFile)}
	f, err := c.load()
	if err != nil {
		return nil, err
	}
	c.cur.Store(f)
	return c, nil
}

// Config returns the configuration of one new connection, from the files
// last loaded. Each call returns a new *tls.Config the caller may keep.
func (c *Client) Config() *tls.Config {
	f := c.cur.Load()
	cfg := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         c.tls.ServerName,
		InsecureSkipVerify: c.tls.InsecureSkipVerify, //nolint:gosec // policy's choice, documented as tests only
		RootCAs:            f.roots,
	}
	if len(f.certs) > 0 {
		pair := &f.certs[0]
		// Presented whatever CAs the server says it accepts, so a server
		// that does not trust it says so (an alert naming the certificate)
		// rather than seeing no certificate at all.
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return pair, nil }
	}
	return cfg
}

// Certificate is the client certificate new connections present (nil:
// none).
func (c *Client) Certificate() *x509.Certificate {
	if f := c.cur.Load(); len(f.certs) > 0 {
		return f.certs[0].Leaf
	}
	return nil
}

// Watch stats the files every interval (0: DefaultReloadInterval) until
// Close and reloads them when they changed.
func (c *Client) Watch(every time.Duration) { c.poll.watch(every, func() { c.Reload() }) }

// Close stops Watch; safe to call more than once, without Watch, or on
// nil.
func (c *Client) Close() {
	if c != nil {
		c.poll.close()
	}
}

// Reload loads the files if they changed since the last load or failed
// attempt, and reports whether new connections use a new set. A set that
// does not load is logged and the previous one kept. Watch calls it; it
// must not be called concurrently with itself.
func (c *Client) Reload() bool {
	if !c.poll.changed() {
		return false
	}
	f, err := c.load()
	if err != nil {
		c.log.Error("tls: new redis.tls files not loaded; new connections keep the previous ones",
			"ca_file", c.tls.CAFile, "cert_file", c.tls.CertFile, "err", err)
		return false
	}
	c.cur.Store(f)
	attrs := []any{"ca_file", c.tls.CAFile, "cert_file", c.tls.CertFile}
	if len(f.certs) > 0 {
		leaf := f.certs[0].Leaf
		attrs = append(attrs, "serial", leaf.SerialNumber.Text(16), "not_after", leaf.NotAfter)
	}
	c.log.Info("tls: redis.tls files reloaded; new connections use them", attrs...)
	return true
}

func (c *Client) load() (*clientFiles, error) {
	f := &clientFiles{}
	if c.tls.CAFile != "" {
		pool, err := config.LoadCertPool(c.tls.CAFile)
		if err != nil {
			return nil, err
		}
		f.roots = pool
	}
	if c.tls.CertFile != "" {
		pair, err := tls.LoadX509KeyPair(c.tls.CertFile, c.tls.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("client certificate %s and key %s: %w", c.tls.CertFile, c.tls.KeyFile, err)
		}
		f.certs = []tls.Certificate{pair}
	}
	return f, nil
}
