package provider

import (
	"context"
	"errors"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"

	"github.com/tollgate/tollgate/gateway/internal/config"
	"github.com/tollgate/tollgate/gateway/internal/openai"
	"github.com/tollgate/tollgate/gateway/internal/testkit/mockllm"
	"github.com/tollgate/tollgate/gateway/internal/upstream"
)

func TestAzurePaths(t *testing.T) {
	tests := []struct {
		name    string
		version string
		ep      openai.Endpoint
		model   string
		want    string
	}{
		{"chat", "", openai.ChatCompletions, "gpt4o-prod", "/openai/deployments/gpt4o-prod/chat/completions?api-version=" + config.DefaultAzureAPIVersion},
		{"completions", "2025-01-01-preview", openai.Completions, "dep", "/openai/deployments/dep/completions?api-version=2025-01-01-preview"},
		{"embeddings", "2024-10-21", openai.Embeddings, "emb", "/openai/deployments/emb/embeddings?api-version=2024-10-21"},
		{"escaped deployment", "2024-10-21", openai.ChatCompletions, "a b/c:d%é", "/openai/deployments/a%20b%2Fc%3Ad%25%C3%A9/chat/completions?api-version=2024-10-21"},
		{"v1", "v1", openai.ChatCompletions, "dep", "/openai/v1/chat/completions"},
		{"v1 embeddings", "v1", openai.Embeddings, "dep", "/openai/v1/embeddings"},
		{"v1 responses", "v1", openai.Responses, "dep", "/openai/v1/responses"},
		{"preview responses", "2025-03-01-preview", openai.Responses, "dep", "/openai/responses?api-version=2025-03-01-preview"},
		{"later preview responses", "2025-04-01-preview", openai.Responses, "dep", "/openai/responses?api-version=2025-04-01-preview"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := newAzureAdapter(&config.Azure{APIVersion: tt.version})
			var out Outbound
			body := []byte(`{"model":"x"}`)
			if err := a.Request(&out, tt.ep, tt.model, false, body); err != nil {
				t.Fatal(err)
			}
			if string(out.Path) != tt.want || len(out.Header) != 0 || len(out.Body) != 0 {
				t.Errorf("path %q header %q body %q, want path %q and the body as it is", out.Path, out.Header, out.Body, tt.want)
			}
		})
	}
	if a := newAzureAdapter(nil); !a.Serves(openai.Embeddings) || a.Serves(openai.Endpoint(0)) || a.Serves(openai.Endpoint(0xff)) {
		t.Error("Serves")
	}
}

// TestAzureResponses: the api-versions with the Responses API serve it,
// and their stored responses' paths; the others serve none.
func TestAzureResponses(t *testing.T) {
	for _, tc := range []struct {
		version     string
		serves      bool
		rest, query string
		stored      string
	}{
		{"v1", true, "resp_1", "", "/openai/v1/responses/resp_1"},
		{"v1", true, "resp_1/input_items", "limit=2", "/openai/v1/responses/resp_1/input_items?limit=2"},
		{"2025-03-01-preview", true, "resp_1", "", "/openai/responses/resp_1?api-version=2025-03-01-preview"},
		{"2025-04-01-preview", true, "resp_1/input_items", "limit=2&order=asc", "/openai/responses/resp_1/input_items?api-version=2025-04-01-preview&limit=2&order=asc"},
		{"2025-02-01-preview", false, "resp_1", "", ""},
		{"2024-10-21", false, "resp_1", "", ""},
		{"2025-06-01", false, "resp_1", "", ""},
		{"", false, "resp_1", "", ""},
	} {
		a := newAzureAdapter(&config.Azure{APIVersion: tc.version})
		if got := a.Serves(openai.Responses); got != tc.serves {
			t.Errorf("%q: Serves(Responses) = %v, want %v", tc.version, got, tc.serves)
		}
		if got := string(a.AppendStoredPath([]byte("x"), []byte(tc.rest), []byte(tc.query))); got != "x"+tc.stored {
			t.Errorf("%q: stored path %q, want %q", tc.version, got, "x"+tc.stored)
		}
		if !tc.serves {
			if err := a.Request(&Outbound{}, openai.Responses, "dep", false, []byte(`{}`)); err == nil {
				t.Errorf("%q: a Responses request was addressed", tc.version)
			}
		}
	}
}

