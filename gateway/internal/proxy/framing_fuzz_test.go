package proxy

import (
	"bufio"
	"net/http"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

// FuzzLooseFraming reads a request head as the server does (fasthttp's
// RequestHeader.Read) and checks looseFraming on the raw header block it
// keeps, against two oracles:
//
//   - a model of RFC 9112's line ends: the block is refused exactly when
//     some LF is not preceded by CR (bare LF) or some line after a line
//     end starts with SP or HTAB (obs-fold), and the message names the
//     first of them;
//   - net/http's reader, the other parser a proxy in front may be: a head
//     the check lets through, and both parsers read, frames its body the
//     same way in both (chunked, or the same length) and names the same
//     Host, so no proxy before the gateway sees a body of another length
//     or a second request where the gateway sees none.
func FuzzLooseFraming(f *testing.F) {
	for _, seed := range []string{
		"Host: gw\r\nContent-Length: 5\r\n\r\n",
		"Host: gw\r\nX-A: b c\r\n\r\n",
		"Host: gw\nContent-Length: 5\r\n\r\n",
		"Host: gw\r\nX-A: b\n\n",
		"Host: gw\r\nX-A: b\r\n c\r\n\r\n",
		"Host: gw\r\nX-A: b\r\n\tContent-Length: 9\r\n\r\n",
		"Host: gw\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
		"Host: gw\r\nContent-Length: 3\r\n Transfer-Encoding: chunked\r\n\r\n",
		"Host: gw\r\nX-A: \tb \t c\r\n\r\n",
		"Host: gw\r\nX-A: b\r\r\n\r\n",
		"Host: gw\r\nHost: other\r\n\r\n",
		"Host: gw\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
		"Host: gw\r\nTransfer-Encoding: Chunked\r\n\r\n",
		"Host: gw\r\nContent-Length: 05\r\n\r\n",
		"\r\n",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, head string) {
		msg := "POST /v1/chat/completions HTTP/1.1\r\n" + head
		var h fasthttp.RequestHeader
		if err := h.Read(bufio.NewReader(strings.NewReader(msg))); err != nil {
			return // refused before the handler runs
		}
		raw := h.RawHeaders()
		got := looseFraming(raw)
		want := lineEndProblem(raw)
		if (got == "") != (want == "") || !strings.Contains(got, want) {
			t.Fatalf("looseFraming(%q) = %q, want a message naming %q", raw, got, want)
		}
		if got != "" {
			return
		}
		req, err := http.ReadRequest(bufio.NewReader(strings.NewReader(msg)))
		if err != nil {
			return // net/http refuses it: it frames nothing differently
		}
		// The body's framing: chunked, or its length (fasthttp's -2, no
		// length given, is an empty body for a request, as net/http's 0).
		fastChunked, fastLen := h.ContentLength() == -1, max(h.ContentLength(), 0)
		stdChunked := len(req.TransferEncoding) > 0
		stdLen := max(req.ContentLength, 0)
		if fastChunked != stdChunked || (!fastChunked && int64(fastLen) != stdLen) {
			t.Fatalf("body framing: fasthttp reads chunked %v, length %d; net/http chunked %v (%q), length %d; in %q",
				fastChunked, h.ContentLength(), stdChunked, req.TransferEncoding, req.ContentLength, raw)
		}
		if fast := string(h.Host()); fast != req.Host {
			t.Fatalf("Host: fasthttp reads %q, net/http %q in %q", fast, req.Host, raw)
		}
	})
}

// lineEndProblem is the model looseFraming is checked against: "bare LF"
// or "obs-fold" for the first loose line end of raw, "" for none.
func lineEndProblem(raw []byte) string {
	for i, c := range raw {
		if c != '\n' {
			continue
		}
		if i == 0 || raw[i-1] != '\r' {
			return "bare LF"
		}
		if i+1 < len(raw) && (raw[i+1] == ' ' || raw[i+1] == '\t') {
			return "obs-fold"
		}
	}
	return ""
}
