package config

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// ServerTLS serves the public listener over TLS (HTTP/1.1, ALPN
// http/1.1). Absent: plain TCP. The certificate and key are read again
// when their files change (docs/SECURITY.md, "Certificate rotation").
type ServerTLS struct {
	// CertFile is the PEM certificate chain, leaf first. A relative path
	// is resolved against the policy file's directory.
	CertFile string `yaml:"cert_file"`
	// KeyFile is the PEM private key of the leaf certificate.
	KeyFile string `yaml:"key_file"`
	// MinVersion is the lowest TLS version accepted: "1.2" (default) or
	// "1.3". Older versions are never accepted.
	MinVersion string `yaml:"min_version"`
}

// AdminTLS serves the admin listener over TLS, optionally asking clients
// for a certificate (mutual TLS) on top of the admin token.
type AdminTLS struct {
	// CertFile is the PEM certificate chain, leaf first. A relative path
	// is resolved against the policy file's directory.
	CertFile string `yaml:"cert_file"`
	// KeyFile is the PEM private key of the leaf certificate.
	KeyFile string `yaml:"key_file"`
	// MinVersion is the lowest TLS version accepted: "1.2" (default) or
	// "1.3".
	MinVersion string `yaml:"min_version"`
	// ClientCAFile holds the PEM certificates of the CAs that sign client
	// certificates; required unless client_auth is none.
	ClientCAFile string `yaml:"client_ca_file"`
	// ClientAuth is none (default: no client certificate asked for),
	// request (a client certificate is asked for and, when sent, must
	// verify against client_ca_file) or require (a client without a
	// verified certificate is refused during the handshake).
	ClientAuth string `yaml:"client_auth"`
}

// RedisTLS connects to Redis over TLS. The CA and client certificate files
// are read again when they change, for the connections made afterwards
// (docs/SECURITY.md, "Certificate rotation").
type RedisTLS struct {
	// CAFile holds the PEM certificates of the CAs that sign the server's
	// certificate (default: the system's roots).
	CAFile string `yaml:"ca_file"`
	// CertFile and KeyFile are a client certificate, for a Redis started
	// with tls-auth-clients (both or neither).
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// ServerName is the name the server's certificate must carry (default:
	// the host of each address).
	ServerName string `yaml:"server_name"`
	// InsecureSkipVerify accepts any server certificate: encryption
	// without authentication, for tests only (default false).
	InsecureSkipVerify bool `yaml:"insecure_skip_verify"`
}

// TLS client authentication modes (AdminTLS.ClientAuth).
const (
	ClientAuthNone    = "none"
	ClientAuthRequest = "request"
	ClientAuthRequire = "require"
)

// TLSVersion returns the crypto/tls version of a min_version value, which
// validation has checked.
func TLSVersion(v string) uint16 {
	if v == "1.3" {
		return tls.VersionTLS13
	}
	return tls.VersionTLS12
}

// ClientAuthType returns the crypto/tls mode of a client_auth value. A
// certificate that is sent is always verified: "request" is
// tls.VerifyClientCertIfGiven, never tls.RequestClientCert.
func ClientAuthType(mode string) tls.ClientAuthType {
	switch mode {
	case ClientAuthRequest:
		return tls.VerifyClientCertIfGiven
	case ClientAuthRequire:
		return tls.RequireAndVerifyClientCert
	}
	return tls.NoClientCert
}

func (p *Policy) applyTLSDefaults() {
	for _, v := range []*string{tlsMin(p.Server.TLS), tlsMinAdmin(p.Admin.TLS)} {
		if v != nil {
			setDefault(v, "1.2")
		}
	}
	if t := p.Admin.TLS; t != nil {
		setDefault(&t.ClientAuth, ClientAuthNone)
	}
}

func tlsMin(t *ServerTLS) *string {
	if t == nil {
		return nil
	}
	return &t.MinVersion
}

func tlsMinAdmin(t *AdminTLS) *string {
	if t == nil {
		return nil
	}
	return &t.MinVersion
}