func TestAzureBinding(t *testing.T) {
	b, err := Bind(&config.Upstream{Name: "az", Provider: config.ProviderAzure, Azure: &config.Azure{APIVersion: "2024-10-21", Auth: config.AzureAuthAPIKey}})
	if err != nil || len(b.Options) != 1 || b.Close != nil {
		t.Fatalf("%+v %v", b, err)
	}
	if _, ok := b.Adapter.(Translator); ok {
		t.Error("Azure replies are OpenAI's: no Translator")
	}
}

// fakeCredential hands out token-1, token-2, ... valid for life; a call
// blocks while gate is set until it is closed; fail makes calls fail.
type fakeCredential struct {
	mu    sync.Mutex
	gate  chan struct{}
	life  time.Duration
	fail  error
	calls atomic.Int64
}

func (f *fakeCredential) GetToken(ctx context.Context, o policy.TokenRequestOptions) (azcore.AccessToken, error) {
	n := f.calls.Add(1)
	f.mu.Lock()
	gate, fail, life := f.gate, f.fail, f.life
	f.mu.Unlock()
	if len(o.Scopes) != 1 || o.Scopes[0] != azureScope {
		return azcore.AccessToken{}, errors.New("wrong scope")
	}
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return azcore.AccessToken{}, ctx.Err()
		}
	}
	if fail != nil {
		return azcore.AccessToken{}, fail
	}
	return azcore.AccessToken{Token: "token-" + strconv.FormatInt(n, 10), ExpiresOn: time.Now().Add(life)}, nil
}

func authHeader(t *testing.T, a *entraAuth, now time.Time) (string, error) {
	t.Helper()
	start := time.Now()
	b, err := a.AppendAuth(nil, &upstream.AuthRequest{Method: "POST", Host: "h", Path: []byte("/p"), Now: now})
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("AppendAuth took %s", d)
	}
	return string(b), err
}

