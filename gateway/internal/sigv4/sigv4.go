// Package sigv4 signs requests to AWS services (Amazon Bedrock) with
// Signature Version 4, for the upstream client: it appends the
// Authorization, X-Amz-Date and (for temporary credentials)
// X-Amz-Security-Token header lines for a request's method, host, path,
// query and body.
//
// Credentials come from the AWS SDK for Go v2's default chain
// (config.LoadDefaultConfig: environment, shared config and credentials
// files and profiles, web identity, container and instance roles), held
// in an aws.CredentialsCache. A request never waits for the network while
// the credentials held are valid: expiring ones are refreshed in the
// background from RefreshAhead before they expire, and requests go on
// signing with the old ones meanwhile. Only the first fetch (or one after
// the credentials have run out) blocks, for at most the fetch timeout; its
// failure (which the proxy answers with a 502 upstream_credentials) names
// the upstream and the credential chain, never a secret.
package sigv4

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/config"

	"github.com/tollgate/tollgate/gateway/internal/upstream"
)

const (
	// RefreshAhead is how long before expiry credentials are refreshed in
	// the background.
	RefreshAhead = 5 * time.Minute
	// DefaultFetchTimeout bounds a blocking credential fetch when the
	// caller gives none.
	DefaultFetchTimeout = 10 * time.Second
	// retryAfter spaces background refresh attempts after a failure.
	retryAfter = 10 * time.Second
	// margin is how long before their real expiry held credentials stop
	// being used (a signed request must still be valid on arrival).
	margin = 30 * time.Second
)

// ErrNoCredentials is returned (wrapped, with the SDK's reason) when no
// credentials could be fetched.
var ErrNoCredentials = errors.New("no AWS credentials")

// Options configure an Authorizer.
type Options struct {
	Upstream string // the upstream's name, for errors and logs
	Region   string // e.g. "us-east-1"
	Service  string // the signing name; "" means "bedrock"
	// Credentials, if non-nil, replaces the default chain (tests, or a
	// caller with its own provider); it is wrapped in an
	// aws.CredentialsCache unless it is one.
	Credentials aws.CredentialsProvider
	// FetchTimeout bounds a credential fetch a request waits for (<= 0:
	// DefaultFetchTimeout).
	FetchTimeout time.Duration
}

// Authorizer signs requests with SigV4. It is safe for concurrent use.
type Authorizer struct {
	opts   Options
	creds  aws.CredentialsProvider
	signer *v4.Signer

	held       atomic.Pointer[aws.Credentials]
	refreshing atomic.Bool
	lastFailed atomic.Int64 // UnixNano of the last failed background refresh
	fetch      sync.Mutex   // one blocking fetch at a time
}

// Load returns an Authorizer whose credentials come from the default
// chain. It reads the environment and the shared config files but does
// not fetch credentials: the first request (or Warm) does.
func Load(ctx context.Context, opts Options) (*Authorizer, error) {
	if opts.Credentials == nil {
		cfg, err := config.LoadDefaultConfig(ctx, config.WithRegion(opts.Region),
			config.WithCredentialsCacheOptions(func(o *aws.CredentialsCacheOptions) { o.ExpiryWindow = RefreshAhead }))
		if err != nil {
			return nil, fmt.Errorf("upstream %q: loading the AWS configuration: %w", opts.Upstream, err)
		}
		if cfg.Credentials == nil {
			return nil, fmt.Errorf("upstream %q: the AWS configuration has no credential provider", opts.Upstream)
		}
		opts.Credentials = cfg.Credentials
	}
	return New(opts), nil
}

// New returns an Authorizer using opts.Credentials (which must be set).
func New(opts Options) *Authorizer {
	if opts.Service == "" {
		opts.Service = "bedrock"
	}
	if opts.FetchTimeout <= 0 {
		opts.FetchTimeout = DefaultFetchTimeout
	}
	creds := opts.Credentials
	if _, ok := creds.(*aws.CredentialsCache); !ok {
		creds = aws.NewCredentialsCache(creds, func(o *aws.CredentialsCacheOptions) { o.ExpiryWindow = RefreshAhead })
	}
	return &Authorizer{opts: opts, creds: creds, signer: v4.NewSigner()}
}

