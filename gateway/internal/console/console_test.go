package console

import (
	"bytes"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
)

func serve(t *testing.T, h http.Handler, method, path string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	return rec
}

// checkSecurityHeaders: every answer, errors included, carries them.
func checkSecurityHeaders(t *testing.T, what string, h http.Header) {
	t.Helper()
	want := map[string]string{
		"Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
			"connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
		"X-Content-Type-Options": "nosniff",
		"Referrer-Policy":        "no-referrer",
		"X-Frame-Options":        "DENY",
	}
	for k, v := range want {
		if got := h.Get(k); got != v {
			t.Errorf("%s: %s = %q, want %q", what, k, got, v)
		}
	}
}

// The embedded index names exactly the embedded assets, by path, and
// references nothing off the origin: no inline script or style either.
func TestIndexNamesEmbeddedAssets(t *testing.T) {
	h := Handler()
	rec := serve(t, h, "GET", "/")
	if rec.Code != 200 {
		t.Fatalf("GET /: %d", rec.Code)
	}
	body := rec.Body.String()
	refs := regexp.MustCompile(`(?:src|href)="([^"]*)"`).FindAllStringSubmatch(body, -1)
	var named []string
	for _, m := range refs {
		switch {
		case m[1] == "data:,": // the empty favicon: no request
		case strings.HasPrefix(m[1], "/assets/"):
			named = append(named, m[1])
		default:
			t.Errorf("index.html references %q: want /assets/ paths only", m[1])
		}
	}
	if len(named) != 2 {
		t.Fatalf("index.html names %d assets (%q), want the script and the stylesheet", len(named), named)
	}
	embedded := assets()
	for _, a := range named {
		if !regexp.MustCompile(`^/assets/app-[0-9a-f]{16}\.(js|css)$`).MatchString(a) {
			t.Errorf("asset %q is not content-hashed", a)
		}
		found := false
		for _, e := range embedded {
			found = found || e == a
		}
		if !found {
			t.Errorf("index.html names %s, which is not embedded (%q): run make console", a, embedded)
		}
	}
	if len(embedded) != len(named) {
		t.Errorf("embedded assets %q, index.html names %q: a stale asset is embedded", embedded, named)
	}
	if regexp.MustCompile(`<script>|<style|\sstyle=|\son[a-z]+=`).MatchString(body) {
		t.Errorf("index.html has inline script or style, which the CSP refuses:\n%s", body)
	}
}

func TestPathsAndCaching(t *testing.T) {
	h := Handler()
	var js, css string
	for _, a := range assets() {
		if strings.HasSuffix(a, ".js") {
			js = a
		} else if strings.HasSuffix(a, ".css") {
			css = a
		}
	}
	tests := []struct {
		path, ctype, cache string
		status             int
	}{
		{"/", "text/html; charset=utf-8", "no-cache", 200},
		{"/index.html", "text/html; charset=utf-8", "no-cache", 200},
		{js, "text/javascript; charset=utf-8", "public, max-age=31536000, immutable", 200},
		{css, "text/css; charset=utf-8", "public, max-age=31536000, immutable", 200},
		{"/assets/", "text/plain; charset=utf-8", "no-store", 404},
		{"/assets/app-0000000000000000.js", "text/plain; charset=utf-8", "no-store", 404},
		{"/assets/../index.html", "text/plain; charset=utf-8", "no-store", 404},
		{"/favicon.ico", "text/plain; charset=utf-8", "no-store", 404},
		{"/tenants", "text/plain; charset=utf-8", "no-store", 404},
		{"/dist/index.html", "text/plain; charset=utf-8", "no-store", 404},
	}
	for _, tt := range tests {
		rec := serve(t, h, "GET", tt.path)
		if rec.Code != tt.status || rec.Header().Get("Content-Type") != tt.ctype || rec.Header().Get("Cache-Control") != tt.cache {
			t.Errorf("GET %s: %d %q %q, want %d %q %q", tt.path, rec.Code, rec.Header().Get("Content-Type"),
				rec.Header().Get("Cache-Control"), tt.status, tt.ctype, tt.cache)
		}
		checkSecurityHeaders(t, "GET "+tt.path, rec.Header())
		if tt.status == 200 && rec.Body.Len() == 0 {
			t.Errorf("GET %s: empty body", tt.path)
		}
	}
}

func TestMethods(t *testing.T) {
	h := Handler()
	get := serve(t, h, "GET", "/")
	head := serve(t, h, "HEAD", "/")
	if head.Code != 200 || head.Body.Len() != 0 || head.Header().Get("Content-Length") != get.Header().Get("Content-Length") ||
		head.Header().Get("Content-Length") == "" {
		t.Errorf("HEAD /: %d, %d body bytes, length %q (GET's %q)", head.Code, head.Body.Len(),
			head.Header().Get("Content-Length"), get.Header().Get("Content-Length"))
	}
	checkSecurityHeaders(t, "HEAD /", head.Header())
	for _, m := range []string{"POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE"} {
		for _, p := range []string{"/", "/index.html", "/nope"} {
			rec := serve(t, h, m, p)
			if rec.Code != http.StatusMethodNotAllowed || rec.Header().Get("Allow") != "GET, HEAD" {
				t.Errorf("%s %s: %d, Allow %q; want 405, GET, HEAD", m, p, rec.Code, rec.Header().Get("Allow"))
			}
			checkSecurityHeaders(t, m+" "+p, rec.Header())
		}
	}
}

// A tree without index.html or assets is refused: the handler never
// serves a console it cannot load.
func TestBrokenTree(t *testing.T) {
	for name, fsys := range map[string]fs.FS{
		"no index":  fstest.MapFS{"dist/assets/app.js": {Data: []byte("x")}},
		"no assets": fstest.MapFS{"dist/index.html": {Data: []byte("<html>")}},
	} {
		if _, err := newHandler(fsys); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// Requests at once, for every path and method, get the same bytes as one
// alone (the handler shares its files read-only; -race checks it).
func TestConcurrentRequests(t *testing.T) {
	h := Handler()
	paths := append([]string{"/", "/index.html", "/nope"}, assets()...)
	want := map[string][]byte{}
	for _, p := range paths {
		want[p] = serve(t, h, "GET", p).Body.Bytes()
	}
	var wg sync.WaitGroup
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				p := paths[(g+i)%len(paths)]
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest([]string{"GET", "HEAD"}[i%2], p, nil))
				if i%2 == 0 && !bytes.Equal(rec.Body.Bytes(), want[p]) {
					t.Errorf("GET %s: body differs under concurrency", p)
				}
				if rec.Header().Get("Content-Security-Policy") != CSP {
					t.Errorf("%s: no CSP under concurrency", p)
				}
			}
		}()
	}
	wg.Wait()
}
