package config

import (
	"crypto/tls"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/gateway/internal/testkit/tlstest"
)

func TestTLS(t *testing.T) {
	ca := tlstest.NewCA(t, "config")
	srv := ca.Server(t)
	dir := filepath.Dir(srv.CertFile)
	rel := filepath.Base(srv.CertFile) // resolved against the policy's directory
	adminEnv := map[string]string{"TOLLGATE_ADMIN_TOKEN": "t"}
	tests := []struct {
		name  string
		yaml  string
		check func(t *testing.T, p *Policy)
	}{
		{"absent: plain TCP", "", func(t *testing.T, p *Policy) {
			if p.Server.TLS != nil || p.Admin.TLS != nil || p.Redis.TLS != nil {
				t.Errorf("TLS set: %+v %+v %+v", p.Server.TLS, p.Admin.TLS, p.Redis.TLS)
			}
		}},
		{"server: relative paths, default min version", fmt.Sprintf("server: {tls: {cert_file: %s, key_file: %s}}\n", rel, srv.KeyFile),
			func(t *testing.T, p *Policy) {
				if got := p.Server.TLS; got.CertFile != srv.CertFile || got.MinVersion != "1.2" || TLSVersion(got.MinVersion) != tls.VersionTLS12 {
					t.Errorf("got %+v", got)
				}
			}},
		{"admin: mutual TLS", fmt.Sprintf("admin: {listen: 127.0.0.1:0, tls: {cert_file: %s, key_file: %s, min_version: \"1.3\", client_ca_file: %s, client_auth: require}}\n", srv.CertFile, srv.KeyFile, ca.CertFile),
			func(t *testing.T, p *Policy) {
				got := p.Admin.TLS
				if TLSVersion(got.MinVersion) != tls.VersionTLS13 || ClientAuthType(got.ClientAuth) != tls.RequireAndVerifyClientCert {
					t.Errorf("got %+v", got)
				}
			}},
		{"admin: client_auth defaults to none", fmt.Sprintf("admin: {listen: 127.0.0.1:0, tls: {cert_file: %s, key_file: %s}}\n", srv.CertFile, srv.KeyFile),
			func(t *testing.T, p *Policy) {
				if got := p.Admin.TLS.ClientAuth; got != ClientAuthNone || ClientAuthType(got) != tls.NoClientCert {
					t.Errorf("client_auth %q", got)
				}
			}},
		{"redis: empty tls is TLS with the system's roots", "redis: {addrs: [\"r:6380\"], tls: {}}\n",
			func(t *testing.T, p *Policy) {
				if p.Redis.TLS == nil || *p.Redis.TLS != (RedisTLS{}) {
					t.Errorf("got %+v", p.Redis.TLS)
				}
			}},
		{"redis", fmt.Sprintf("redis: {addrs: [\"r:6380\"], tls: {ca_file: %s, server_name: redis.internal}}\n", ca.CertFile),
			func(t *testing.T, p *Policy) {
				if got := p.Redis.TLS; got.CAFile != ca.CertFile || got.ServerName != "redis.internal" || got.InsecureSkipVerify {
					t.Errorf("got %+v", got)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := ParseIn([]byte(valid+tt.yaml), dir, env(adminEnv))
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, p)
		})
	}
}