// The token is fetched once, sent on every request, refreshed in the
// background once it passes its refresh time (requests keep the current
// one meanwhile, never waiting), and replaced when the refresh lands.
func TestEntraTokenCache(t *testing.T) {
	cred := &fakeCredential{life: time.Hour}
	a := newEntraAuth(cred, time.Second)
	t.Cleanup(a.close)
	now := time.Now()
	for range 3 {
		if h, err := authHeader(t, a, now); err != nil || h != "Authorization: Bearer token-1\r\n" {
			t.Fatalf("%q %v", h, err)
		}
	}
	if n := cred.calls.Load(); n != 1 {
		t.Fatalf("%d fetches for 3 requests, want 1", n)
	}
	// Past the refresh time (5 min before expiry for a 1 h token) with
	// the credential stalled: the request goes on with token-1.
	// The next token lives 2 h, so `later` is before its own refresh
	// time: one more fetch is the one refresh, not a second one the
	// request after it would rightly start.
	gate := make(chan struct{})
	cred.mu.Lock()
	cred.gate, cred.life = gate, 2*time.Hour
	cred.mu.Unlock()
	later := now.Add(56 * time.Minute)
	if h, err := authHeader(t, a, later); err != nil || h != "Authorization: Bearer token-1\r\n" {
		t.Fatalf("during the refresh: %q %v", h, err)
	}
	if h, _ := authHeader(t, a, later); h != "Authorization: Bearer token-1\r\n" {
		t.Fatalf("during the refresh: %q", h)
	}
	close(gate)
	deadline := time.Now().Add(5 * time.Second)
	for {
		h, err := authHeader(t, a, later)
		if err == nil && h == "Authorization: Bearer token-2\r\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the refreshed token never came: %q %v", h, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := cred.calls.Load(); n != 2 {
		t.Errorf("%d fetches, want 2 (one background refresh, not one per request)", n)
	}
}

// Without a valid token the request fetches itself, bounded by the
// connect timeout; a failure names the source, never a token.
func TestEntraTokenFailures(t *testing.T) {
	t.Run("source fails", func(t *testing.T) {
		cred := &fakeCredential{life: time.Hour, fail: errors.New("ManagedIdentityCredential: no identity endpoint")}
		a := newEntraAuth(cred, time.Second)
		t.Cleanup(a.close)
		_, err := authHeader(t, a, time.Now())
		want := "Entra ID token (DefaultAzureCredential, scope https://cognitiveservices.azure.com/.default): ManagedIdentityCredential: no identity endpoint"
		if err == nil || err.Error() != want {
			t.Errorf("err %v, want %q", err, want)
		}
	})
	t.Run("source hangs", func(t *testing.T) {
		cred := &fakeCredential{life: time.Hour, gate: make(chan struct{})}
		a := newEntraAuth(cred, 100*time.Millisecond)
		t.Cleanup(a.close)
		start := time.Now()
		_, err := authHeader(t, a, time.Now())
		if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > time.Second {
			t.Errorf("err %v after %s", err, time.Since(start))
		}
	})
	t.Run("expired after failed refreshes", func(t *testing.T) {
		cred := &fakeCredential{life: time.Hour}
		a := newEntraAuth(cred, time.Second)
		t.Cleanup(a.close)
		now := time.Now()
		if _, err := authHeader(t, a, now); err != nil {
			t.Fatal(err)
		}
		cred.mu.Lock()
		cred.fail = errors.New("AzureCLICredential: az not logged in")
		cred.mu.Unlock()
		if _, err := authHeader(t, a, now.Add(2*time.Hour)); err == nil || !strings.Contains(err.Error(), "az not logged in") || strings.Contains(err.Error(), "token-1") {
			t.Errorf("err %v", err)
		}
	})
	t.Run("token already expired", func(t *testing.T) {
		a := newEntraAuth(&fakeCredential{life: 10 * time.Second}, time.Second)
		t.Cleanup(a.close)
		if _, err := authHeader(t, a, time.Now()); err == nil || !strings.Contains(err.Error(), "the token returned expires at") {
			t.Errorf("err %v", err)
		}
	})
}

// An azure upstream with Entra ID auth, bound as the proxy binds it, sends
// the credential's token as a bearer the Azure mock accepts, on the
// deployment path the adapter builds.
func TestAzureEntraAgainstMock(t *testing.T) {
	srv := httptest.NewServer(mockllm.New(mockllm.Config{APIKey: "token-1", Text: "entra ok"}))
	t.Cleanup(srv.Close)
	cred := &fakeCredential{life: time.Hour}
	prev := azureCredential
	azureCredential = func() (azcore.TokenCredential, error) { return cred, nil }
	t.Cleanup(func() { azureCredential = prev })
	u, _ := url.Parse(srv.URL)
	up := &config.Upstream{Name: "az", Provider: config.ProviderAzure, URL: u, MaxConnections: 2,
		Azure:    &config.Azure{APIVersion: "2024-10-21", Auth: config.AzureAuthEntra},
		Timeouts: config.Timeouts{Connect: time.Second, FirstByte: 2 * time.Second, Idle: 2 * time.Second}}
	b, err := Bind(up)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	c := upstream.New(up, b.Options...)
	t.Cleanup(c.Close)
	for range 2 {
		var out Outbound
		body := []byte(`{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`)
		if err := b.Adapter.Request(&out, openai.ChatCompletions, "dep", false, body); err != nil {
			t.Fatal(err)
		}
		ex, err := c.Do(context.Background(), &upstream.Request{Method: "POST", Path: string(out.Path), Header: []byte("Content-Type: application/json\r\n"), Body: body})
		if err != nil {
			t.Fatal(err)
		}
		reply, err := ex.ReadAll(nil, 1<<20)
		status := ex.StatusCode()
		ex.Release()
		if err != nil || status != 200 || !strings.Contains(string(reply), `"content":"entra ok"`) {
			t.Fatalf("%d %s %v", status, reply, err)
		}
	}
	if n := cred.calls.Load(); n != 1 {
		t.Errorf("%d token fetches for 2 requests", n)
	}
}
