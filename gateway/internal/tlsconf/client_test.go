package tlsconf

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/tollgate/tollgate/gateway/internal/config"
	"github.com/tollgate/tollgate/gateway/internal/redisx"
	"github.com/tollgate/tollgate/gateway/internal/testkit/redistest"
	"github.com/tollgate/tollgate/gateway/internal/testkit/tlstest"
)

// TestRedisReloadedFiles runs a redis-server that requires client
// certificates and rotates, under a running redisx.Client, first the
// client certificate and then the server's certificate with the CA bundle
// that verifies it. Each time the server is switched first (CONFIG SET),
// so a connection made with the files as first loaded is refused — the
// test checks that it is — and after the reload and a forced reconnect
// (CLIENT KILL) the same Client's commands succeed: its new connections
// present the new certificate and trust the new CA, without a restart.
func TestRedisReloadedFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srvCA, clientCA := tlstest.NewCA(t, "redis-server"), tlstest.NewCA(t, "redis-clients")
	srvCert := srvCA.Server(t)
	// The files the policy names, rewritten in place by the rotations.
	caFile := filepath.Join(dir, "ca.crt")
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	replaceFile(t, srvCA.CertFile, caFile)
	first := clientCA.IssueTo(t, certFile, keyFile, true, "tollgate")

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tlsPort := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	srv := redistest.Start(t,
		"--tls-port", strconv.Itoa(tlsPort),
		"--tls-cert-file", srvCert.CertFile,
		"--tls-key-file", srvCert.KeyFile,
		"--tls-ca-cert-file", clientCA.CertFile,
		"--tls-auth-clients", "yes",
	)
	addr := "127.0.0.1:" + strconv.Itoa(tlsPort)
	configSet := func(kv ...string) {
		t.Helper()
		if got, err := srv.Do(append([]string{"CONFIG", "SET"}, kv...)...); err != nil || got != "OK" {
			t.Fatalf("CONFIG SET %v = %q, %v", kv, got, err)
		}
	}

	files, err := NewClient(&config.RedisTLS{CAFile: caFile, CertFile: certFile, KeyFile: keyFile, ServerName: "localhost"},
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	c, err := redisx.New(redisx.Options{Addrs: []string{addr}, TLSFor: files.Config, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	set := func(v string) error {
		return c.Do(context.Background(), func(b rueidis.Builder) rueidis.Completed { return b.Set().Key("k").Value(v).Build() }).Error()
	}
	if err := set("first"); err != nil {
		t.Fatal(err)
	}

	// rotate switches the server with serverSide, checks that the files
	// as loaded no longer get a connection (an error saying refusal), rewrites them with clientSide
	// and reloads, then forces the Client to reconnect and waits for a
	// command to succeed on a new connection.
	rotate := func(name string, serverSide, clientSide func(), refusal string) {
		t.Helper()
		serverSide()
		if err := pingOnce(addr, files.Config()); err == nil || !strings.Contains(err.Error(), refusal) {
			t.Fatalf("%s: with the files as loaded before the rotation a connection gets %v, want a refusal saying %q", name, err, refusal)
		}
		time.Sleep(10 * time.Millisecond) // a new mtime on coarse clocks
		clientSide()
		if !files.Reload() {
			t.Fatalf("%s: the rotated files were not reloaded", name)
		}
		if err := pingOnce(addr, files.Config()); err != nil {
			t.Fatalf("%s: a connection with the reloaded files: %v", name, err)
		}
		killed, err := srv.Do("CLIENT", "KILL", "TYPE", "normal")
		if err != nil || killed == "0" {
			t.Fatalf("%s: CLIENT KILL = %q, %v: the Client's connection was not closed", name, killed, err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for err := set(name); err != nil; err = set(name) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: no command succeeded within 10s of the reconnect: %v", name, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
		if got, err := srv.Do("GET", "k"); err != nil || got != name {
			t.Fatalf("%s: GET k = %q, %v", name, got, err)
		}
	}

	// 1. The client certificate: the server now trusts only a new client
	// CA, which signs the rotated certificate.
	newClientCA := tlstest.NewCA(t, "redis-clients-2")
	var second tlstest.Pair
	rotate("client certificate",
		func() { configSet("tls-ca-cert-file", newClientCA.CertFile) },
		func() { second = newClientCA.IssueTo(t, certFile, keyFile, true, "tollgate") },
		"") // a reset or an alert, depending on timing: any refusal
	if got := files.Certificate().SerialNumber; got.Cmp(second.Cert.SerialNumber) != 0 || got.Cmp(first.Cert.SerialNumber) == 0 {
		t.Fatalf("client certificate serial %s, want the rotated %s", got, second.Cert.SerialNumber)
	}

	// 2. The CA bundle: the server now presents a certificate of a new CA.
	newSrvCA := tlstest.NewCA(t, "redis-server-2")
	newSrvCert := newSrvCA.Server(t)
	rotate("CA bundle",
		func() { configSet("tls-cert-file", newSrvCert.CertFile, "tls-key-file", newSrvCert.KeyFile) },
		func() { replaceFile(t, newSrvCA.CertFile, caFile) },
		"certificate signed by unknown authority")
}

// pingOnce makes one TLS connection to addr with cfg and sends PING: a
// server that refuses the client's certificate says so at the first read
// under TLS 1.3, not during the client's side of the handshake.
func pingOnce(addr string, cfg *tls.Config) error {
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "+PONG\r\n" {
		return fmt.Errorf("PING answered %q", line)
	}
	return nil
}

// replaceFile replaces dst with src's content by a rename, as a secret
// volume's update does.
func replaceFile(t *testing.T, src, dst string) {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	tmp := dst + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		t.Fatal(err)
	}
}

// TestClientConfigDuringReloads: Config, called from several goroutines
// while the files are rotated and reloaded over and over, always returns a
// CA pool and a client certificate of the same load — rotation g's CA file
// and rotation g's certificate, which that CA signed — never one of each.
// It holds because a load publishes both in one atomic pointer store and
// Config reads the pointer once.
func TestClientConfigDuringReloads(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.crt")
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	cas := make([]*tlstest.CA, 4)
	for i := range cas {
		cas[i] = tlstest.NewCA(t, "gen"+strconv.Itoa(i))
	}
	rotateTo := func(g int) {
		replaceFile(t, cas[g].CertFile, caFile)
		cas[g].IssueTo(t, certFile, keyFile, true, "gen"+strconv.Itoa(g))
	}
	rotateTo(0)
	c, err := NewClient(&config.RedisTLS{CAFile: caFile, CertFile: certFile, KeyFile: keyFile}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var bad []string
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				cfg := c.Config()
				pair, err := cfg.GetClientCertificate(nil)
				if err != nil {
					panic(err)
				}
				cn := pair.Leaf.Subject.CommonName
				if _, err := pair.Leaf.Verify(x509VerifyClient(cfg)); err != nil {
					mu.Lock()
					bad = append(bad, fmt.Sprintf("certificate %s with a pool that does not verify it: %v", cn, err))
					mu.Unlock()
				}
			}
		})
	}
	reloads := 0
	for g := 1; g <= 20; g++ {
		time.Sleep(2 * time.Millisecond) // a new mtime on coarse clocks
		rotateTo(g % len(cas))
		if c.Reload() {
			reloads++
		}
	}
	close(stop)
	wg.Wait()
	if len(bad) > 0 {
		t.Fatalf("%d inconsistent configurations, first: %s", len(bad), bad[0])
	}
	if reloads < 15 {
		t.Fatalf("%d reloads of 20 rotations", reloads)
	}
}

func x509VerifyClient(cfg *tls.Config) x509.VerifyOptions {
	return x509.VerifyOptions{Roots: cfg.RootCAs, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
}