func TestTLSProblems(t *testing.T) {
	ca := tlstest.NewCA(t, "config")
	a, b := ca.Server(t), ca.Server(t)
	client := ca.Client(t, "c") // names no host
	missing := filepath.Join(t.TempDir(), "none.pem")
	notPEM := filepath.Join(t.TempDir(), "x.pem")
	if err := os.WriteFile(notPEM, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	adminEnv := map[string]string{"TOLLGATE_ADMIN_TOKEN": "t"}
	tests := []struct{ name, yaml, want string }{
		{"cert required", fmt.Sprintf("server: {tls: {key_file: %s}}\n", a.KeyFile), "server.tls.cert_file: is required"},
		{"missing file", fmt.Sprintf("server: {tls: {cert_file: %s, key_file: %s}}\n", missing, a.KeyFile), "server.tls.cert_file: cannot read " + missing + ": no such file"},
		{"pair does not match", fmt.Sprintf("server: {tls: {cert_file: %s, key_file: %s}}\n", a.CertFile, b.KeyFile), "server.tls: certificate " + a.CertFile + " and key " + b.KeyFile + ": tls: private key does not match public key"},
		{"not PEM", fmt.Sprintf("server: {tls: {cert_file: %s, key_file: %s}}\n", notPEM, a.KeyFile), "failed to find any PEM data in certificate input"},
		{"certificate names no host", fmt.Sprintf("server: {tls: {cert_file: %s, key_file: %s}}\n", client.CertFile, client.KeyFile), "server.tls.cert_file: certificate " + client.CertFile + " names no host"},
		{"TLS 1.1", fmt.Sprintf("server: {tls: {cert_file: %s, key_file: %s, min_version: \"1.1\"}}\n", a.CertFile, a.KeyFile), `server.tls.min_version: must be "1.2" or "1.3" (older versions are not accepted), got "1.1"`},
		{"unknown field", fmt.Sprintf("server: {tls: {cert: %s}}\n", a.CertFile), "server.tls.cert (line 9): unknown field (known: cert_file, key_file, min_version)"},
		{"admin without listen", fmt.Sprintf("admin: {tls: {cert_file: %s, key_file: %s}}\n", a.CertFile, a.KeyFile), "admin.tls: needs admin.listen"},
		{"client auth without CA", fmt.Sprintf("admin: {listen: 127.0.0.1:0, tls: {cert_file: %s, key_file: %s, client_auth: require}}\n", a.CertFile, a.KeyFile), "admin.tls.client_ca_file: is required with client_auth require"},
		{"CA without client auth", fmt.Sprintf("admin: {listen: 127.0.0.1:0, tls: {cert_file: %s, key_file: %s, client_ca_file: %s}}\n", a.CertFile, a.KeyFile, ca.CertFile), "admin.tls.client_ca_file: is set but client_auth is none"},
		{"client CA not PEM", fmt.Sprintf("admin: {listen: 127.0.0.1:0, tls: {cert_file: %s, key_file: %s, client_ca_file: %s, client_auth: request}}\n", a.CertFile, a.KeyFile, notPEM), "admin.tls.client_ca_file: " + notPEM + " holds no PEM certificate"},
		{"unknown client auth", fmt.Sprintf("admin: {listen: 127.0.0.1:0, tls: {cert_file: %s, key_file: %s, client_auth: optional}}\n", a.CertFile, a.KeyFile), `admin.tls.client_auth: must be none, request or require, got "optional"`},
		{"redis CA missing", fmt.Sprintf("redis: {addrs: [\"r:6380\"], tls: {ca_file: %s}}\n", missing), "redis.tls.ca_file: cannot read " + missing},
		{"redis cert without key", fmt.Sprintf("redis: {addrs: [\"r:6380\"], tls: {cert_file: %s}}\n", client.CertFile), "redis.tls.key_file: is required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(valid+tt.yaml), env(adminEnv))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v\nwant %q", err, tt.want)
			}
		})
	}
}

func TestServerSame(t *testing.T) {
	a := func(min string) *ServerTLS { return &ServerTLS{CertFile: "c", KeyFile: "k", MinVersion: min} }
	tests := []struct {
		name string
		x, y Server
		want bool
	}{
		{"no TLS", Server{Listen: "a"}, Server{Listen: "a"}, true},
		{"equal TLS, other pointers", Server{TLS: a("1.2")}, Server{TLS: a("1.2")}, true},
		{"TLS changed", Server{TLS: a("1.2")}, Server{TLS: a("1.3")}, false},
		{"TLS added", Server{}, Server{TLS: a("1.2")}, false},
		{"another field changed", Server{Listen: "a", TLS: a("1.2")}, Server{Listen: "b", TLS: a("1.2")}, false},
	}
	for _, tt := range tests {
		if got := tt.x.Same(tt.y); got != tt.want {
			t.Errorf("%s: Same = %v, want %v", tt.name, got, tt.want)
		}
	}
}
