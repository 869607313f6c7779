package sigv4

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/tollgate/tollgate/gateway/internal/upstream"
)

const (
	testKeyID  = "AKIDEXAMPLE"
	testSecret = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
)

// TestVanillaVector is the "get-vanilla" case of AWS's published SigV4
// test suite: the expected signature is AWS's, not computed here.
func TestVanillaVector(t *testing.T) {
	a := New(Options{Upstream: "u", Region: "us-east-1", Service: "service",
		Credentials: credentials.NewStaticCredentialsProvider(testKeyID, testSecret, "")})
	got, err := a.AppendAuth(nil, &upstream.AuthRequest{Method: "GET", Host: "example.amazonaws.com", Path: []byte("/"), Now: time.Date(2015, 8, 30, 12, 36, 0, 0, time.UTC)})
	if err != nil {
		t.Fatal(err)
	}
	want := "Authorization: AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders=host;x-amz-date, " +
		"Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31\r\nX-Amz-Date: 20150830T123600Z\r\n"
	if string(got) != want {
		t.Fatalf("got\n%q\nwant\n%q", got, want)
	}
}

// TestDefaultChainEnv signs with static credentials from the environment,
// read by the SDK's default chain, and checks the signature with an
// independent implementation of the algorithm.
func TestDefaultChainEnv(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("AWS_ACCESS_KEY_ID", testKeyID)
	t.Setenv("AWS_SECRET_ACCESS_KEY", testSecret)
	t.Setenv("AWS_SESSION_TOKEN", "session-token")
	t.Setenv("AWS_CONFIG_FILE", dir+"/config")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", dir+"/credentials")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_PROFILE", "")
	a, err := Load(context.Background(), Options{Upstream: "bedrock-east", Region: "eu-west-3"})
	if err != nil {
		t.Fatal(err)
	}
	path := "/model/anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse-stream"
	body := []byte(`{"messages":[{"role":"user","content":[{"text":"Hi"}]}]}`)
	now := time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC)
	got, err := a.AppendAuth([]byte("X: y\r\n"), &upstream.AuthRequest{Method: "POST", Host: "bedrock-runtime.eu-west-3.amazonaws.com", Path: []byte(path), Body: body, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(got), "\r\n"), "\r\n")
	if len(lines) != 4 || lines[0] != "X: y" || lines[2] != "X-Amz-Date: 20261201T200000Z" || lines[3] != "X-Amz-Security-Token: session-token" {
		t.Fatalf("header lines %q", lines)
	}
	auth := strings.TrimPrefix(lines[1], "Authorization: ")
	want := independentSignature(t, "POST", "bedrock-runtime.eu-west-3.amazonaws.com", path, body, now,
		"eu-west-3", "bedrock", "session-token")
	if auth != want {
		t.Fatalf("Authorization\n%s\nwant\n%s", auth, want)
	}
}

// independentSignature computes the Authorization header value for a
// request signing host, x-amz-date and x-amz-security-token, following
// the SigV4 specification step by step (the path is URI-encoded once more,
// as for every service but S3).
func independentSignature(t *testing.T, method, host, path string, body []byte, now time.Time, region, service, token string) string {
	t.Helper()
	date := now.UTC().Format("20060102T150405Z")
	var canonPath strings.Builder
	for _, c := range []byte(path) {
		if c == '/' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-_.~", c) >= 0 {
			canonPath.WriteByte(c)
		} else {
			canonPath.WriteString("%" + strings.ToUpper(hex.EncodeToString([]byte{c})))
		}
	}
	sum := sha256.Sum256(body)
	canonical := strings.Join([]string{method, canonPath.String(), "",
		"host:" + host, "x-amz-date:" + date, "x-amz-security-token:" + token, "",
		"host;x-amz-date;x-amz-security-token", hex.EncodeToString(sum[:])}, "\n")
	scope := date[:8] + "/" + region + "/" + service + "/aws4_request"
	hashed := sha256.Sum256([]byte(canonical))
	toSign := "AWS4-HMAC-SHA256\n" + date + "\n" + scope + "\n" + hex.EncodeToString(hashed[:])
	mac := func(key []byte, s string) []byte {
		h := hmac.New(sha256.New, key)
		h.Write([]byte(s))
		return h.Sum(nil)
	}
	k := mac(mac(mac(mac([]byte("AWS4"+testSecret), date[:8]), region), service), "aws4_request")
	return "AWS4-HMAC-SHA256 Credential=" + testKeyID + "/" + scope +
		", SignedHeaders=host;x-amz-date;x-amz-security-token, Signature=" + hex.EncodeToString(mac(k, toSign))
}

// expiringProvider hands out credentials valid for ttl, blocking each
// fetch after the first until release is closed.
type expiringProvider struct {
	calls   atomic.Int32
	ttl     time.Duration
	release chan struct{}
	fail    error
}

func (p *expiringProvider) Retrieve(ctx context.Context) (aws.Credentials, error) {
	n := p.calls.Add(1)
	if n > 1 {
		select {
		case <-p.release:
		case <-ctx.Done():
			return aws.Credentials{}, ctx.Err()
		}
	}
	if p.fail != nil {
		return aws.Credentials{}, p.fail
	}
	return aws.Credentials{AccessKeyID: "AKID" + string(rune('0'+n)), SecretAccessKey: "s", CanExpire: true, Expires: time.Now().Add(p.ttl)}, nil
}

func TestRefreshDoesNotBlock(t *testing.T) {
	p := &expiringProvider{ttl: RefreshAhead + 200*time.Millisecond, release: make(chan struct{})}
	a := New(Options{Upstream: "u", Region: "us-east-1", Credentials: p})
	sign := func(now time.Time) string {
		t.Helper()
		b, err := a.AppendAuth(nil, &upstream.AuthRequest{Method: "POST", Host: "h", Path: []byte("/"), Now: now})
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if s := sign(time.Now()); !strings.Contains(s, "Credential=AKID1/") || p.calls.Load() != 1 {
		t.Fatalf("first fetch: %q, %d calls", s, p.calls.Load())
	}
	// Once inside the refresh window, requests sign with the held
	// credentials at once while the refresh waits.
	time.Sleep(300 * time.Millisecond)
	for range 5 {
		done := make(chan string, 1)
		go func() { done <- sign(time.Now()) }()
		select {
		case s := <-done:
			if !strings.Contains(s, "Credential=AKID1/") {
				t.Fatalf("signed with %q during the refresh", s)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a request waited for the background refresh")
		}
	}
	close(p.release)
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(sign(time.Now()), "Credential=AKID2/") {
		if time.Now().After(deadline) {
			t.Fatal("the refreshed credentials were never used")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := p.calls.Load(); n != 2 {
		t.Fatalf("%d fetches, want 2 (one refresh for all those requests)", n)
	}
}

func TestFetchFailure(t *testing.T) {
	p := &expiringProvider{fail: errors.New("no EC2 IMDS role found"), release: make(chan struct{})}
	a := New(Options{Upstream: "bedrock-east", Region: "us-east-1", Credentials: p, FetchTimeout: time.Second})
	got, err := a.AppendAuth([]byte("dst"), &upstream.AuthRequest{Method: "POST", Host: "h", Path: []byte("/"), Now: time.Now()})
	if !errors.Is(err, ErrNoCredentials) || !strings.Contains(err.Error(), "default chain") || !strings.Contains(err.Error(), "no EC2 IMDS role found") || string(got) != "dst" {
		t.Fatalf("got %q, %#v", got, err)
	}
}
