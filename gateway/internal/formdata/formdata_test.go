package formdata

import (
	"bytes"
	"errors"
	"io"
	"mime/multipart"
	"strings"
	"testing"
)

// form builds a body with Go's multipart writer, as an SDK would.
func form(t testing.TB, boundary string, fields ...[2]string) []byte {
	t.Helper()
	var b bytes.Buffer
	w := multipart.NewWriter(&b)
	if err := w.SetBoundary(boundary); err != nil {
		t.Fatal(err)
	}
	for _, f := range fields {
		var err error
		var fw io.Writer
		if name, ok := strings.CutPrefix(f[0], "file:"); ok {
			fw, err = w.CreateFormFile(name, "a.png")
		} else {
			fw, err = w.CreateFormField(f[0])
		}
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(fw, f[1])
	}
	w.Close()
	return b.Bytes()
}

func TestBoundary(t *testing.T) {
	tests := []struct {
		ct, want string
		bad      bool
	}{
		{ct: `multipart/form-data; boundary=abc`, want: "abc"},
		{ct: `Multipart/Form-Data; boundary="a b:c"`, want: "a b:c"},
		{ct: `multipart/form-data`, bad: true},
		{ct: `multipart/mixed; boundary=abc`, bad: true},
		{ct: `application/json`, bad: true},
		{ct: `multipart/form-data; boundary=` + strings.Repeat("x", 71), bad: true},
		{ct: `multipart/form-data; boundary="`, bad: true},
	}
	for _, tt := range tests {
		t.Run(tt.ct, func(t *testing.T) {
			got, err := Boundary([]byte(tt.ct))
			if tt.bad {
				if !errors.Is(err, ErrMalformed) {
					t.Fatalf("Boundary = %q, %v; want ErrMalformed", got, err)
				}
				return
			}
			if err != nil || string(got) != tt.want {
				t.Fatalf("Boundary = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestField(t *testing.T) {
	const bd = "XyZ"
	tests := []struct {
		name      string
		body      []byte
		want      string
		found     bool
		wantParts int
		err       string // a substring of the error; "" for none
	}{
		{name: "model after file", body: form(t, bd, [2]string{"file:image", "\x89PNG\r\n--XyZa\r\n\r\n"}, [2]string{"model", "gpt-image-1"}),
			want: "gpt-image-1", found: true, wantParts: 2},
		{name: "model first", body: form(t, bd, [2]string{"model", "whisper-1"}, [2]string{"file:file", "RIFF"}, [2]string{"stream", "true"}),
			want: "whisper-1", found: true, wantParts: 3},
		{name: "no model", body: form(t, bd, [2]string{"purpose", "batch"}, [2]string{"file:file", "{}"}), wantParts: 2},
		{name: "empty form", body: []byte("--XyZ--\r\n"), wantParts: 0},
		{name: "empty form without CRLF", body: []byte("--XyZ--"), wantParts: 0},
		{name: "padding after boundaries", body: []byte("--XyZ \t\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nm\r\n--XyZ-- \r\nepilogue"),
			want: "m", found: true, wantParts: 1},
		{name: "model twice", body: form(t, bd, [2]string{"model", "a"}, [2]string{"model", "b"}), err: "more than once"},
		{name: "model as a file", body: form(t, bd, [2]string{"file:model", "a"}), err: "is a file"},
		{name: "preamble", body: append([]byte("hello\r\n"), form(t, bd, [2]string{"model", "a"})...), err: "does not start"},
		{name: "bare LF framing", body: []byte("--XyZ\nContent-Disposition: form-data; name=\"model\"\n\nm\n--XyZ--\n"), err: "more after the boundary"},
		{name: "no closing boundary", body: []byte("--XyZ\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nm"), err: "does not end with a boundary"},
		{name: "headers do not end", body: []byte("--XyZ\r\nContent-Disposition: form-data; name=\"model\""), err: "headers do not end"},
		{name: "folded header", body: []byte("--XyZ\r\nContent-Disposition: form-data;\r\n name=\"model\"\r\n\r\nm\r\n--XyZ--"), err: "no name"},
		{name: "disposition twice", body: []byte("--XyZ\r\nContent-Disposition: form-data; name=\"a\"\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nm\r\n--XyZ--"), err: "twice"},
		{name: "no disposition", body: []byte("--XyZ\r\nContent-Type: text/plain\r\n\r\nm\r\n--XyZ--"), err: "no Content-Disposition"},
		{name: "not form-data", body: []byte("--XyZ\r\nContent-Disposition: attachment; name=\"model\"\r\n\r\nm\r\n--XyZ--"), err: "not form-data"},
		{name: "RFC 2231 name", body: []byte("--XyZ\r\nContent-Disposition: form-data; name*=UTF-8''model\r\n\r\nm\r\n--XyZ--"),
			want: "m", found: true, wantParts: 1},
		{name: "quoted-printable model", body: []byte("--XyZ\r\nContent-Disposition: form-data; name=\"model\"\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\nm=3D\r\n--XyZ--"), err: "Content-Transfer-Encoding"},
		{name: "header name not a token", body: []byte("--XyZ\r\nContent Disposition: form-data; name=\"model\"\r\n\r\nm\r\n--XyZ--"), err: "not a token"},
		{name: "boundary-like content", body: []byte("--XyZ\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nm\r\n--XyZq\r\n--XyZ--"),
			want: "m\r\n--XyZq", found: true, wantParts: 1},
		{name: "junk after boundary", body: []byte("--XyZ\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nm\r\n--XyZ x\r\n"), err: "more after the boundary"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parts, err := Parts(nil, tt.body, []byte(bd))
			var v []byte
			var found bool
			if err == nil {
				v, found, err = Field(parts, "model")
			}
			if tt.err != "" {
				if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v; want ErrMalformed containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(v) != tt.want || found != tt.found || len(parts) != tt.wantParts {
				t.Fatalf("model %q found %v in %d parts; want %q %v in %d", v, found, len(parts), tt.want, tt.found, tt.wantParts)
			}
			if found && len(v) > 0 && !within(v, tt.body) {
				t.Fatal("the value is a copy, not the body's bytes")
			}
		})
	}
}

// within reports whether v is a slice of body's memory.
func within(v, body []byte) bool {
	for i := range body {
		if &body[i] == &v[0] {
			return i+len(v) <= len(body)
		}
	}
	return false
}

func TestTooManyParts(t *testing.T) {
	fields := make([][2]string, MaxParts+1)
	for i := range fields {
		fields[i] = [2]string{"f", "v"}
	}
	_, err := Parts(nil, form(t, "b", fields...), []byte("b"))
	if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "more than 256 parts") {
		t.Fatalf("err = %v", err)
	}
	if _, err := Parts(nil, form(t, "b", fields[:MaxParts]...), []byte("b")); err != nil {
		t.Fatalf("%d parts: %v", MaxParts, err)
	}
}

func TestPartsAllocations(t *testing.T) {
	body := form(t, "XyZ", [2]string{"file:file", strings.Repeat("a", 1<<20)}, [2]string{"model", "whisper-1"})
	parts := make([]Part, 0, 4)
	allocs := testing.AllocsPerRun(20, func() {
		var err error
		if parts, err = Parts(parts[:0], body, []byte("XyZ")); err != nil || len(parts) != 2 {
			t.Fatal(err)
		}
	})
	// The delimiter and mime.ParseMediaType's map and strings per part;
	// never the content.
	if allocs > 16 {
		t.Fatalf("%v allocations reading a 1 MiB form; want at most 16", allocs)
	}
}

func BenchmarkParts(b *testing.B) {
	body := form(b, "------------------------d74496d66958873e",
		[2]string{"file:file", strings.Repeat("a", 1<<20)}, [2]string{"model", "whisper-1"}, [2]string{"response_format", "json"})
	bd := []byte("------------------------d74496d66958873e")
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	parts := make([]Part, 0, 4)
	for b.Loop() {
		parts, _ = Parts(parts[:0], body, bd)
	}
}