// Warm fetches the credentials now (at startup, so that the first request
// does not wait), returning the fetch error.
func (a *Authorizer) Warm(ctx context.Context) error {
	_, err := a.fetchNow(ctx)
	return err
}

var _ upstream.Authorizer = (*Authorizer)(nil)

// AppendAuth implements upstream.Authorizer: it appends the SigV4 header
// lines, each ending in CRLF, for r (the Host header as sent, the escaped
// path as sent with its query, the body), signed at r.Now. Only the host,
// X-Amz-Date and X-Amz-Security-Token headers are signed, so the others
// the request carries may be anything. An error (no credentials, wrapping
// ErrNoCredentials) names the credential chain, never a secret; the
// upstream client adds the upstream's name.
func (a *Authorizer) AppendAuth(dst []byte, r *upstream.AuthRequest) ([]byte, error) {
	creds, err := a.credentials(r.Now)
	if err != nil {
		return dst, err
	}
	p, q, _ := strings.Cut(string(r.Path), "?")
	req := &http.Request{
		Method: r.Method,
		URL:    &url.URL{Scheme: "https", Host: r.Host, Opaque: "//" + r.Host + p, RawQuery: q},
		Host:   r.Host,
		Header: make(http.Header, 3),
	}
	sum := sha256.Sum256(r.Body)
	if err := a.signer.SignHTTP(context.Background(), creds, req, hex.EncodeToString(sum[:]), a.opts.Service, a.opts.Region, r.Now); err != nil {
		return dst, fmt.Errorf("signing the request for upstream %q: %w", a.opts.Upstream, err)
	}
	for _, name := range []string{"Authorization", "X-Amz-Date", "X-Amz-Security-Token"} {
		if v := req.Header.Get(name); v != "" {
			dst = append(dst, name...)
			dst = append(dst, ": "...)
			dst = append(dst, v...)
			dst = append(dst, "\r\n"...)
		}
	}
	return dst, nil
}

// credentials returns the credentials to sign with at now: those held
// while valid (starting a background refresh when they near expiry), else
// freshly fetched.
func (a *Authorizer) credentials(now time.Time) (aws.Credentials, error) {
	if c := a.held.Load(); c != nil {
		if !c.CanExpire || now.Before(c.Expires) {
			return *c, nil
		}
		// c.Expires is RefreshAhead early (the cache's expiry window):
		// still valid for a while, refreshed meanwhile.
		if now.Before(c.Expires.Add(RefreshAhead - margin)) {
			a.refreshInBackground(now)
			return *c, nil
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), a.opts.FetchTimeout)
	defer cancel()
	return a.fetchNow(ctx)
}

func (a *Authorizer) fetchNow(ctx context.Context) (aws.Credentials, error) {
	a.fetch.Lock()
	defer a.fetch.Unlock()
	c, err := a.creds.Retrieve(ctx)
	if err != nil {
		// The upstream client adds the upstream's name.
		return aws.Credentials{}, fmt.Errorf("%w from the AWS SDK's default chain (environment, shared config and profile, web identity, container or instance role): %w",
			ErrNoCredentials, err)
	}
	a.held.Store(&c)
	return c, nil
}

func (a *Authorizer) refreshInBackground(now time.Time) {
	if now.UnixNano()-a.lastFailed.Load() < int64(retryAfter) || !a.refreshing.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer a.refreshing.Store(false)
		ctx, cancel := context.WithTimeout(context.Background(), a.opts.FetchTimeout)
		defer cancel()
		if _, err := a.fetchNow(ctx); err != nil {
			a.lastFailed.Store(time.Now().UnixNano())
			slog.Warn("refreshing AWS credentials failed; signing with the current ones until they expire", "upstream", a.opts.Upstream, "err", err)
		}
	}()
}
