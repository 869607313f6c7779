package e2e

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/config"
	"github.com/tollgate/tollgate/gateway/internal/proxy"
	"github.com/tollgate/tollgate/gateway/internal/testkit/mockllm"
	"github.com/tollgate/tollgate/gateway/internal/testkit/tlstest"
	"github.com/tollgate/tollgate/gateway/internal/tlsconf"
)

// TestTLSListeners runs the tollgate binary with both listeners under TLS
// (the admin one requiring a client certificate) and checks what a
// security review asks of them: requests complete over TLS with the
// gateway's CA, TLS 1.1 and plain HTTP are refused, a rotated certificate
// is served to new connections without a restart, and the admin listener
// refuses a client without a certificate of its client CA.
func TestTLSListeners(t *testing.T) {
	_, mockURL := startMock(t, mockllm.Config{})
	ca := tlstest.NewCA(t, "gateway")
	clientCA := tlstest.NewCA(t, "ops")
	dir := t.TempDir()
	srvCert := ca.IssueTo(t, filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), false, "gateway", "localhost", "127.0.0.1")
	adminCert := ca.Server(t)
	opsCert := clientCA.Client(t, "ops")
	strangerCert := tlstest.NewCA(t, "stranger").Client(t, "ops")

	adminAddr := freeAddr(t)
	pol := policy(mockURL, "") + fmt.Sprintf(`
admin:
  listen: %s
  tls:
    cert_file: %s
    key_file: %s
    client_ca_file: %s
    client_auth: require
`, adminAddr, adminCert.CertFile, adminCert.KeyFile, clientCA.CertFile)
	pol = strings.Replace(pol, "server:\n", "server:\n  tls: {cert_file: tls.crt, key_file: tls.key, min_version: \"1.2\"}\n", 1)
	pf := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(pf, []byte(pol), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	cmd := exec.Command(filepath.Join(binDir, "tollgate"), "serve", "-policy", pf, "-listen", addr)
	cmd.Env = append(os.Environ(), "TOLLGATE_ADMIN_TOKEN=admintoken")
	// The process writes its log while the test reads it: both under the
	// writer's lock.
	logs := &syncWriter{w: &bytes.Buffer{}}
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })

	client := func(cfg *tls.Config) *http.Client {
		cfg.RootCAs = ca.Pool()
		return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg, DisableKeepAlives: true}}
	}
	// The client offers h2 first: the gateway must pick http/1.1.
	good := client(&tls.Config{NextProtos: []string{"h2", "http/1.1"}})
	url := "https://" + addr
	for end := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		resp, err := good.Get(url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(end) {
			t.Fatalf("gateway not ready over TLS (%v); logs:\n%s", err, logs.String())
		}
	}

	t.Run("chat completion over TLS", func(t *testing.T) {
		for i := range 3 {
			resp, err := good.Post(url+"/v1/chat/completions", "application/json",
				strings.NewReader(`{"model":"mock-1","messages":[{"role":"user","content":"hello"}]}`))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || !strings.Contains(string(b), `"chat.completion"`) {
				t.Fatalf("request %d: %d %s", i, resp.StatusCode, b)
			}
			if resp.TLS == nil || resp.TLS.NegotiatedProtocol != "http/1.1" {
				t.Fatalf("request %d: TLS state %+v; want ALPN http/1.1", i, resp.TLS)
			}
		}
	})

	refusals := []struct {
		name string
		cfg  *tls.Config
		want string
	}{
		{"TLS 1.1 refused", &tls.Config{MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11}, "protocol version"},
		{"a client without the gateway's CA refuses it", &tls.Config{}, "certificate signed by unknown authority"},
	}
	for _, tt := range refusals {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			if tt.name != refusals[1].name {
				cfg.RootCAs = ca.Pool()
			}
			_, err := tls.Dial("tcp", addr, cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want one saying %q", err, tt.want)
			}
		})
	}

	t.Run("plain HTTP refused", func(t *testing.T) {
		resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + addr + "/readyz")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 {
				t.Fatalf("plain HTTP answered 200: %s", b)
			}
		}
	})

	t.Run("rotated certificate served without a restart", func(t *testing.T) {
		next := ca.IssueTo(t, srvCert.CertFile, srvCert.KeyFile, false, "gateway", "localhost", "127.0.0.1")
		if next.Cert.SerialNumber.Cmp(srvCert.Cert.SerialNumber) == 0 {
			t.Fatal("the new certificate has the old serial")
		}
		var seen string
		for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
			c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: ca.Pool()})
			if err != nil {
				t.Fatal(err)
			}
			seen = c.ConnectionState().PeerCertificates[0].SerialNumber.String()
			c.Close()
			if seen == next.Cert.SerialNumber.String() {
				break
			}
		}
		if seen != next.Cert.SerialNumber.String() {
			t.Fatalf("still served serial %s, want %s; logs:\n%s", seen, next.Cert.SerialNumber, logs.String())
		}
		if !strings.Contains(logs.String(), "tls: certificate reloaded") {
			t.Errorf("no reload logged:\n%s", logs.String())
		}
		// Requests go on, on the new certificate.
		resp, err := good.Get(url + "/readyz")
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("after rotation: %v %v", resp, err)
		}
		resp.Body.Close()
	})

	adminURL := "https://" + adminAddr + "/metrics"
	admin := []struct {
		name    string
		cfg     *tls.Config
		status  int
		wantErr string
	}{
		{"admin: no client certificate refused", &tls.Config{}, 0, "certificate required"},
		{"admin: a certificate of another CA refused", &tls.Config{GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return &strangerCert.TLS, nil
		}}, 0, "unknown certificate authority"},
		{"admin: the ops certificate accepted", &tls.Config{Certificates: []tls.Certificate{opsCert.TLS}}, 200, ""},
	}
	for _, tt := range admin {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := client(tt.cfg).Get(adminURL)
			if tt.wantErr != "" {
				if err == nil {
					resp.Body.Close()
					t.Fatalf("answered %d, want a refused handshake", resp.StatusCode)
				}
				if !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one saying %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.status || !strings.Contains(string(b), "# TYPE") {
				t.Fatalf("%d %.200s", resp.StatusCode, b)
			}
		})
	}
}

