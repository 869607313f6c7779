package openai

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// FuzzRequestParse checks that Parse never panics, that what it accepts is
// valid JSON to encoding/json too, that it names none of the members the
// gateway decides on twice or in another case (read by encoding/json's
// own tokenizer and case folding, as a Go upstream would), and that for
// accepted streaming bodies
// AppendWithIncludeUsage yields JSON with stream_options.include_usage true
// and every other top-level member unchanged.
func FuzzRequestParse(f *testing.F) {
	f.Add([]byte(chatBody), uint8(ChatCompletions))
	f.Add([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":false}}`), uint8(ChatCompletions))
	f.Add([]byte(`{"model":"m","prompt":["a","b"],"stream":true}`), uint8(Completions))
	f.Add([]byte(`{"model":"m","input":[[1,2],[3]]}`), uint8(Embeddings))
	f.Add([]byte(`{"stream\u005foptions":null,"model":"m","prompt":"x","stream":true}`), uint8(Completions))
	f.Add([]byte(`{"model":"m","MODEL":"x","messages":[{"role":"user"}]}`), uint8(ChatCompletions))
	f.Add([]byte(`{"model":"m","messages":[{"role":"user"}],"max_to\u212aens":1,"max_tokens":2}`), uint8(ChatCompletions))
	f.Fuzz(func(t *testing.T, body []byte, epb uint8) {
		ep := Endpoint(epb%3 + 1)
		var p RequestParser
		var r Request
		orig := bytes.Clone(body)
		err := p.Parse(body, ep, &r)
		if !bytes.Equal(body, orig) {
			t.Fatal("Parse modified the body")
		}
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("error %T is not *Error", err)
			}
			return
		}
		if !json.Valid(body) {
			t.Fatalf("Parse accepted invalid JSON %q", body)
		}
		if len(r.Model) == 0 || r.EstimatedPromptTokens < 1 || r.Messages < 1 {
			t.Fatalf("accepted request without model, estimate or messages: %+v", r)
		}
		checkMembersOnce(t, body)
		if !r.Stream {
			return
		}
		out, err := AppendWithIncludeUsage(nil, body)
		if err != nil {
			t.Fatalf("AppendWithIncludeUsage(%q): %v", body, err)
		}
		checkIncludeUsage(t, body, out)
		// The rewritten body must parse the same way, now with usage.
		var r2 Request
		if err := p.Parse(out, ep, &r2); err != nil {
			t.Fatalf("rewritten body rejected: %v\n%q", err, out)
		}
		if !r2.IncludeUsage || !r2.HasStreamOptions || !r2.Stream {
			t.Fatalf("rewritten body: %+v", r2)
		}
	})
}

// FuzzChunkParse checks that ChunkParser.Parse never panics and keeps its
// basic invariants on arbitrary data.
func FuzzChunkParse(f *testing.F) {
	for _, s := range []string{chunkRole, chunkText, chunkStop, chunkUsage, chunkTool1, chunkTool2, chunkCompl, chunkComplEnd, chunkError, "[DONE]", "{}"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var p ChunkParser
		var c Chunk
		err := p.Parse(data, &c)
		if err != nil {
			if c.Done || c.Choices != 0 || c.Usage.Present {
				t.Fatalf("failed Parse left state: %+v", c)
			}
			return
		}
		if c.Done != (string(data) == "[DONE]") {
			t.Fatalf("Done = %v for %q", c.Done, data)
		}
		if c.HasText != (c.Text != nil) {
			t.Fatalf("HasText %v with Text %q", c.HasText, c.Text)
		}
		if c.Choices == 0 && (c.HasText || c.Role != nil || len(c.ToolCalls) != 0 || c.FinishReason != nil) {
			t.Fatalf("choice fields without choices: %+v", c)
		}
		// Parsing again into the same Chunk gives the same result.
		c1 := fmtChunk(c)
		if err := p.Parse(data, &c); err != nil || fmtChunk(c) != c1 {
			t.Fatalf("second Parse differs: %v\n%s\n%s", err, c1, fmtChunk(c))
		}
	})
}

// checkMembersOnce fails when an accepted body names a checked member more
// than once, counting every key encoding/json would match to it.
func checkMembersOnce(t *testing.T, body []byte) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("accepted body does not start an object: %v %v", tok, err)
	}
	seen := map[string]int{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatalf("reading a key: %v", err)
		}
		key := tok.(string)
		for _, m := range checkedMembers {
			if strings.EqualFold(key, string(m)) {
				seen[string(m)]++
				if seen[string(m)] > 1 || key != string(m) {
					t.Fatalf("accepted a body whose key %q repeats or folds to %q: %s", key, m, body)
				}
			}
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatalf("reading a value: %v", err)
		}
	}
}
