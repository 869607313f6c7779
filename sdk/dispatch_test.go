//go:build !wasip1

package sdk

import (
	"bufio"
	"bytes"
	"net/textproto"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The fake host's dispatched calls: dispatch records "<service>=<req>"
// and answers the next id, or dispatchErr; the response is respBody and
// respHeaders.
type fakeDispatch struct {
	dispatched  []string
	dispatchErr int32
	respBody    string
	respHeaders map[string]string
	chunkText   string
	expected    []string // "<call>=<prefix>", as expect_response took them
}

var fd fakeDispatch

func (h *fakeHost) dispatch(service string, req []byte) int32 {
	if fd.dispatchErr != 0 {
		return fd.dispatchErr
	}
	fd.dispatched = append(fd.dispatched, service+"="+string(req))
	return int32(len(fd.dispatched) - 1)
}

// expectResponse takes up to two prefixes per call, as a host would
// take its maximum.
func (h *fakeHost) expectResponse(call int32, prefix string) int32 {
	n := 0
	for _, e := range fd.expected {
		if strings.HasPrefix(e, strconv.Itoa(int(call))+"=") {
			n++
		}
	}
	if call < 0 || int(call) >= len(fd.dispatched) || n >= 2 || len(prefix) > MaxExpectPrefix {
		return -2
	}
	fd.expected = append(fd.expected, strconv.Itoa(int(call))+"="+prefix)
	return 0
}
func (h *fakeHost) callResponse(buf []byte) int32 { return h.out(buf, fd.respBody, true) }
func (h *fakeHost) callResponseHeader(name string, buf []byte) int32 {
	v, ok := fd.respHeaders[strings.ToLower(name)]
	return h.out(buf, v, ok)
}

func installDispatch(t *testing.T) *fakeHost {
	h := install(t)
	fd = fakeDispatch{}
	t.Cleanup(func() { fd = fakeDispatch{} })
	return h
}

func TestDispatch(t *testing.T) {
	installDispatch(t)
	for i, svc := range []string{"a", "b"} {
		id, err := Dispatch(svc, []byte("x"))
		if err != nil || id != CallID(i) {
			t.Fatalf("Dispatch(%s) = %d, %v", svc, id, err)
		}
	}
	tests := []struct {
		code int32
		want error
	}{
		{-7, ErrBusy}, {-3, ErrNotAllowed}, {-2, ErrInvalid}, {-4, ErrUnavailable},
	}
	for _, tt := range tests {
		fd.dispatchErr = tt.code
		if id, err := Dispatch("c", nil); err != tt.want || id != -1 {
			t.Errorf("code %d: %d, %v; want %v", tt.code, id, err, tt.want)
		}
	}
	if got := strings.Join(fd.dispatched, ","); got != "a=x,b=x" {
		t.Fatalf("dispatched %q", got)
	}
	for _, e := range []Error{ErrTimeout, ErrTooLarge, ErrBusy} {
		if strings.Contains(e.Error(), "host error") {
			t.Errorf("%d has no name: %s", int32(e), e)
		}
	}
}

func TestExpectResponse(t *testing.T) {
	installDispatch(t)
	id, err := Dispatch("ratelimit.admit", []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		id       CallID
		prefixes []string
		want     error
		expected string // all the prefixes the host took so far
	}{
		{"none", id, nil, nil, ""},
		{"two", id, []string{"allowed", "unlimited"}, nil, "0=allowed,0=unlimited"},
		{"past the host's maximum", id, []string{"x"}, ErrInvalid, "0=allowed,0=unlimited"},
		{"a call not dispatched", id + 1, []string{"ok"}, ErrInvalid, "0=allowed,0=unlimited"},
		{"too long", id + 1, []string{strings.Repeat("x", MaxExpectPrefix+1)}, ErrInvalid, "0=allowed,0=unlimited"},
	}
	for _, tt := range tests {
		if err := ExpectResponse(tt.id, tt.prefixes...); err != tt.want {
			t.Errorf("%s: err %v, want %v", tt.name, err, tt.want)
		}
		if got := strings.Join(fd.expected, ","); got != tt.expected {
			t.Errorf("%s: host took %q, want %q", tt.name, got, tt.expected)
		}
	}
}

func TestAppendHTTPRequest(t *testing.T) {
	tests := []struct {
		name string
		req  HTTPRequest
		want string // "" for ErrInvalid
	}{
		{"get", HTTPRequest{URL: "https://x.test/a?b=1"}, "GET https://x.test/a?b=1\n\n"},
		{"post with headers and a cache key", HTTPRequest{URL: "https://x.test/v1/moderations",
			Header: [][2]string{{"Content-Type", "application/json"}, {"X-A", "b c"}}, Body: []byte(`{"input":"hi"}`),
			CacheKey: "sha 12", CacheTTL: 90 * time.Second},
			"POST https://x.test/v1/moderations\nContent-Type: application/json\nX-A: b c\n:cache 90000 sha 12\n\n{\"input\":\"hi\"}"},
		{"explicit method, empty body", HTTPRequest{Method: "PUT", URL: "http://h:8080/", Body: []byte{}}, "PUT http://h:8080/\n\n"},
		{"no URL", HTTPRequest{}, ""},
		{"space in the URL", HTTPRequest{URL: "http://h/a b"}, ""},
		{"LF in the URL", HTTPRequest{URL: "http://h/\nX: 1"}, ""},
		{"bad method", HTTPRequest{Method: "GE T", URL: "http://h/"}, ""},
		{"bad header name", HTTPRequest{URL: "http://h/", Header: [][2]string{{"X:Y", "1"}}}, ""},
		{"CR in a header value", HTTPRequest{URL: "http://h/", Header: [][2]string{{"X", "1\r\nY: 2"}}}, ""},
		{"cache key without TTL", HTTPRequest{URL: "http://h/", CacheKey: "k"}, ""},
		{"cache TTL over an hour", HTTPRequest{URL: "http://h/", CacheKey: "k", CacheTTL: 61 * time.Minute}, ""},
		{"LF in the cache key", HTTPRequest{URL: "http://h/", CacheKey: "k\n", CacheTTL: time.Second}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := AppendHTTPRequest([]byte("prefix"), tt.req)
			if tt.want == "" {
				if err != ErrInvalid {
					t.Fatalf("got %q, %v; want ErrInvalid", got, err)
				}
				return
			}
			if err != nil || string(got) != "prefix"+tt.want {
				t.Fatalf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

// FuzzAppendHTTPRequest: whatever the plugin passes, the request bytes are
// either refused or parse back, line by line as the `http` service reads
// them, to the same method, URL, headers, cache line and body.
func FuzzAppendHTTPRequest(f *testing.F) {
	f.Add("POST", "https://x.test/a", "X-A", "v", "key", int64(1000), []byte("body\n\nmore"))
	f.Add("", "http://h/\r", "X", "1\n", "", int64(0), []byte(nil))
	f.Fuzz(func(t *testing.T, method, url, name, value, key string, ttlMS int64, body []byte) {
		req := HTTPRequest{Method: method, URL: url, Header: [][2]string{{name, value}}, Body: body,
			CacheKey: key, CacheTTL: time.Duration(ttlMS) * time.Millisecond}
		b, err := AppendHTTPRequest(nil, req)
		if err != nil {
			return
		}
		tp := textproto.NewReader(bufio.NewReader(bytes.NewReader(b)))
		line, err := tp.ReadLine()
		m, u, ok := strings.Cut(line, " ")
		if err != nil || !ok || (method != "" && m != method) || u != url {
			t.Fatalf("request line %q from %q %q", line, method, url)
		}
		if line, _ = tp.ReadLine(); line != name+": "+value {
			t.Fatalf("header line %q", line)
		}
		if key != "" {
			want := ":cache " + strconv.FormatInt(req.CacheTTL.Milliseconds(), 10) + " " + key
			if line, _ = tp.ReadLine(); line != want {
				t.Fatalf("cache line %q, want %q", line, want)
			}
		}
		if line, _ = tp.ReadLine(); line != "" {
			t.Fatalf("no blank line: %q", line)
		}
		rest := make([]byte, len(body)+1)
		n, _ := tp.R.Read(rest)
		if !bytes.Equal(rest[:n], body) {
			t.Fatalf("body %q, want %q", rest[:n], body)
		}
	})
}

func TestCallResponse(t *testing.T) {
	h := installDispatch(t)
	fd.respBody, fd.respHeaders = `{"flagged":true}`, map[string]string{"content-type": "application/json"}
	h.text = "hello"
	h.usages[usageStatus] = 201
	var seen []string
	OnCallResponse(func(c *CallResponse) Verdict {
		ct, _ := c.Header("Content-Type")
		_, has := c.Header("X-None")
		rec := strconv.Itoa(int(c.ID())) + " " + strconv.Itoa(c.Status()) + " " + string(c.Body()) + " " +
			string(c.AppendBody([]byte("+"))) + " " + ct + " " + strconv.FormatBool(has) + " " + c.Phase().String()
		switch {
		case c.Request() != nil:
			rec += " request"
		case c.Response() != nil:
			rec += " response " + strconv.Itoa(c.Response().Status())
		case c.Chunk() != nil:
			rec += " chunk " + c.Chunk().Text() + " " + strconv.FormatBool(c.Chunk().IsDone())
		case c.End() != nil:
			rec += " end " + strconv.FormatBool(c.End().Completed())
		}
		if c.Err() != nil {
			rec += " " + c.Err().Error()
		}
		seen = append(seen, rec)
		return Reject
	})
	body := int32(len(fd.respBody))
	tests := []struct {
		call, status, n int32
		phase           Phases
		flags           uint32
		want            string
	}{
		{0, 200, body, PhaseRequest, 0, `0 200 {"flagged":true} +{"flagged":true} application/json false request request`},
		{1, 200, body, PhaseResponseHeaders, 0, `1 200 {"flagged":true} +{"flagged":true} application/json false response_headers response 201`},
		{2, 0, body, PhaseChunk, uint32(ChunkDone), `2 0 {"flagged":true} +{"flagged":true} application/json false chunk chunk hello true`},
		{3, -5, 0, PhaseEnd, uint32(EndCompleted), `3 -5  + application/json false end end true tollgate: timed out`},
	}
	for _, tt := range tests {
		seen = seen[:0]
		if v := dispatchCallResponse(1, tt.call, tt.status, tt.n, tt.phase, tt.flags); v != Reject {
			t.Fatalf("verdict %v", v)
		}
		if len(seen) != 1 || seen[0] != tt.want {
			t.Errorf("got %q\nwant %q", seen, tt.want)
		}
	}
}

// Without a handler every response answers PAUSE; an end handler that
// dispatched answers PAUSE, one that did not CONTINUE.
func TestPauseDefaults(t *testing.T) {
	installDispatch(t)
	if v := dispatchCallResponse(1, 0, 200, 0, PhaseRequest, 0); v != Pause {
		t.Fatalf("no handler: %v", v)
	}
	dispatchIt := false
	OnEnd(func(e *End) {
		if dispatchIt {
			Dispatch("audit", []byte("x"))
		}
	})
	if v := dispatchEnd(1, 0); v != Continue {
		t.Fatalf("end without a dispatch: %v", v)
	}
	dispatchIt = true
	if v := dispatchEnd(1, 0); v != Pause {
		t.Fatalf("end with a dispatch: %v", v)
	}
	fd.dispatchErr = -7
	if v := dispatchEnd(1, 0); v != Continue {
		t.Fatalf("end with a refused dispatch: %v", v)
	}
	if Pause.String() != "pause" || Fail.String() != "fail" {
		t.Fatal(Pause.String(), Fail.String())
	}
}

// The verdicts' wire values are the ABI's (sdk/ABI.md, "Verdicts").
func TestVerdictValues(t *testing.T) {
	tests := []struct {
		v    Verdict
		want uint32
		name string
	}{
		{Continue, 0, "continue"}, {Reject, 1, "reject"}, {Hold, 2, "hold"}, {Release, 3, "release"},
		{Replace, 4, "replace"}, {Stop, 5, "stop"}, {Pause, 6, "pause"}, {Fail, 7, "fail"}, {Defer, 8, "defer"},
	}
	for _, tt := range tests {
		if uint32(tt.v) != tt.want || tt.v.String() != tt.name {
			t.Errorf("%s = %d %q, want %d %q", tt.name, uint32(tt.v), tt.v.String(), tt.want, tt.name)
		}
	}
}
