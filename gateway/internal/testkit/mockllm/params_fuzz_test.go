package mockllm

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"
)

// fuzzHeaders are the override headers FuzzParams sets, by the letter that
// starts an input line.
var fuzzHeaders = map[byte]string{
	'a': HeaderTTFT, 'b': HeaderTokens, 'c': HeaderInterToken, 'd': HeaderText, 'e': HeaderChunkSize,
	'f': HeaderFailStatus, 'g': HeaderFailDelay, 'h': HeaderCutAfter, 'i': HeaderUsage, 'j': HeaderSplit,
	'k': HeaderToolCallAt, 'l': HeaderToolCallArgs, 'm': HeaderMCPStream, 'n': HeaderMCPProgress,
}

// FuzzParams parses the mock's per-request override headers. Each input
// line is a letter naming a header (see fuzzHeaders) and its value. A
// malformed value is an error naming what is wrong, never a panic; what is
// accepted keeps the documented ranges, and a cheap request (no delays, a
// few tokens) is then served, its reply well-formed JSON whatever the text.
func FuzzParams(f *testing.F) {
	f.Add([]byte("b3\nc0s\ndhello%2C%20world\nj5,7\nk12\nlx,%7B%22a%22%3A1%7D"), true)
	f.Add([]byte("a10ms\nb-1"), false)
	f.Add([]byte("d\ne0"), true)
	f.Add([]byte("f503\ng0\nitrue"), false)
	f.Add([]byte("f150"), false)
	f.Add([]byte("d%E2%9C%93%22%5C%0A\nj1,2\nk3"), true)
	f.Add([]byte("j3\nk99999999999999999999"), true)
	f.Add([]byte("h2\nb10"), true)
	f.Add([]byte("dabc\nj2,1"), false)
	f.Add([]byte("d%zz"), true)
	f.Add([]byte("mtrue\nn3"), false)
	f.Add([]byte("mmaybe\nn-2"), false)
	s := New(Config{})
	f.Fuzz(func(t *testing.T, in []byte, stream bool) {
		h := http.Header{}
		for line := range bytes.SplitSeq(in, []byte("\n")) {
			if len(line) == 0 {
				continue
			}
			if name, ok := fuzzHeaders[line[0]]; ok && utf8.Valid(line[1:]) {
				h.Set(name, string(line[1:]))
			}
		}
		p, err := s.params(h)
		if err != nil {
			if msg := err.Error(); !strings.HasPrefix(msg, "invalid ") {
				t.Fatalf("error %q", msg)
			}
			return
		}
		if p.tokens < 0 || p.chunkSize < 1 || p.cutAfter < 0 || p.ttft < 0 || p.interToken < 0 || p.failDelay < 0 ||
			(p.failStatus != 0 && (p.failStatus < 200 || p.failStatus > 599)) || p.toolCallAt < 0 || p.toolCallAt > len(p.text) || p.mcpProgress < 0 {
			t.Fatalf("accepted out-of-range params %+v", p)
		}
		for i, n := range p.split {
			if n <= 0 || n >= len(p.text) || (i > 0 && n <= p.split[i-1]) {
				t.Fatalf("split %v of a %d-byte text", p.split, len(p.text))
			}
		}
		if p.ttft > 0 || p.interToken > 0 || p.failDelay > 0 || p.tokens > 50 || p.cutAfter > 0 || len(p.text) > 4096 {
			return // too slow to serve, or cut on purpose
		}
		body := `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
		if stream {
			body = `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`
		}
		req := httptest.NewRequest("POST", "/v1/chat/completions", strings.NewReader(body))
		req.Header = h
		w := httptest.NewRecorder()
		s.ServeHTTP(w, req)
		if p.failStatus != 0 {
			if w.Code != p.failStatus {
				t.Fatalf("fail status %d, got %d", p.failStatus, w.Code)
			}
			return
		}
		if w.Code != 200 {
			t.Fatalf("status %d: %s", w.Code, w.Body)
		}
		if !stream {
			if !json.Valid(w.Body.Bytes()) {
				t.Fatalf("reply is not JSON: %s", w.Body)
			}
			return
		}
		sc := bufio.NewScanner(w.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok && data != "[DONE]" && !json.Valid([]byte(data)) {
				t.Fatalf("event is not JSON: %s", data)
			}
		}
	})
}
