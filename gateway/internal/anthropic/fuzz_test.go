package anthropic

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/tollgate/tollgate/gateway/internal/openai"
)

// FuzzAppendRequest checks that AppendRequest never panics, that a refusal
// is a 400 *openai.Error that leaves dst alone, and that whatever it
// accepts becomes a Messages API request that keeps Anthropic's rules
// (alternating non-empty turns, tool results first, object tool inputs).
func FuzzAppendRequest(f *testing.F) {
	for _, tc := range requestTests {
		f.Add([]byte(tc.in), int16(tc.def))
	}
	for _, tc := range requestErrorTests {
		f.Add([]byte(tc.in), int16(0))
	}
	f.Fuzz(func(t *testing.T, body []byte, def int16) {
		orig := bytes.Clone(body)
		out, err := AppendRequest([]byte("dst"), body, int(def))
		if !bytes.Equal(body, orig) {
			t.Fatal("AppendRequest modified its input")
		}
		if err != nil {
			var e *openai.Error
			if !errors.As(err, &e) || e.Status != 400 || e.Type != openai.TypeInvalidRequest || e.Message == "" {
				t.Fatalf("error %#v is not a 400 *openai.Error", err)
			}
			if string(out) != "dst" {
				t.Fatalf("dst changed on error: %q", out)
			}
			return
		}
		got, ok := bytes.CutPrefix(out, []byte("dst"))
		if !ok || !json.Valid(got) {
			t.Fatalf("invalid output %q for %q", out, body)
		}
		var r anthropicRequest
		if err := decodeStrictErr(got, &r); err != nil {
			t.Fatalf("%v\nin:  %q\nout: %s", err, body, got)
		}
		if err := checkAnthropicRequest(&r); err != nil {
			t.Fatalf("%v\nin:  %q\nout: %s", err, body, got)
		}
	})
}

// FuzzStreamTranslator feeds random event sequences — each input line is
// one event's data, an optional "data: " prefix removed and "event:"
// lines skipped, so the recorded streams seed it as they are — and checks
// that nothing panics and every emitted event is one line of valid JSON
// shaped like an OpenAI chunk or error (or [DONE], last). The same input is
// also read as a raw SSE stream through StreamReader.
func FuzzStreamTranslator(f *testing.F) {
	files, err := filepath.Glob("testdata/*.sse")
	if err != nil || len(files) == 0 {
		f.Fatalf("no seed streams: %v", err)
	}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, true)
	}
	f.Add([]byte(textDeltaEvent+"\n"+argsDeltaEvent+"\n"+pingEvent), false)
	f.Fuzz(func(t *testing.T, in []byte, includeUsage bool) {
		var tr StreamTranslator
		tr.Reset("m", "", 1, includeUsage)
		var out []byte
		for line := range bytes.SplitSeq(in, []byte("\n")) {
			if bytes.HasPrefix(line, []byte("event:")) || len(line) == 0 {
				continue
			}
			line = bytes.TrimPrefix(line, []byte("data: "))
			before := len(out)
			wasDone := tr.Done()
			var err error
			out, err = tr.Append(out, line, nil)
			if err != nil && !errors.Is(err, ErrInvalidEvent) {
				t.Fatalf("error %v does not wrap ErrInvalidEvent", err)
			}
			if (err != nil || wasDone) && len(out) != before {
				t.Fatalf("output after an error or the end: %q", out[before:])
			}
		}
		if err := checkChunks(out, tr.Done()); err != nil {
			t.Fatalf("%v\nin: %q", err, in)
		}

		r := NewStreamReader(4096)
		r.Reset(iotest.HalfReader(bytes.NewReader(in)), "m", "c", 1, includeUsage)
		got, err := io.ReadAll(r)
		if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, ErrInvalidEvent) {
			t.Fatalf("StreamReader: unexpected error %v", err)
		}
		if err := checkChunks(got, r.Translator().Done()); err != nil {
			t.Fatalf("StreamReader: %v\nin: %q", err, in)
		}
	})
}