// validateTLS checks that every TLS file exists and parses and that each
// certificate matches its key, resolving relative paths against the
// policy's directory, so a bad secret mount stops the gateway at start
// with the file's YAML path rather than at the first handshake.
func (p *Policy) validateTLS(ps *Problems) {
	if t := p.Server.TLS; t != nil {
		p.validateKeyPair("server.tls", &t.CertFile, &t.KeyFile, true, ps)
		validateMinVersion("server.tls.min_version", t.MinVersion, ps)
	}
	if t := p.Admin.TLS; t != nil {
		if p.Admin.Listen == "" {
			ps.add("admin.tls", "needs admin.listen (the admin API is off without it)")
		}
		p.validateKeyPair("admin.tls", &t.CertFile, &t.KeyFile, true, ps)
		validateMinVersion("admin.tls.min_version", t.MinVersion, ps)
		switch t.ClientAuth {
		case ClientAuthNone:
			if t.ClientCAFile != "" {
				ps.add("admin.tls.client_ca_file", "is set but client_auth is none: set client_auth to request or require, or drop the file")
			}
		case ClientAuthRequest, ClientAuthRequire:
			if t.ClientCAFile == "" {
				ps.add("admin.tls.client_ca_file", "is required with client_auth %s (the CAs client certificates are verified against)", t.ClientAuth)
			} else {
				p.validateCAFile("admin.tls.client_ca_file", &t.ClientCAFile, ps)
			}
		default:
			ps.add("admin.tls.client_auth", "must be none, request or require, got %q", t.ClientAuth)
		}
	}
	if t := p.Redis.TLS; t != nil {
		if t.CAFile != "" {
			p.validateCAFile("redis.tls.ca_file", &t.CAFile, ps)
		}
		if t.CertFile != "" || t.KeyFile != "" {
			p.validateKeyPair("redis.tls", &t.CertFile, &t.KeyFile, false, ps)
		}
	}
}

func validateMinVersion(at, v string, ps *Problems) {
	if v != "1.2" && v != "1.3" {
		ps.add(at, `must be "1.2" or "1.3" (older versions are not accepted), got %q`, v)
	}
}

// validateKeyPair resolves and loads a certificate and key at YAML path at
// (at.cert_file, at.key_file).
func (p *Policy) validateKeyPair(at string, cert, key *string, serving bool, ps *Problems) {
	ok := true
	for _, f := range []struct {
		name string
		v    *string
	}{{"cert_file", cert}, {"key_file", key}} {
		if *f.v == "" {
			ps.add(at+"."+f.name, "is required")
			ok = false
			continue
		}
		*f.v = p.resolveFile(*f.v)
		if _, err := os.Stat(*f.v); err != nil {
			ps.add(at+"."+f.name, "cannot read %s: %v", *f.v, errors.Unwrap(err))
			ok = false
		}
	}
	if !ok {
		return
	}
	pair, err := tls.LoadX509KeyPair(*cert, *key)
	if err != nil {
		ps.add(at, "certificate %s and key %s: %v", *cert, *key, err)
		return
	}
	if serving && len(pair.Leaf.DNSNames) == 0 && len(pair.Leaf.IPAddresses) == 0 {
		ps.add(at+".cert_file", "certificate %s names no host (no DNS or IP subject alternative name): clients will refuse it", *cert)
	}
}

// validateCAFile resolves a PEM bundle of CA certificates and checks that
// it holds at least one.
func (p *Policy) validateCAFile(at string, file *string, ps *Problems) {
	*file = p.resolveFile(*file)
	if _, err := LoadCertPool(*file); err != nil {
		ps.add(at, "%v", err)
	}
}

func (p *Policy) resolveFile(f string) string {
	if !filepath.IsAbs(f) && p.Dir != "" {
		return filepath.Join(p.Dir, f)
	}
	return f
}

// LoadCertPool reads a PEM bundle of CA certificates.
func LoadCertPool(file string) (*x509.CertPool, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("cannot read %s: %v", file, errors.Unwrap(err))
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("%s holds no PEM certificate", file)
	}
	return pool, nil
}

// Same reports whether s and o configure the same listener: the TLS
// sections are compared by value, not by pointer.
func (s Server) Same(o Server) bool {
	st, ot := s.TLS, o.TLS
	s.TLS, o.TLS = nil, nil
	return s == o && equalPtr(st, ot)
}

// SameTLS reports whether r and o connect to Redis with the same TLS.
func (r *Redis) SameTLS(o *Redis) bool { return equalPtr(r.TLS, o.TLS) }

func equalPtr[T comparable](a, b *T) bool {
	return a == b || (a != nil && b != nil && *a == *b)
}