// startTLSGateway runs the gateway in-process with its public listener
// under TLS (a certificate of ca for 127.0.0.1).
func startTLSGateway(t *testing.T, policyYAML string, ca *tlstest.CA) (*proxy.Server, string) {
	t.Helper()
	p, err := config.Parse([]byte(policyYAML), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatalf("policy: %v", err)
	}
	pair := ca.Server(t, "127.0.0.1")
	ts, err := tlsconf.NewServer(tlsconf.Files{CertFile: pair.CertFile, KeyFile: pair.KeyFile, MinVersion: tls.VersionTLS12}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	srv, err := proxy.New(p, log)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { srv.ServeTLS(ln, ts.Config()); close(done) }()
	t.Cleanup(func() {
		srv.Shutdown(0, 2*time.Second)
		<-done
	})
	return srv, ln.Addr().String()
}

// TestTLSStreamAndDisconnect streams a reply over TLS to its end, then
// closes a TLS client mid-stream: the disconnect watch sees the socket
// under TLS, so the upstream is canceled at once, not at the next write.
func TestTLSStreamAndDisconnect(t *testing.T) {
	ca := tlstest.NewCA(t, "stream")
	mock, mockURL := startMock(t, mockllm.Config{})
	closed := make(chan time.Time, 1)
	mock.SetOnClose(func(_ string, at time.Time) {
		select {
		case closed <- at:
		default:
		}
	})
	srv, addr := startTLSGateway(t, policy(mockURL, ""), ca)
	dial := func() (*tls.Conn, *bufio.Reader) {
		c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: ca.Pool()})
		if err != nil {
			t.Fatal(err)
		}
		return c, bufio.NewReader(c)
	}
	send := func(c *tls.Conn, hdr string) {
		body := `{"model":"mock-1","stream":true,"messages":[{"role":"user","content":"hi"}]}`
		fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n%sContent-Length: %d\r\n\r\n%s", hdr, len(body), body)
	}

	c, br := dial()
	send(c, "X-Mock-Tokens: 5\r\n")
	var got strings.Builder
	for !strings.Contains(got.String(), "data: [DONE]") {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the stream: %v; so far:\n%s", err, got.String())
		}
		got.WriteString(line)
	}
	if n := strings.Count(got.String(), `"content":"tok`); n != 5 {
		t.Fatalf("%d content events, want 5:\n%s", n, got.String())
	}
	c.Close()
	waitFor(t, func() bool { return srv.InFlight() == 0 })
	select {
	case <-closed: // a completed request leaves its upstream connection pooled
		t.Fatal("the upstream saw a close for a completed stream")
	default:
	}

	c, br = dial()
	send(c, "X-Mock-Inter-Token: 2s\r\nX-Mock-Tokens: 5\r\n")
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the stream: %v", err)
		}
		if strings.Contains(line, `"content":"tok0`) {
			break
		}
	}
	time.Sleep(50 * time.Millisecond)
	// Well before the next token (2 s away), which is when a write would
	// notice; the bound leaves room for a loaded machine.
	closeAndWaitUpstream(t, c, closed, 500*time.Millisecond, 1500*time.Millisecond)
	waitFor(t, func() bool { return srv.InFlight() == 0 })
}