// checkChunks checks the framing and JSON of translated output; done says
// whether the stream ended ([DONE] or an error event must then be last).
func checkChunks(out []byte, done bool) error {
	if len(out) == 0 {
		if done {
			return errors.New("done without output")
		}
		return nil
	}
	if !bytes.HasSuffix(out, []byte("\n\n")) {
		return fmt.Errorf("output does not end with a blank line: %q", out)
	}
	events := strings.Split(strings.TrimSuffix(string(out), "\n\n"), "\n\n")
	for i, ev := range events {
		data, ok := strings.CutPrefix(ev, "data: ")
		if !ok || strings.ContainsAny(data, "\r\n") {
			return fmt.Errorf("event %d is not one data line: %q", i, ev)
		}
		last := i == len(events)-1
		if data == "[DONE]" {
			if !last || !done {
				return fmt.Errorf("[DONE] at event %d of %d (done %v)", i, len(events), done)
			}
			continue
		}
		if !json.Valid([]byte(data)) {
			return fmt.Errorf("event %d is not valid JSON: %q", i, data)
		}
		if strings.HasPrefix(data, `{"error":`) {
			if !last || !done {
				return fmt.Errorf("error event %d of %d (done %v)", i, len(events), done)
			}
			var e oaErrorBody
			if err := decodeStrictErr([]byte(data), &e); err != nil {
				return err
			}
			continue
		}
		var c oaChunk
		if err := decodeStrictErr([]byte(data), &c); err != nil {
			return err
		}
		if c.Object != "chat.completion.chunk" || (len(c.Choices) == 0) != (c.Usage != nil) {
			return fmt.Errorf("event %d: bad chunk %s", i, data)
		}
	}
	if done && !strings.HasSuffix(string(out), "data: [DONE]\n\n") && !strings.HasPrefix(events[len(events)-1], `data: {"error":`) {
		return errors.New("done, but the output ends with neither [DONE] nor an error")
	}
	return nil
}

func decodeStrictErr(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("decoding %T: %v\n%s", v, err, data)
	}
	if dec.More() {
		return fmt.Errorf("trailing data after %T", v)
	}
	return nil
}

// FuzzAppendResponse checks that AppendResponse never panics, that its
// errors are *openai.Error leaving dst alone, and that what it writes is a
// chat.completion with one choice and JSON tool arguments. It also
// checks TranslateError on the same bytes.
func FuzzAppendResponse(f *testing.F) {
	files, err := filepath.Glob("testdata/response_*.json")
	if err != nil || len(files) == 0 {
		f.Fatalf("no seed replies: %v", err)
	}
	for _, name := range files {
		if strings.HasSuffix(name, ".golden.json") {
			continue
		}
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, "", uint16(200))
		f.Add(b, "claude-alias", uint16(529))
	}
	f.Fuzz(func(t *testing.T, body []byte, model string, status uint16) {
		out, err := AppendResponse([]byte("dst"), body, model, "chatcmpl-1", 1)
		if err != nil {
			var e *openai.Error
			if !errors.As(err, &e) || e.Status < 400 || e.Message == "" || string(out) != "dst" {
				t.Fatalf("error %#v, dst %q", err, out)
			}
		} else {
			got, _ := bytes.CutPrefix(out, []byte("dst"))
			var c oaCompletion
			if err := decodeStrictErr(got, &c); err != nil {
				t.Fatalf("%v\nin: %q", err, body)
			}
			if len(c.Choices) != 1 || c.Object != "chat.completion" || c.ID != "chatcmpl-1" || (model != "" && c.Model != string([]rune(model))) {
				t.Fatalf("bad completion %s", got)
			}
			switch c.Choices[0].FinishReason {
			case "stop", "length", "tool_calls", "content_filter":
			default:
				t.Fatalf("finish_reason %q", c.Choices[0].FinishReason)
			}
			for _, tc := range c.Choices[0].Message.ToolCalls {
				if tc.Function.Arguments == nil || !json.Valid([]byte(*tc.Function.Arguments)) {
					t.Fatalf("tool arguments %v are not JSON", tc.Function.Arguments)
				}
			}
		}
		e := TranslateError(int(status), body)
		if e == nil || e.Status < 400 || e.Message == "" || !json.Valid(e.AppendJSON(nil)) {
			t.Fatalf("TranslateError(%d, %q) = %+v", status, body, e)
		}
	})
}
