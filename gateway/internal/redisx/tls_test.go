package redisx

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/tollgate/tollgate/gateway/internal/testkit/redistest"
	"github.com/tollgate/tollgate/gateway/internal/testkit/tlstest"
)

// TestTLSAndACL runs a real redis-server with a TLS port (a certificate of
// a CA the test makes) and an ACL user, and connects to the TLS port only:
// the right user and CA work, a wrong password or a CA that did not sign
// the server's certificate stop Connect at once with ErrRejected and say
// why, rather than retrying as for a Redis that is down.
func TestTLSAndACL(t *testing.T) {
	ca, _, addr := startTLSRedis(t, "--user", "tollgate", "on", ">s3cret-pass", "~*", "&*", "+@all")
	other := tlstest.NewCA(t, "other")

	tests := []struct {
		name     string
		user     string
		password string
		tls      *tls.Config
		wantErr  string // "" connects
		rejected bool
	}{
		{"ACL user over TLS", "tollgate", "s3cret-pass", &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost"}, "", false},
		{"wrong password", "tollgate", "wrong", &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost"}, "WRONGPASS", true},
		{"unknown user", "nobody", "s3cret-pass", &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost"}, "WRONGPASS", true},
		{"a CA that did not sign the server", "tollgate", "s3cret-pass", &tls.Config{RootCAs: other.Pool(), ServerName: "localhost"}, "certificate signed by unknown authority", true},
		{"a name the certificate does not carry", "tollgate", "s3cret-pass", &tls.Config{RootCAs: ca.Pool(), ServerName: "redis.elsewhere"}, "redis.elsewhere", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := New(Options{Addrs: []string{addr}, Username: tt.user, Password: tt.password, TLS: tt.tls})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			start := time.Now()
			err = c.Connect(ctxTimeout(t, 5*time.Second))
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				ctx := context.Background()
				if err := c.Do(ctx, func(b rueidis.Builder) rueidis.Completed { return b.Set().Key("k").Value("v").Build() }).Error(); err != nil {
					t.Fatal(err)
				}
				got, err := c.Do(ctx, func(b rueidis.Builder) rueidis.Completed { return b.Get().Key("k").Build() }).ToString()
				if err != nil || got != "v" {
					t.Fatalf("GET = %q, %v", got, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Connect = %v, want an error saying %q", err, tt.wantErr)
			}
			if errors.Is(err, ErrRejected) != tt.rejected {
				t.Errorf("errors.Is(%v, ErrRejected) = %v, want %v", err, !tt.rejected, tt.rejected)
			}
			if strings.Contains(err.Error(), tt.password) && tt.password != "" {
				t.Errorf("the error shows the password: %v", err)
			}
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("Connect took %v: a rejection should end it at the first attempt", d)
			}
		})
	}
}

// startTLSRedis starts a redis-server with args and a TLS port as well as
// its plain one, serving a certificate for localhost of a CA it makes.
// It returns the CA, the server and the TLS port's address.
func startTLSRedis(t *testing.T, args ...string) (ca *tlstest.CA, srv *redistest.Server, tlsAddr string) {
	t.Helper()
	ca = tlstest.NewCA(t, "redis")
	srvCert := ca.Server(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tlsPort := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	srv = redistest.Start(t, append([]string{
		"--tls-port", strconv.Itoa(tlsPort),
		"--tls-cert-file", srvCert.CertFile,
		"--tls-key-file", srvCert.KeyFile,
		"--tls-ca-cert-file", ca.CertFile,
		"--tls-auth-clients", "no",
	}, args...)...)
	return ca, srv, "127.0.0.1:" + strconv.Itoa(tlsPort)
}
