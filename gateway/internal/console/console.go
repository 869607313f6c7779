// Package console serves the operator console: a single-page app (built
// from web/console by `make console`, committed under dist/) on the admin
// listener, beside the admin API it calls.
//
// The app is static: index.html and content-hashed assets. index.html is
// served with Cache-Control: no-cache, so a new gateway's console is seen
// on the next load; the assets, whose names change with their content,
// are cacheable for a year. Every answer, errors included, carries a
// Content-Security-Policy that lets the page load scripts, styles and
// connections from its own origin only (no inline script or style, no
// framing, no form posts elsewhere), and nosniff, no-referrer and
// X-Frame-Options: DENY.
package console

import (
	"embed"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"
)

//go:embed dist
var dist embed.FS

// CSP is the Content-Security-Policy of every answer.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// assetsDir is where the hashed assets live, under dist/ and in URLs.
const assetsDir = "assets"

type file struct {
	body        []byte
	contentType string
	cache       string
}

// Handler serves the console: GET and HEAD of "/" (and "/index.html") and
// of "/assets/NAME"; any other path is 404, any other method 405.
func Handler() http.Handler {
	h, err := newHandler(dist)
	if err != nil { // the embedded tree is the build's: a broken one is a bug
		panic("console: " + err.Error())
	}
	return h
}

// handler is read-only once built: its map and byte slices are never
// written after newHandler returns, so any number of requests may read
// them at once without a lock (TestConcurrentRequests runs it under the
// race detector).
type handler struct {
	files map[string]file // by URL path
}

func newHandler(fsys fs.FS) (*handler, error) {
	h := &handler{files: map[string]file{}}
	index, err := fs.ReadFile(fsys, "dist/index.html")
	if err != nil {
		return nil, err
	}
	idx := file{body: index, contentType: "text/html; charset=utf-8", cache: "no-cache"}
	h.files["/"], h.files["/index.html"] = idx, idx
	entries, err := fs.ReadDir(fsys, "dist/"+assetsDir)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		b, err := fs.ReadFile(fsys, "dist/"+assetsDir+"/"+e.Name())
		if err != nil {
			return nil, err
		}
		h.files["/"+assetsDir+"/"+e.Name()] = file{body: b, contentType: contentType(e.Name()),
			cache: "public, max-age=31536000, immutable"}
	}
	return h, nil
}

func contentType(name string) string {
	switch path.Ext(name) {
	case ".js":
		return "text/javascript; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	}
	if t := mime.TypeByExtension(path.Ext(name)); t != "" {
		return t
	}
	return "application/octet-stream"
}

// SecurityHeaders sets the headers every console answer carries.
func SecurityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", CSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	SecurityHeaders(w.Header())
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		plain(w, http.StatusMethodNotAllowed, "method not allowed\n")
		return
	}
	f, ok := h.files[r.URL.Path]
	if !ok {
		plain(w, http.StatusNotFound, "not found\n")
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", f.contentType)
	hd.Set("Cache-Control", f.cache)
	hd.Set("Content-Length", strconv.Itoa(len(f.body)))
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		w.Write(f.body)
	}
}

func plain(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write([]byte(msg))
}

// assets lists the URL paths of the hashed assets.
func assets() []string {
	h := Handler().(*handler)
	var out []string
	for p := range h.files {
		if strings.HasPrefix(p, "/"+assetsDir+"/") {
			out = append(out, p)
		}
	}
	return out
}
