package tlsconf

import (
	"bytes"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/testkit/tlstest"
)

// serial returns the serial of the certificate a new connection to ln is
// served, or the handshake's error.
func handshake(t *testing.T, ln net.Listener, cfg *tls.Config) (string, error) {
	t.Helper()
	c, err := tls.Dial("tcp", ln.Addr().String(), cfg)
	if err != nil {
		return "", err
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].SerialNumber.String(), nil
}

func serve(t *testing.T, s *Server) net.Listener {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", s.Config())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				_ = c.(*tls.Conn).Handshake()
				_, _ = io.Copy(io.Discard, c)
				c.Close()
			}()
		}
	}()
	return ln
}

func TestReload(t *testing.T) {
	ca := tlstest.NewCA(t, "reload")
	first := ca.Server(t)
	var logs bytes.Buffer
	s, err := NewServer(Files{CertFile: first.CertFile, KeyFile: first.KeyFile, MinVersion: tls.VersionTLS12},
		slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ln := serve(t, s)
	client := &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost"}
	want := first.Cert.SerialNumber.String()

	steps := []struct {
		name     string
		change   func()
		reloaded bool
		log      string
	}{
		{"unchanged files are not read again", func() {}, false, ""},
		{"a key that does not match is refused, the old pair kept", func() {
			other := ca.Server(t)
			data, _ := os.ReadFile(other.KeyFile)
			time.Sleep(10 * time.Millisecond) // a new mtime on coarse clocks
			if err := os.WriteFile(first.KeyFile, data, 0o600); err != nil {
				t.Fatal(err)
			}
		}, false, "private key does not match public key"},
		{"the same bad files are not tried again", func() {}, false, ""},
		{"a new matching pair is served", func() {
			time.Sleep(10 * time.Millisecond)
			want = ca.IssueTo(t, first.CertFile, first.KeyFile, false, "server", "localhost").Cert.SerialNumber.String()
		}, true, "certificate reloaded"},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			logs.Reset()
			st.change()
			if got := s.Reload(); got != st.reloaded {
				t.Fatalf("Reload() = %v, want %v; log: %s", got, st.reloaded, logs.String())
			}
			if st.log != "" && !strings.Contains(logs.String(), st.log) {
				t.Errorf("log %q does not say %q", logs.String(), st.log)
			}
			if st.log == "" && logs.Len() != 0 {
				t.Errorf("logged %q, want nothing", logs.String())
			}
			got, err := handshake(t, ln, client)
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("served serial %s, want %s", got, want)
			}
		})
	}
}

func TestWatchPicksUpRotation(t *testing.T) {
	ca := tlstest.NewCA(t, "watch")
	p := ca.Server(t)
	s, err := NewServer(Files{CertFile: p.CertFile, KeyFile: p.KeyFile, MinVersion: tls.VersionTLS12}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	s.Watch(10 * time.Millisecond)
	defer s.Close()
	time.Sleep(5 * time.Millisecond)
	next := ca.IssueTo(t, p.CertFile, p.KeyFile, false, "server", "localhost")
	for end := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if s.Certificate().SerialNumber.Cmp(next.Cert.SerialNumber) == 0 {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("still serving serial %s after 5s, want %s", s.Certificate().SerialNumber, next.Cert.SerialNumber)
		}
	}
}

func TestClientAuthAndVersions(t *testing.T) {
	ca := tlstest.NewCA(t, "mtls")
	other := tlstest.NewCA(t, "other")
	srv := ca.Server(t)
	good := ca.Client(t, "ops")
	stranger := other.Client(t, "stranger")
	tests := []struct {
		name    string
		files   Files
		client  *tls.Config
		wantErr string
	}{
		{"require: no certificate refused", Files{ClientAuth: tls.RequireAndVerifyClientCert}, &tls.Config{}, "certificate required"},
		{"require: a certificate of another CA refused", Files{ClientAuth: tls.RequireAndVerifyClientCert}, sendCert(stranger.TLS), "unknown certificate authority"},
		{"require: a good certificate accepted", Files{ClientAuth: tls.RequireAndVerifyClientCert}, &tls.Config{Certificates: []tls.Certificate{good.TLS}}, ""},
		{"request: no certificate accepted", Files{ClientAuth: tls.VerifyClientCertIfGiven}, &tls.Config{}, ""},
		{"request: a bad certificate refused", Files{ClientAuth: tls.VerifyClientCertIfGiven}, sendCert(stranger.TLS), "unknown certificate authority"},
		{"TLS 1.1 refused", Files{}, &tls.Config{MaxVersion: tls.VersionTLS11, MinVersion: tls.VersionTLS10}, "protocol version"},
		{"min 1.3 refuses 1.2", Files{MinVersion: tls.VersionTLS13}, &tls.Config{MaxVersion: tls.VersionTLS12}, "protocol version"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := tt.files
			f.CertFile, f.KeyFile = srv.CertFile, srv.KeyFile
			if f.MinVersion == 0 {
				f.MinVersion = tls.VersionTLS12
			}
			if f.ClientAuth != tls.NoClientCert {
				f.ClientCAFile = ca.CertFile
			}
			s, err := NewServer(f, nil)
			if err != nil {
				t.Fatal(err)
			}
			ln := serve(t, s)
			cfg := tt.client
			cfg.RootCAs, cfg.ServerName = ca.Pool(), "localhost"
			// A client learns of a refused certificate only at its first
			// read under TLS 1.3, so read.
			c, err := tls.Dial("tcp", ln.Addr().String(), cfg)
			if err == nil {
				_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
				_, err = c.Read(make([]byte, 1))
				c.Close()
				if ne, ok := err.(net.Error); ok && ne.Timeout() {
					err = nil // accepted: the server waits for a request
				}
			}
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("err = %v, want one saying %q", err, tt.wantErr)
			}
		})
	}
}

// sendCert sends c whatever CAs the server names (a client given
// Certificates sends none that the server's CAs did not sign).
func sendCert(c tls.Certificate) *tls.Config {
	return &tls.Config{GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &c, nil }}
}

func TestNewServerErrors(t *testing.T) {
	ca := tlstest.NewCA(t, "errs")
	a, b := ca.Server(t), ca.Server(t)
	tests := []struct {
		name  string
		files Files
		want  string
	}{
		{"missing cert", Files{CertFile: a.CertFile + ".nope", KeyFile: a.KeyFile}, "no such file"},
		{"mismatched pair", Files{CertFile: a.CertFile, KeyFile: b.KeyFile}, "private key does not match"},
		{"CA file without certificates", Files{CertFile: a.CertFile, KeyFile: a.KeyFile, ClientCAFile: a.KeyFile, ClientAuth: tls.RequireAndVerifyClientCert}, "holds no PEM certificate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewServer(tt.files, nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want one saying %q", err, tt.want)
			}
		})
	}
}
