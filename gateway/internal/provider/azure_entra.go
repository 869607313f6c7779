package provider

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"

	"github.com/tollgate/tollgate/gateway/internal/upstream"
)

// entraAuth is the upstream.Authorizer of an Azure upstream with Entra ID
// auth: "Authorization: Bearer <token>" from a cached token. A request
// never waits for the credential while the cached token is valid: once
// the token passes its refresh time a goroutine fetches the next one and
// requests go on with the current one. Only a request finding no valid
// token fetches itself (the first, or after every refresh failed until
// expiry), bounded by the upstream's connect timeout.
type entraAuth struct {
	cred azcore.TokenCredential
	wait time.Duration // bound on a fetch a request waits for

	cur        atomic.Pointer[entraToken]
	mu         sync.Mutex   // one waited-for fetch at a time
	refreshing atomic.Bool  // a background refresh is running
	retryAt    atomic.Int64 // no background refresh before (Unix ns), after a failure

	ctx    context.Context // ended by close
	cancel context.CancelFunc
}

// entraToken is a token as the header line it is sent in.
type entraToken struct {
	header    []byte
	refreshAt time.Time // fetch the next one from then on, in the background
	expiresAt time.Time // not sent from then on (a margin before expiry)
}

var _ upstream.Authorizer = (*entraAuth)(nil)

// entraSource names the credential in errors; it holds no secret.
const entraSource = "Entra ID token (DefaultAzureCredential, scope " + azureScope + ")"

const (
	// entraExpiryMargin: a token this close to its expiry is not sent
	// (it could expire in flight).
	entraExpiryMargin = 30 * time.Second
	// entraRefreshTimeout bounds a background refresh.
	entraRefreshTimeout = 30 * time.Second
	// entraRetryAfter spaces background refreshes after a failure.
	entraRetryAfter = 5 * time.Second
)

func newEntraAuth(cred azcore.TokenCredential, wait time.Duration) *entraAuth {
	if wait <= 0 {
		wait = 5 * time.Second
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &entraAuth{cred: cred, wait: wait, ctx: ctx, cancel: cancel}
}

// AppendAuth implements upstream.Authorizer.
func (a *entraAuth) AppendAuth(dst []byte, r *upstream.AuthRequest) ([]byte, error) {
	t := a.cur.Load()
	if t != nil && r.Now.Before(t.expiresAt) {
		if !r.Now.Before(t.refreshAt) && r.Now.UnixNano() >= a.retryAt.Load() {
			a.refreshAsync()
		}
		return append(dst, t.header...), nil
	}
	t, err := a.fetchWaited(r.Now)
	if err != nil {
		return dst, err
	}
	return append(dst, t.header...), nil
}

// fetchWaited fetches a token for a request that has none valid.
func (a *entraAuth) fetchWaited(now time.Time) (*entraToken, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if t := a.cur.Load(); t != nil && now.Before(t.expiresAt) {
		return t, nil // fetched while this request waited for mu
	}
	ctx, cancel := context.WithTimeout(a.ctx, a.wait)
	defer cancel()
	return a.fetch(ctx)
}

func (a *entraAuth) refreshAsync() {
	if !a.refreshing.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer a.refreshing.Store(false)
		ctx, cancel := context.WithTimeout(a.ctx, entraRefreshTimeout)
		defer cancel()
		if _, err := a.fetch(ctx); err != nil {
			a.retryAt.Store(time.Now().Add(entraRetryAfter).UnixNano())
			if a.ctx.Err() == nil {
				slog.Warn("refreshing the Azure token failed; the current one is used until it expires", "err", err)
			}
		}
	}()
}

// fetch gets a token from the credential and makes it the current one.
func (a *entraAuth) fetch(ctx context.Context) (*entraToken, error) {
	tok, err := a.cred.GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{azureScope}})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", entraSource, err)
	}
	now := time.Now()
	if !tok.ExpiresOn.After(now.Add(entraExpiryMargin)) {
		return nil, fmt.Errorf("%s: the token returned expires at %s", entraSource, tok.ExpiresOn.UTC().Format(time.RFC3339))
	}
	t := &entraToken{header: []byte("Authorization: Bearer " + tok.Token + "\r\n"), expiresAt: tok.ExpiresOn.Add(-entraExpiryMargin)}
	t.refreshAt = tok.RefreshOn
	if t.refreshAt.IsZero() || !t.refreshAt.Before(t.expiresAt) {
		// No hint: when a third of the lifetime is left, at most 5 min.
		life := tok.ExpiresOn.Sub(now)
		t.refreshAt = tok.ExpiresOn.Add(-min(life/3, 5*time.Minute))
	}
	a.cur.Store(t)
	return t, nil
}

// close stops a background refresh and any waited-for fetch.
func (a *entraAuth) close() { a.cancel() }
