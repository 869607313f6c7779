package googleauth

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/auth"
)

// fakeProvider hands out tokens tok-1, tok-2, ... valid for ttl; calls
// after the first wait for release to be closed.
type fakeProvider struct {
	calls   atomic.Int32
	ttl     time.Duration
	release chan struct{}
}

func (f *fakeProvider) Token(ctx context.Context) (*auth.Token, error) {
	n := f.calls.Add(1)
	if n > 1 && f.release != nil {
		select {
		case <-f.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return &auth.Token{Value: "tok-" + strconv.Itoa(int(n)), Type: "Bearer", Expiry: time.Now().Add(f.ttl)}, nil
}

func TestCachedToken(t *testing.T) {
	f := &fakeProvider{ttl: time.Hour}
	s, err := New(Options{TokenProvider: f})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		got, err := s.AppendHeader([]byte("X: y\r\n"), time.Now())
		if err != nil || string(got) != "X: y\r\nAuthorization: Bearer tok-1\r\n" {
			t.Fatalf("call %d: %q, %v", i, got, err)
		}
	}
	if n := f.calls.Load(); n != 1 {
		t.Fatalf("%d token fetches, want 1", n)
	}
}

func TestStaleTokenDoesNotBlock(t *testing.T) {
	// A token within the refresh window (the library refreshes 3m45s
	// before expiry) is handed out while the refresh runs; the refresh
	// here hangs until released.
	f := &fakeProvider{ttl: 2 * time.Minute, release: make(chan struct{})}
	s, err := New(Options{TokenProvider: f})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.AppendHeader(nil, time.Now()); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for range 50 {
		got, err := s.AppendHeader(nil, time.Now())
		if err != nil || string(got) != "Authorization: Bearer tok-1\r\n" {
			t.Fatalf("%q, %v", got, err)
		}
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("50 calls with a refresh in flight took %v", d)
	}
	for wait := time.Now().Add(2 * time.Second); f.calls.Load() < 2 && time.Now().Before(wait); {
		time.Sleep(time.Millisecond)
	}
	if n := f.calls.Load(); n != 2 {
		t.Fatalf("%d fetches, want 2 (the first and one background refresh)", n)
	}
	close(f.release)
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, _ := s.AppendHeader(nil, time.Now())
		// Every token here is born inside the refresh window, so each
		// refresh starts another: any later token will do.
		if strings.HasPrefix(string(got), "Authorization: Bearer tok-") && string(got) != "Authorization: Bearer tok-1\r\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("refreshed token never handed out; last %q", got)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestFirstFetchTimeout(t *testing.T) {
	f := &fakeProvider{ttl: time.Hour, release: make(chan struct{})}
	f.calls.Store(1) // every call waits
	s, err := New(Options{TokenProvider: f, Timeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.AppendHeader(nil, time.Now())
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "the configured token provider") {
		t.Fatalf("err = %v, want a deadline naming the source", err)
	}
}

// writeServiceAccount writes a service account key file whose token_uri
// is tokenURL and returns its path and PEM private key.
func writeServiceAccount(t *testing.T, tokenURL string) (string, string) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	pemKey := string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	b, _ := json.Marshal(map[string]string{
		"type": "service_account", "project_id": "p", "private_key_id": "kid1", "private_key": pemKey,
		"client_email": "sa@p.iam.gserviceaccount.com", "client_id": "1", "token_uri": tokenURL,
	})
	name := filepath.Join(t.TempDir(), "sa.json")
	if err := os.WriteFile(name, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return name, pemKey
}

func TestServiceAccountFile(t *testing.T) {
	var fetches atomic.Int32
	var scope atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetches.Add(1)
		if err := r.ParseForm(); err != nil || r.Form.Get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer" {
			http.Error(w, `{"error":"invalid_request"}`, 400)
			return
		}
		parts := strings.Split(r.Form.Get("assertion"), ".")
		if len(parts) == 3 {
			claims, _ := base64.RawURLEncoding.DecodeString(parts[1])
			var c struct {
				Scope string `json:"scope"`
				Iss   string `json:"iss"`
			}
			_ = json.Unmarshal(claims, &c)
			scope.Store(c.Scope + " " + c.Iss)
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"access_token":"ya29.test-token","expires_in":3600,"token_type":"Bearer"}`))
	}))
	defer srv.Close()
	name, _ := writeServiceAccount(t, srv.URL+"/token")
	s, err := New(Options{CredentialsFile: name})
	if err != nil {
		t.Fatal(err)
	}
	if fetches.Load() != 0 {
		t.Fatal("New fetched a token")
	}
	for range 20 {
		got, err := s.AppendHeader(nil, time.Now())
		if err != nil || string(got) != "Authorization: Bearer ya29.test-token\r\n" {
			t.Fatalf("%q, %v", got, err)
		}
	}
	if n := fetches.Load(); n != 1 {
		t.Fatalf("%d token fetches, want 1", n)
	}
	if got, _ := scope.Load().(string); got != CloudPlatformScope+" sa@p.iam.gserviceaccount.com" {
		t.Fatalf("assertion scope and issuer %q", got)
	}
}

func TestServiceAccountRefused(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(400)
		_, _ = w.Write([]byte(`{"error":"invalid_grant","error_description":"Invalid JWT Signature."}`))
	}))
	defer srv.Close()
	name, pemKey := writeServiceAccount(t, srv.URL+"/token")
	s, err := New(Options{CredentialsFile: name})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.AppendHeader(nil, time.Now())
	if err == nil || !strings.Contains(err.Error(), "credentials file "+name) || !strings.Contains(err.Error(), "invalid_grant") {
		t.Fatalf("err = %v", err)
	}
	keyBody := strings.Split(pemKey, "\n")[1]
	if strings.Contains(err.Error(), keyBody) {
		t.Fatal("the error carries the private key")
	}
}

func TestBadCredentialsFile(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ name, body string }{
		{"missing", ""},
		{"not JSON", "nope"},
		{"no type", `{"client_email":"x"}`},
		{"unknown type", `{"type":"carrier_pigeon"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_"))
			if tc.body != "" {
				if err := os.WriteFile(name, []byte(tc.body), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := New(Options{CredentialsFile: name}); err == nil || !strings.Contains(err.Error(), name) {
				t.Fatalf("err = %v, want one naming the file", err)
			}
		})
	}
}

func TestApplicationDefaultCredentials(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"access_token":"adc-token","expires_in":3600,"token_type":"Bearer"}`))
	}))
	defer srv.Close()
	name, _ := writeServiceAccount(t, srv.URL+"/token")
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", name)
	s, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.AppendHeader(nil, time.Now())
	if err != nil || string(got) != "Authorization: Bearer adc-token\r\n" {
		t.Fatalf("%q, %v", got, err)
	}
}

func TestApplicationDefaultCredentialsRetried(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"access_token":"late-token","expires_in":3600,"token_type":"Bearer"}`))
	}))
	defer srv.Close()
	name, _ := writeServiceAccount(t, srv.URL+"/token")
	later := filepath.Join(t.TempDir(), "adc.json")
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", later)
	s, err := New(Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.AppendHeader(nil, time.Now())
	if err == nil || !strings.Contains(err.Error(), "detecting Google Application Default Credentials") {
		t.Fatalf("err = %v, want a detection failure naming the source", err)
	}
	// The credentials appear: the next request detects again.
	b, _ := os.ReadFile(name)
	if err := os.WriteFile(later, b, 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := s.AppendHeader(nil, time.Now())
	if err != nil || string(got) != "Authorization: Bearer late-token\r\n" {
		t.Fatalf("%q, %v", got, err)
	}
}

// TestCachedTokenAllocs: a request with a valid cached token costs no
// allocation.
func TestCachedTokenAllocs(t *testing.T) {
	s, err := New(Options{TokenProvider: &fakeProvider{ttl: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	dst := make([]byte, 0, 256)
	now := time.Now()
	if _, err := s.AppendHeader(dst, now); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(1000, func() {
		if _, err := s.AppendHeader(dst[:0], now); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocs per request, want 0", allocs)
	}
}
