package hostsvc

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/callout"
	"github.com/tollgate/tollgate/sdk/wasmbuild"
	"github.com/tollgate/tollgate/sdk/wasmhost"
)

// The Session is the pipeline's Dispatcher: a plugin's `http` calls go to
// the call-out service under the plugin's grant (credentials added by the
// host), a URL outside it is refused in dispatch itself, and a failed call
// reaches on_call_response as its negative status.
func TestSessionDispatchesCallouts(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/slow" {
			select {
			case <-time.After(10 * time.Second):
			case <-r.Context().Done():
			}
			return
		}
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Test", r.Header.Get("X-Test"))
		io.WriteString(w, r.Method+" "+string(b)+" "+r.Header.Get("Authorization"))
	}))
	defer srv.Close()
	g, err := callout.NewGrant(callout.GrantSpec{Allow: []string{srv.URL + "/v1/"}, Timeout: time.Second,
		HeadersEnv: map[string]string{"Authorization": "KEY"}}, func(string) (string, bool) { return "Bearer k", true })
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	// Each case has its own service: the plugin's calls are cached.
	withCallout := func() *Set {
		co, err := callout.New(callout.Config{Grants: map[string]*callout.Grant{"d": g}, Log: quiet})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(co.Close)
		return NewSet(Config{Callout: co, Log: quiet})
	}
	without := func() *Set { return NewSet(Config{Log: quiet}) }

	tests := []struct {
		name, dispatch string
		set            func() *Set
		responses      string
		errors         string
	}{
		{"granted", "dispatch_http:" + srv.URL + "/v1/moderations", withCallout, "0:200:POST hello Bearer k:1;", ""},
		{"timeout", "dispatch_http:" + srv.URL + "/v1/slow", withCallout, "0:-5::;", ""},
		{"dot segments", "dispatch_http:" + srv.URL + "/v1/../slow", withCallout, "", "http:tollgate: not allowed in this phase;"},
		{"outside the grant", "dispatch_http:" + srv.URL + "/v2/x", withCallout, "", "http:tollgate: not allowed in this phase;"},
		{"no grant in the policy", "dispatch_http:" + srv.URL + "/v1/x", without, "", "http:tollgate: not allowed in this phase;"},
		{"no such service", "dispatch:nope=x", withCallout, "", "nope:tollgate: unavailable;"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			responses, errors := runDispatch(t, tt.set(), tt.dispatch)
			if responses != tt.responses || errors != tt.errors {
				t.Errorf("responses %q, dispatch errors %q; want %q, %q", responses, errors, tt.responses, tt.errors)
			}
		})
	}
}

// runDispatch runs the wasmhost test plugin's request phase with one
// dispatch action, bound to set, and returns the facts it recorded.
func runDispatch(t *testing.T, set *Set, action string) (responses, errors string) {
	t.Helper()
	path, err := wasmbuild.Cached("../../../sdk/wasmhost/testdata/testplugin")
	if err != nil {
		t.Fatal(err)
	}
	mod, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	h, err := wasmhost.NewHost("", slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	cfg := `{"request":[` + quoteJSON(action) + `,"pause"],"call_response":["record_response","pause_until:1"]}`
	pl, err := wasmhost.NewPipeline(context.Background(), h, []wasmhost.Spec{{Name: "d", Module: mod, Config: []byte(cfg)}})
	if err != nil {
		t.Fatal(err)
	}
	defer pl.Close()
	var sv Session
	sv.Bind(set)
	r := wasmhost.AcquireRequest()
	defer wasmhost.ReleaseRequest(r)
	r.Model, r.RequestID, r.Services = []byte("mock-1"), []byte("req"), &sv
	_ = pl.Request(r) // a dispatch refused leaves PAUSE without calls: a plugin failure
	res, _ := r.Fact("responses")
	errs, _ := r.Fact("dispatch_errors")
	return string(res), string(errs)
}

func quoteJSON(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}
