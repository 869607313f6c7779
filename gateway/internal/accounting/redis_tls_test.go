package accounting

import (
	"context"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/tollgate/tollgate/gateway/internal/config"
	"github.com/tollgate/tollgate/gateway/internal/testkit/redistest"
	"github.com/tollgate/tollgate/gateway/internal/testkit/tlstest"
)

// TestRedisClientCertificateRotated: the accounting of a policy with
// redis.tls watches the client certificate's files. After the files are
// rotated to a certificate of a CA the server alone now trusts, and the
// server drops its connections, the running gateway's Redis commands
// succeed again within the reload interval, without a restart.
func TestRedisClientCertificateRotated(t *testing.T) {
	t.Parallel()
	srvCA, clientCA, nextCA := tlstest.NewCA(t, "redis"), tlstest.NewCA(t, "clients"), tlstest.NewCA(t, "clients-next")
	srvCert := srvCA.Server(t)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	clientCA.IssueTo(t, certFile, keyFile, true, "tollgate")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tlsPort := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
	srv := redistest.Start(t, "--tls-port", tlsPort, "--tls-cert-file", srvCert.CertFile, "--tls-key-file", srvCert.KeyFile,
		"--tls-ca-cert-file", clientCA.CertFile, "--tls-auth-clients", "yes")
	yaml := "version: 1\nupstreams: [{name: a, base_url: \"http://127.0.0.1:9/v1/\"}]\nroutes: [{models: [m], upstream: a}]\n" +
		"call_log: {enabled: false}\nstore: {kind: memory}\n" +
		"redis: {addrs: [\"127.0.0.1:" + tlsPort + "\"], timeout: 1s, tls: {ca_file: " + srvCA.CertFile +
		", cert_file: " + certFile + ", key_file: " + keyFile + ", server_name: localhost}}\n"
	p, err := config.Parse([]byte(yaml), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(p, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(context.Background())
	set := func() error {
		return a.Redis.Do(context.Background(), func(b rueidis.Builder) rueidis.Completed { return b.Set().Key("k").Value("v").Build() }).Error()
	}
	if err := set(); err != nil {
		t.Fatal(err)
	}

	if got, err := srv.Do("CONFIG", "SET", "tls-ca-cert-file", nextCA.CertFile); err != nil || got != "OK" {
		t.Fatalf("CONFIG SET = %q, %v", got, err)
	}
	time.Sleep(10 * time.Millisecond) // a new mtime on coarse clocks
	nextCA.IssueTo(t, certFile, keyFile, true, "tollgate")
	if got, err := srv.Do("CLIENT", "KILL", "TYPE", "normal"); err != nil || got == "0" {
		t.Fatalf("CLIENT KILL = %q, %v", got, err)
	}
	deadline := time.Now().Add(15 * time.Second) // the reload polls every second
	for err := set(); err != nil; err = set() {
		if time.Now().After(deadline) {
			t.Fatalf("Redis commands still fail 15s after the rotation: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
