package anthropic

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"unicode/utf8"
)

// chunkedReader returns src in reads whose sizes cycle through sizes (a
// size of 0 reads 1 byte).
type chunkedReader struct {
	src   []byte
	sizes []byte
	n     int
}

func (c *chunkedReader) Read(p []byte) (int, error) {
	if len(c.src) == 0 {
		return 0, io.EOF
	}
	size := 1
	if len(c.sizes) > 0 {
		size = max(int(c.sizes[c.n%len(c.sizes)]), 1)
		c.n++
	}
	n := copy(p[:min(len(p), size)], c.src)
	c.src = c.src[n:]
	return n, nil
}

// FuzzStreamReader reads an upstream Messages API stream through
// StreamReader with a fuzzed event size limit, once in the reads a network
// would split it into (fuzzed sizes, from 1 byte) and once whole. How the
// bytes arrive must not change what comes out: the same translated stream
// and the same kind of end (EOF, a truncated stream, an invalid or
// oversized event).
func FuzzStreamReader(f *testing.F) {
	files, err := filepath.Glob("testdata/*.sse")
	if err != nil || len(files) == 0 {
		f.Fatalf("no seed streams: %v", err)
	}
	for i, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, []byte{1, 7, 200, 3}, uint16(4096), i%2 == 0)
		f.Add(b, []byte{0}, uint16(64), true)
	}
	f.Add([]byte("event: message_start\r\ndata: {\"type\":\"message_start\",\"message\":{}}\r\n\r\ndata: [DONE]\n\n"), []byte{2}, uint16(0), false)
	f.Fuzz(func(t *testing.T, stream, sizes []byte, limit uint16, includeUsage bool) {
		read := func(src io.Reader) ([]byte, error) {
			r := NewStreamReader(int(limit))
			r.Reset(src, "m", "c", 1, includeUsage)
			return io.ReadAll(r)
		}
		whole, errWhole := read(bytes.NewReader(stream))
		split, errSplit := read(&chunkedReader{src: stream, sizes: sizes})
		if !bytes.Equal(whole, split) {
			t.Fatalf("the output depends on how the input is split:\nwhole: %q\nsplit: %q", whole, split)
		}
		if kind(errWhole) != kind(errSplit) {
			t.Fatalf("whole ended with %v, split with %v", errWhole, errSplit)
		}
		if errWhole != nil && kind(errWhole) == "other" {
			t.Fatalf("unexpected error %v", errWhole)
		}
		if errWhole == nil {
			if err := checkChunks(whole, true); err != nil {
				t.Fatalf("%v\nin: %q", err, stream)
			}
		}
	})
}

// kind classifies how a translated stream ended.
func kind(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "truncated"
	case errors.Is(err, ErrInvalidEvent):
		return "invalid"
	}
	return "other"
}

// FuzzTranslateError turns arbitrary upstream error replies into OpenAI
// errors: never nil, always a 4xx or 5xx (529 becomes 503), a non-empty
// message, and a body that is valid JSON. A well-formed Anthropic error
// keeps its message (compared where encoding/json cannot read it another
// way: it matches keys in any case, and for a lone surrogate's escape or
// invalid UTF-8 it writes U+FFFD where fastjson keeps what was sent).
func FuzzTranslateError(f *testing.F) {
	body := func(typ, msg string) []byte {
		b, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]string{"type": typ, "message": msg}})
		return b
	}
	for _, m := range errorMappings {
		f.Add(m.status, body(m.anthropicType, "it failed"))
	}
	f.Add(502, []byte("<html>Bad Gateway</html>"))
	f.Add(0, body("overloaded_error", ""))
	f.Add(200, []byte(`{"type":"error","error":{"type":null,"message":7}}`))
	f.Add(-1, []byte(`{"error":{"message":"\u0000\ud800"}}`))
	f.Add(529, []byte{})
	f.Add(608, []byte("0")) // not an HTTP status: 502
	f.Fuzz(func(t *testing.T, status int, b []byte) {
		e := TranslateError(status, b)
		if e == nil || e.Status < 400 || e.Status > 599 || e.Status == StatusOverloaded || e.Message == "" || e.Type == "" {
			t.Fatalf("TranslateError(%d, %q) = %+v", status, b, e)
		}
		if out := e.AppendJSON(nil); !json.Valid(out) {
			t.Fatalf("TranslateError(%d, %q) renders as %q", status, b, out)
		}
		var v struct {
			Error *struct {
				Message *string `json:"message"`
			} `json:"error"`
		}
		lower := bytes.ToLower(b)
		if json.Unmarshal(b, &v) == nil && v.Error != nil && v.Error.Message != nil && *v.Error.Message != "" &&
			bytes.Count(b, []byte(`"message"`)) == 1 && bytes.Count(lower, []byte(`"message"`)) == 1 &&
			bytes.Count(b, []byte(`"error"`)) == 1 && bytes.Count(lower, []byte(`"error"`)) == 1 &&
			!bytes.Contains(b, []byte(`\u`)) && utf8.Valid(b) && e.Message != *v.Error.Message {
			t.Fatalf("message %q became %q", *v.Error.Message, e.Message)
		}
	})
}
