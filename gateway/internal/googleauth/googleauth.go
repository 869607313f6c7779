// Package googleauth supplies the OAuth 2.0 bearer tokens that requests to
// Google Cloud APIs (Vertex AI) carry, from cloud.google.com/go/auth
// credentials: a credentials file named in the policy, or Application
// Default Credentials (GOOGLE_APPLICATION_CREDENTIALS, gcloud's
// well-known file, workload identity federation, the metadata server).
//
// Tokens are cached by the library's cached token provider, which
// refreshes a token in the background a few minutes before it expires and
// hands out the cached one meanwhile, so a request never waits on the
// network while the token it gets is valid. Only the first fetch, and one
// after a token expired unrefreshed (an idle gateway, a failing token
// endpoint), blocks the request, bounded by the configured timeout. Why
// this library: docs/adr/0013-google-generatecontent.md.
package googleauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"cloud.google.com/go/auth"
	"cloud.google.com/go/auth/credentials"
)

// CloudPlatformScope is the OAuth scope Vertex AI requests need.
const CloudPlatformScope = "https://www.googleapis.com/auth/cloud-platform"

// DefaultTimeout bounds a blocking token fetch when Options.Timeout is 0.
const DefaultTimeout = 10 * time.Second

// Options configure a TokenSource. The zero value means Application
// Default Credentials with the cloud-platform scope.
type Options struct {
	// CredentialsFile, if set, is a Google credentials JSON file
	// (service_account, authorized_user, external_account,
	// impersonated_service_account); it is read by New.
	CredentialsFile string
	// Scopes default to CloudPlatformScope.
	Scopes []string
	// Timeout bounds a blocking token fetch (0: DefaultTimeout).
	Timeout time.Duration
	// TokenProvider, if set, is used instead of detected credentials
	// (tests); it is wrapped in the library's cached token provider.
	TokenProvider auth.TokenProvider
}

// TokenSource writes "Authorization: Bearer <token>" header lines. It is
// safe for concurrent use.
type TokenSource struct {
	source  string // names the credential source in errors, never a secret
	timeout time.Duration
	opts    Options

	mu  sync.Mutex         // guards det
	det *detection         // the detection under way, if any
	tp  atomic.Pointer[tp] // nil until credentials are detected

	cur atomic.Pointer[header] // the header line of the last token handed out
}

type tp struct{ auth.TokenProvider }

// header is the rendered header line for one token.
type header struct {
	tok    *auth.Token
	line   []byte
	expiry time.Time // zero: does not expire
}

// New returns a TokenSource for o. With CredentialsFile it reads and
// checks the file now (no network I/O); without it, Application Default
// Credentials are detected on first use, since detection may probe the
// metadata server.
func New(o Options) (*TokenSource, error) {
	s := &TokenSource{opts: o, timeout: o.Timeout}
	if s.timeout <= 0 {
		s.timeout = DefaultTimeout
	}
	if len(s.opts.Scopes) == 0 {
		s.opts.Scopes = []string{CloudPlatformScope}
	}
	switch {
	case o.TokenProvider != nil:
		s.source = "the configured token provider"
		s.tp.Store(&tp{auth.NewCachedTokenProvider(o.TokenProvider, nil)})
	case o.CredentialsFile != "":
		s.source = "credentials file " + o.CredentialsFile
		creds, err := fromFile(o.CredentialsFile, s.opts.Scopes)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.source, err)
		}
		s.tp.Store(&tp{creds})
	default:
		s.source = "Google Application Default Credentials"
	}
	return s, nil
}

// fromFile reads a credentials file of any type the library knows.
func fromFile(name string, scopes []string) (*auth.Credentials, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	var f struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("not a credentials JSON file: %w", err)
	}
	if f.Type == "" {
		return nil, errors.New(`not a credentials JSON file: no "type"`)
	}
	return credentials.NewCredentialsFromJSON(credentials.CredType(f.Type), b, &credentials.DetectOptions{Scopes: scopes})
}

// Source names where the tokens come from, for logs and errors.
func (s *TokenSource) Source() string { return s.source }

// AppendHeader appends "Authorization: Bearer <token>\r\n" to dst. now is
// the time of the request: while the last token handed out is valid at
// now the call does not wait on the network (see the package
// documentation). Errors name the credential source, never a secret.
func (s *TokenSource) AppendHeader(dst []byte, now time.Time) ([]byte, error) {
	h := s.cur.Load()
	if h != nil && (h.expiry.IsZero() || now.Before(h.expiry)) {
		// The provider returns the cached token (starting a background
		// refresh when it is close to expiry) without a deadline to set.
		if p := s.tp.Load(); p != nil {
			if tok, err := p.Token(context.Background()); err == nil && tok == h.tok {
				return append(dst, h.line...), nil
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	p, err := s.provider(ctx)
	if err != nil {
		return dst, err
	}
	tok, err := p.Token(ctx)
	if err != nil {
		return dst, fmt.Errorf("fetching an OAuth token from %s: %w", s.source, err)
	}
	if tok == nil || tok.Value == "" {
		return dst, fmt.Errorf("fetching an OAuth token from %s: empty token", s.source)
	}
	h = &header{tok: tok, expiry: tok.Expiry, line: []byte("Authorization: Bearer " + tok.Value + "\r\n")}
	s.cur.Store(h)
	return append(dst, h.line...), nil
}

// detection is one run of Application Default Credentials detection.
type detection struct {
	done chan struct{} // closed when p or err is set
	p    *tp
	err  error
}

// provider returns the token provider, detecting Application Default
// Credentials on first use. Detection runs once at a time, in its own
// goroutine: a request that stops waiting (ctx) leaves it running, and
// its result serves the next request; a failed detection is retried by
// the next request.
func (s *TokenSource) provider(ctx context.Context) (auth.TokenProvider, error) {
	if p := s.tp.Load(); p != nil {
		return p, nil
	}
	s.mu.Lock()
	d := s.det
	if d == nil {
		d = &detection{done: make(chan struct{})}
		s.det = d
		go s.detect(d)
	}
	s.mu.Unlock()
	select {
	case <-d.done:
		if d.err != nil {
			return nil, d.err
		}
		return d.p, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("detecting %s: %w", s.source, ctx.Err())
	}
}

func (s *TokenSource) detect(d *detection) {
	c, err := credentials.DetectDefault(&credentials.DetectOptions{Scopes: s.opts.Scopes})
	if err != nil {
		d.err = fmt.Errorf("detecting %s: %w", s.source, err)
		s.mu.Lock()
		s.det = nil
		s.mu.Unlock()
	} else {
		d.p = &tp{c}
		s.tp.Store(d.p)
	}
	close(d.done)
}
