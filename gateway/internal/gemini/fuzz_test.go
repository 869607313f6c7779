package gemini

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/tollgate/tollgate/gateway/internal/openai"
)

// geminiRequest is what FuzzAppendRequest checks of a translated body;
// unknown members are errors, so the translation writes only these.
type geminiRequest struct {
	Contents []struct {
		Role  string            `json:"role"`
		Parts []json.RawMessage `json:"parts"`
	} `json:"contents"`
	SystemInstruction *struct {
		Parts []struct {
			Text string `json:"text"`
		} `json:"parts"`
	} `json:"systemInstruction"`
	Tools []struct {
		FunctionDeclarations []json.RawMessage `json:"functionDeclarations"`
	} `json:"tools"`
	ToolConfig       json.RawMessage `json:"toolConfig"`
	GenerationConfig json.RawMessage `json:"generationConfig"`
}

// checkGeminiRequest checks the rules the translation keeps: turns of
// user and model alternate and are not empty, every part has exactly one
// kind of data, and function responses name a function called before.
func checkGeminiRequest(body []byte) error {
	var r geminiRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return err
	}
	if len(r.Contents) == 0 {
		return errors.New("no contents")
	}
	called := map[string]bool{}
	for i, c := range r.Contents {
		if c.Role != "user" && c.Role != "model" {
			return fmt.Errorf("contents[%d]: role %q", i, c.Role)
		}
		if i > 0 && r.Contents[i-1].Role == c.Role {
			return fmt.Errorf("contents[%d]: two %s turns in a row", i, c.Role)
		}
		if len(c.Parts) == 0 {
			return fmt.Errorf("contents[%d]: no parts", i)
		}
		for j, raw := range c.Parts {
			var p map[string]json.RawMessage
			if err := json.Unmarshal(raw, &p); err != nil {
				return err
			}
			delete(p, "thoughtSignature")
			if len(p) != 1 {
				return fmt.Errorf("contents[%d].parts[%d]: %d kinds of data", i, j, len(p))
			}
			var fn struct {
				Name string          `json:"name"`
				Args json.RawMessage `json:"args"`
			}
			if raw, ok := p["functionCall"]; ok {
				if err := json.Unmarshal(raw, &fn); err != nil || fn.Name == "" || fn.Args[0] != '{' {
					return fmt.Errorf("contents[%d].parts[%d]: bad functionCall %s", i, j, raw)
				}
				called[fn.Name] = true
			}
			if raw, ok := p["functionResponse"]; ok {
				var resp struct {
					Name     string          `json:"name"`
					Response json.RawMessage `json:"response"`
				}
				if err := json.Unmarshal(raw, &resp); err != nil || !called[resp.Name] || resp.Response[0] != '{' {
					return fmt.Errorf("contents[%d].parts[%d]: bad functionResponse %s", i, j, raw)
				}
			}
			if raw, ok := p["text"]; ok && string(raw) == `""` {
				return fmt.Errorf("contents[%d].parts[%d]: empty text", i, j)
			}
		}
	}
	return nil
}

// FuzzAppendRequest checks that AppendRequest never panics, that a
// refusal is a 400 *openai.Error that leaves dst alone, and that whatever
// it accepts is a request that keeps Gemini's rules.
func FuzzAppendRequest(f *testing.F) {
	for _, tc := range requestTests {
		f.Add([]byte(tc.in))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		orig := bytes.Clone(body)
		out, err := AppendRequest([]byte("dst"), body)
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
		if err := checkGeminiRequest(got); err != nil {
			t.Fatalf("%v\nin:  %q\nout: %s", err, body, got)
		}
	})
}

// FuzzAppendResponse checks that any reply becomes a valid chat.completion
// or a *openai.Error that leaves dst alone.
func FuzzAppendResponse(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "response_*.json"))
	for _, name := range files {
		if b, err := os.ReadFile(name); err == nil && !bytes.Contains([]byte(name), []byte(".golden")) {
			f.Add(b)
		}
	}
	f.Add([]byte(`{"error":{"code":400,"status":"INVALID_ARGUMENT"}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		out, err := AppendResponse([]byte("dst"), body, "m", "id", 1)
		if err != nil {
			var e *openai.Error
			if !errors.As(err, &e) || e.Status < 400 || e.Status > 599 || string(out) != "dst" {
				t.Fatalf("error %#v, out %q", err, out)
			}
			return
		}
		var c struct {
			Object  string `json:"object"`
			Choices []struct {
				FinishReason string `json:"finish_reason"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(out[3:], &c); err != nil || c.Object != "chat.completion" || len(c.Choices) != 1 || c.Choices[0].FinishReason == "" {
			t.Fatalf("bad completion %s (%v) for %q", out, err, body)
		}
	})
}

// FuzzStreamReader reads random bodies as Gemini streams: whatever comes
// out before the end is a well-formed chunk stream, and a stream that ends
// cleanly ends with [DONE] or an error event.
func FuzzStreamReader(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.sse"))
	for _, name := range files {
		if b, err := os.ReadFile(name); err == nil {
			f.Add(b, true)
		}
	}
	f.Fuzz(func(t *testing.T, body []byte, includeUsage bool) {
		out, err := readAllStream(bytes.NewReader(body), "m", "id", includeUsage)
		events := bytes.Split(out, []byte("\n\n"))
		if len(events[len(events)-1]) != 0 {
			t.Fatalf("output does not end with a blank line: %q", out)
		}
		events = events[:len(events)-1]
		for i, ev := range events {
			data, ok := bytes.CutPrefix(ev, []byte("data: "))
			if !ok || bytes.IndexByte(data, '\n') >= 0 {
				t.Fatalf("event %d is not one data line: %q", i, ev)
			}
			if string(data) == "[DONE]" {
				if i != len(events)-1 || err != nil {
					t.Fatalf("[DONE] at %d of %d, err %v", i, len(events), err)
				}
				continue
			}
			if !json.Valid(data) {
				t.Fatalf("invalid JSON %q", data)
			}
		}
		if err == nil && len(events) > 0 {
			last := events[len(events)-1]
			if string(last) != "data: [DONE]" && !bytes.HasPrefix(last, []byte(`data: {"error"`)) {
				t.Fatalf("clean end without [DONE] or an error: %q", last)
			}
		}
	})
}

// FuzzTranslateError checks that any error body maps to an error status.
func FuzzTranslateError(f *testing.F) {
	f.Add(400, []byte(`{"error":{"code":400,"message":"x","status":"INVALID_ARGUMENT"}}`))
	f.Add(0, []byte(`[{"error":{"code":"503","status":"UNAVAILABLE"}}]`))
	f.Add(429, []byte(`{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"37.5s"}]}}`))
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		e := TranslateError(status, body)
		if e == nil || e.Status < 400 || e.Status > 599 || e.Type == "" || e.Message == "" {
			t.Fatalf("TranslateError(%d, %q) = %+v", status, body, e)
		}
		if n, ok := RetryDelay(body); ok != (n > 0) || n > maxRetryDelay {
			t.Fatalf("RetryDelay(%q) = %d, %v", body, n, ok)
		}
	})
}
