// Package tlstest makes certificate authorities and the certificates they
// sign, as PEM files in a test's temporary directory, for tests that run
// real TLS servers and clients (the gateway's listeners, Redis, Postgres).
//
// Keys are ECDSA P-256 (fast to make); every certificate gets a random
// serial, so a test can tell a rotated certificate from the one before.
package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority owned by a test.
type CA struct {
	Cert     *x509.Certificate
	CertFile string // the CA certificate, PEM
	key      *ecdsa.PrivateKey
	dir      string
}

// Pair is a certificate and its key, on disk and parsed.
type Pair struct {
	CertFile, KeyFile string
	Cert              *x509.Certificate
	TLS               tls.Certificate
}

// NewCA makes a CA named name and writes its certificate to
// <tempdir>/<name>-ca.pem.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: name + " test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatalf("tlstest: %v", err)
	}
	cert, _ := x509.ParseCertificate(der)
	dir := t.TempDir()
	ca := &CA{Cert: cert, key: key, dir: dir, CertFile: filepath.Join(dir, name+"-ca.pem")}
	writeFile(t, ca.CertFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	return ca
}

// Pool is a pool holding the CA's certificate.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// Server issues a server certificate for hosts (DNS names or IP
// addresses; default localhost and 127.0.0.1) into new files.
func (ca *CA) Server(t testing.TB, hosts ...string) Pair {
	t.Helper()
	f, err := os.CreateTemp(ca.dir, "server-*.pem")
	if err != nil {
		t.Fatalf("tlstest: %v", err)
	}
	f.Close()
	return ca.IssueTo(t, f.Name(), f.Name()+".key", false, "server", hosts...)
}

// Client issues a client certificate with common name cn into new files.
func (ca *CA) Client(t testing.TB, cn string) Pair {
	t.Helper()
	f, err := os.CreateTemp(ca.dir, "client-*.pem")
	if err != nil {
		t.Fatalf("tlstest: %v", err)
	}
	f.Close()
	return ca.IssueTo(t, f.Name(), f.Name()+".key", true, cn)
}

// IssueTo issues a certificate (a client's when client, else a server's
// for hosts) and writes it to certFile and keyFile, each replaced by a
// rename as a secret volume's update would.
func (ca *CA) IssueTo(t testing.TB, certFile, keyFile string, client bool, cn string, hosts ...string) Pair {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: serial(t),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if client {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	} else {
		if len(hosts) == 0 {
			hosts = []string{"localhost", "127.0.0.1"}
		}
		for _, h := range hosts {
			if ip := net.ParseIP(h); ip != nil {
				tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			} else {
				tmpl.DNSNames = append(tmpl.DNSNames, h)
			}
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatalf("tlstest: %v", err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatalf("tlstest: %v", err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})
	writeFile(t, certFile, certPEM)
	writeFile(t, keyFile, keyPEM)
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatalf("tlstest: %v", err)
	}
	return Pair{CertFile: certFile, KeyFile: keyFile, Cert: pair.Leaf, TLS: pair}
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("tlstest: %v", err)
	}
	return key
}

func serial(t testing.TB) *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		t.Fatalf("tlstest: %v", err)
	}
	return n
}

// writeFile replaces path with data through a rename, so a reader sees
// the old file or the new one, never half of one.
func writeFile(t testing.TB, path string, data []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatalf("tlstest: %v", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatalf("tlstest: %v", err)
	}
}
