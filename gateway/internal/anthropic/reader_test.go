package anthropic

import (
	"bytes"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/sse"
)

func TestStreamReaderEnds(t *testing.T) {
	full, err := os.ReadFile("testdata/plain_text.sse")
	if err != nil {
		t.Fatal(err)
	}
	cut := bytes.Index(full, []byte("event: message_delta"))
	errBroken := errors.New("connection reset")
	tests := []struct {
		name    string
		src     io.Reader
		wantErr error  // nil: a clean io.EOF
		also    error  // a further error the result must match
		content string // text the client got
		done    bool
	}{
		{"complete", bytes.NewReader(full), nil, nil, "Hello! How can I help you today?", true},
		{"ends between events before message_stop", bytes.NewReader(full[:cut]), io.ErrUnexpectedEOF, nil, "Hello! How can I help you today?", false},
		{"ends inside an event", bytes.NewReader(full[:cut+30]), io.ErrUnexpectedEOF, nil, "Hello! How can I help you today?", false},
		{"source error passes through", io.MultiReader(bytes.NewReader(full[:cut]), iotestErrReader{errBroken}), errBroken, nil, "Hello! How can I help you today?", false},
		{"event that is not JSON", strings.NewReader("event: message_start\ndata: {oops\n\n"), ErrInvalidEvent, nil, "", false},
		{"event too large", strings.NewReader("data: " + strings.Repeat("x", 2000) + "\n\n"), ErrInvalidEvent, sse.ErrEventTooLarge, "", false},
		{"trailing events after message_stop are dropped", io.MultiReader(bytes.NewReader(full), strings.NewReader("data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"late\"}}\n\n")), nil, nil, "Hello! How can I help you today?", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := NewStreamReader(1024)
			r.Reset(tc.src, "m", "c", 1, false)
			out, err := io.ReadAll(r)
			if tc.wantErr == nil && err != nil || tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Fatalf("err %v, want %v", err, tc.wantErr)
			}
			if tc.also != nil && !errors.Is(err, tc.also) {
				t.Fatalf("err %v, want it to match %v too", err, tc.also)
			}
			res := assemble(t, out)
			if res.Content != tc.content || res.Done != tc.done {
				t.Errorf("content %q done %v; want %q %v", res.Content, res.Done, tc.content, tc.done)
			}
			// Errors are sticky.
			if n, err2 := r.Read(make([]byte, 10)); n != 0 || (err2 != err && !(err == nil && err2 == io.EOF)) {
				t.Errorf("second Read = %d, %v; want 0, %v", n, err2, err)
			}
		})
	}
}

type iotestErrReader struct{ err error }

func (r iotestErrReader) Read([]byte) (int, error) { return 0, r.err }

// TestStreamReaderDoneBeforeDrain checks that [DONE] is handed over as
// soon as message_stop arrives, while the upstream body is still open, and
// that the rest of the body is read before io.EOF.
func TestStreamReaderDoneBeforeDrain(t *testing.T) {
	full, err := os.ReadFile("testdata/plain_text.sse")
	if err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	go func() {
		pw.Write(full)
		time.Sleep(20 * time.Millisecond)
		pw.Write([]byte(": trailing comment\n\n"))
		pw.Close()
	}()
	r := NewStreamReader(0)
	r.Reset(pr, "m", "c", 1, true)
	var got []byte
	buf := make([]byte, 64<<10)
	for !bytes.HasSuffix(got, []byte("data: [DONE]\n\n")) {
		n, err := r.Read(buf)
		if err != nil {
			t.Fatalf("Read before [DONE]: %v", err)
		}
		got = append(got, buf[:n]...)
	}
	if n, err := r.Read(buf); n != 0 || err != io.EOF {
		t.Fatalf("after [DONE]: %d, %v; want 0, EOF", n, err)
	}
	if n, _ := pr.Read(buf); n != 0 {
		t.Fatalf("the upstream body was not drained: %d bytes left", n)
	}
	if u := r.Translator().Usage(); !u.Present || u.PromptTokens != 25 || u.CompletionTokens != 12 {
		t.Errorf("usage %+v", u)
	}
}

func TestStreamReaderResetNil(t *testing.T) {
	r := NewStreamReader(0)
	if n, err := r.Read(make([]byte, 8)); n != 0 || err != io.EOF {
		t.Fatalf("fresh reader: %d, %v", n, err)
	}
	r.Reset(strings.NewReader("data: {\"type\":\"message_stop\"}\n\n"), "m", "c", 1, false)
	out, err := io.ReadAll(r)
	if err != nil || !strings.HasSuffix(string(out), "data: [DONE]\n\n") {
		t.Fatalf("%q, %v", out, err)
	}
	r.Reset(nil, "", "", 0, false)
	if n, err := r.Read(make([]byte, 8)); n != 0 || err != io.EOF {
		t.Fatalf("after Reset(nil): %d, %v", n, err)
	}
}

// arrivedEvents is an upstream body whose events have all arrived, each
// in its own piece (an HTTP chunk): one piece per Read, and Ready says so.
type arrivedEvents struct{ parts [][]byte }

func (a *arrivedEvents) Read(p []byte) (int, error) {
	if len(a.parts) == 0 {
		return 0, io.EOF
	}
	n := copy(p, a.parts[0])
	if a.parts[0] = a.parts[0][n:]; len(a.parts[0]) == 0 {
		a.parts = a.parts[1:]
	}
	return n, nil
}

func (a *arrivedEvents) Ready() bool { return len(a.parts) > 0 }

// Events that arrived together are translated together: one Read hands
// over the whole reply, though the upstream framed each event apart.
func TestStreamReaderTakesWhatHasArrived(t *testing.T) {
	full, err := os.ReadFile("testdata/plain_text.sse")
	if err != nil {
		t.Fatal(err)
	}
	src := &arrivedEvents{}
	for _, ev := range bytes.SplitAfter(full, []byte("\n\n")) {
		if len(ev) > 0 {
			src.parts = append(src.parts, ev)
		}
	}
	if len(src.parts) < 5 {
		t.Fatalf("%d events in the fixture", len(src.parts))
	}
	r := NewStreamReader(0)
	r.Reset(src, "m", "c", 1, false)
	buf := make([]byte, 64<<10)
	n, err := r.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	if res := assemble(t, buf[:n]); res.Content != "Hello! How can I help you today?" || !res.Done {
		t.Fatalf("the first Read got content %q, done %v: not the whole reply", res.Content, res.Done)
	}
}
