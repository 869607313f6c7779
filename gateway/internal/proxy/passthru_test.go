package proxy

import (
	"bytes"
	"testing"

	"github.com/tollgate/tollgate/gateway/internal/openai"
	"github.com/tollgate/tollgate/gateway/internal/provider"
)

func TestPassEndpointFor(t *testing.T) {
	tests := []struct {
		method, path string
		label, id    string // label "" with ok: a 405 with allow
		allow        string
		ok           bool
	}{
		{"POST", "/v1/images/generations", "/v1/images/generations", "", "", true},
		{"POST", "/v1/images/edits", "/v1/images/edits", "", "", true},
		{"POST", "/v1/audio/speech", "/v1/audio/speech", "", "", true},
		{"POST", "/v1/moderations", "/v1/moderations", "", "", true},
		{"GET", "/v1/moderations", "", "", "POST", true},
		{"POST", "/v1/files", "/v1/files", "", "", true},
		{"GET", "/v1/files", "/v1/files", "", "", true},
		{"PUT", "/v1/files", "", "", "POST, GET", true},
		{"GET", "/v1/files/file-abc", "/v1/files/{id}", "file-abc", "", true},
		{"DELETE", "/v1/files/file-abc", "/v1/files/{id}", "file-abc", "", true},
		{"POST", "/v1/files/file-abc", "", "", "GET, DELETE", true},
		{"GET", "/v1/files/file-abc/content", "/v1/files/{id}/content", "file-abc", "", true},
		{"GET", "/v1/batches/batch_1", "/v1/batches/{id}", "batch_1", "", true},
		{"POST", "/v1/batches/batch_1/cancel", "/v1/batches/{id}/cancel", "batch_1", "", true},
		{"GET", "/v1/batches/batch_1/cancel", "", "", "POST", true},
		{"GET", "/v1/files/", "", "", "", false},
		{"GET", "/v1/files/a/b/c", "", "", "", false},
		{"GET", "/v1/files/a/other", "", "", "", false},
		{"GET", "/v1/filesx", "", "", "", false},
		{"POST", "/v1/images/other", "", "", "", false},
		{"POST", "/v2/images/generations", "", "", "", false},
		{"POST", "/v1/chat/completions", "", "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			pe, id, allow, ok := passEndpointFor([]byte(tt.method), []byte(tt.path))
			label := ""
			if pe != nil {
				label = pe.label
				if pe.method != tt.method {
					t.Errorf("endpoint method %s", pe.method)
				}
			}
			if ok != tt.ok || label != tt.label || string(id) != tt.id || allow != tt.allow {
				t.Errorf("= %q %q %q %v; want %q %q %q %v", label, id, allow, ok, tt.label, tt.id, tt.allow, tt.ok)
			}
		})
	}
}

// FuzzPassEndpointFor checks that every path maps to at most one endpoint,
// that an id it returns is the path's own segment, and that the upstream
// path built from an id that passes validObjectID stays under the
// endpoint's path.
func FuzzPassEndpointFor(f *testing.F) {
	for _, s := range []string{"/v1/files/file-1/content", "/v1/batches/b/cancel", "/v1/images/edits", "/v1/files/../x", "/v1/files//content"} {
		f.Add("GET", s)
	}
	f.Fuzz(func(t *testing.T, method, path string) {
		pe, id, allow, ok := passEndpointFor([]byte(method), []byte(path))
		if !ok {
			if pe != nil || id != nil || allow != "" {
				t.Fatalf("not found but %v %q %q", pe, id, allow)
			}
			return
		}
		if pe == nil {
			if allow == "" {
				t.Fatal("a 405 without Allow")
			}
			return
		}
		if pe.method != method {
			t.Fatalf("method %q served by %s %s", method, pe.method, pe.label)
		}
		if id != nil && !bytes.Contains([]byte(path), id) {
			t.Fatalf("id %q not in %q", id, path)
		}
		if validObjectID(id) && bytes.Contains(id, []byte("/")) {
			t.Fatalf("id %q with a slash", id)
		}
		if (id != nil) != bytes.Contains([]byte(pe.label), []byte("{id}")) {
			t.Fatalf("id %q for %s", id, pe.label)
		}
	})
}

func TestValidObjectID(t *testing.T) {
	for id, want := range map[string]bool{"file-abc123": true, "batch_6a.b": true, "": false, ".": false, "..": false,
		"a/b": false, "a%2Fb": false, "a b": false, "a?b": false} {
		if got := validObjectID([]byte(id)); got != want {
			t.Errorf("validObjectID(%q) = %v", id, got)
		}
	}
}

func TestPassUsage(t *testing.T) {
	tests := []struct {
		name string
		ep   openai.Endpoint
		body string
		want openai.Usage
	}{
		{"image", endpointImagesGenerations, `{"data":[],"usage":{"input_tokens":6,"output_tokens":10,"total_tokens":16,"input_tokens_details":{"text_tokens":4,"image_tokens":2}}}`,
			openai.Usage{Present: true, PromptTokens: 6, CompletionTokens: 10, TotalTokens: 16, ImageInputTokens: 2, ImageOutputTokens: 10}},
		{"image edit", endpointImagesEdits, `{"usage":{"input_tokens":300,"output_tokens":1056,"input_tokens_details":{"text_tokens":44,"image_tokens":256}}}`,
			openai.Usage{Present: true, PromptTokens: 300, CompletionTokens: 1056, ImageInputTokens: 256, ImageOutputTokens: 1056}},
		{"transcription", endpointAudioTranscriptions, `{"text":"x","usage":{"type":"tokens","input_tokens":3,"output_tokens":0,"input_token_details":{"text_tokens":1,"audio_tokens":2}}}`,
			openai.Usage{Present: true, PromptTokens: 3, AudioInputTokens: 2}},
		{"speech", endpointAudioSpeech, `{"type":"speech.audio.done","usage":{"input_tokens":14,"output_tokens":101,"total_tokens":115}}`,
			openai.Usage{Present: true, PromptTokens: 14, CompletionTokens: 101, TotalTokens: 115, AudioOutputTokens: 101}},
		{"duration", endpointAudioTranscriptions, `{"text":"x","usage":{"type":"duration","seconds":4}}`, openai.Usage{}},
		{"no usage", endpointAudioTranscriptions, `{"text":"x"}`, openai.Usage{}},
		{"total only", endpointImagesGenerations, `{"usage":{"total_tokens":5}}`, openai.Usage{}},
		{"null", endpointImagesGenerations, `{"usage":null}`, openai.Usage{}},
		{"not json", endpointImagesGenerations, `not json`, openai.Usage{}},
		{"negative", endpointAudioTranscriptions, `{"usage":{"input_tokens":-4,"output_tokens":2}}`, openai.Usage{Present: true, CompletionTokens: 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := passUsage([]byte(tt.body), tt.ep); got != tt.want {
				t.Errorf("passUsage(%s) = %+v; want %+v", tt.body, got, tt.want)
			}
		})
	}
}

func TestPassRelayScan(t *testing.T) {
	stream := "data: {\"type\":\"transcript.text.delta\",\"delta\":\"a\"}\n\n" +
		"data: {\"type\":\"transcript.text.done\",\"text\":\"a\",\"usage\":{\"type\":\"tokens\",\"input_tokens\":7,\"output_tokens\":1}}\n\n"
	for _, size := range []int{1, 3, 17, len(stream)} {
		r := &passRelay{scan: true}
		for off := 0; off < len(stream); off += size {
			r.scanLines([]byte(stream[off:min(off+size, len(stream))]))
		}
		if !r.usage.Present || r.usage.PromptTokens != 7 || r.usage.CompletionTokens != 1 {
			t.Errorf("read %d bytes at a time: usage %+v; want 7 in, 1 out", size, r.usage)
		}
	}
	r := &passRelay{scan: true}
	r.scanLines(bytes.Repeat([]byte("x"), maxUsageLine+1))
	r.scanLines([]byte("data: {\"usage\":{\"input_tokens\":1}}\n"))
	if r.usage.Present {
		t.Error("an over-long line was read as an event")
	}
	r.scanLines([]byte("data: {\"usage\":{\"input_tokens\":2}}\n"))
	if r.usage.PromptTokens != 2 {
		t.Errorf("the line after an over-long one: %+v", r.usage)
	}
}

// azureLike addresses images under a deployment path and nothing else.
type azureLike struct{}

func (azureLike) Serves(ep openai.Endpoint) bool { return ep == openai.ChatCompletions }
func (azureLike) Request(*provider.Outbound, openai.Endpoint, string, bool, []byte) error {
	return nil
}
func (azureLike) AppendPassthroughPath(dst []byte, p, model string) ([]byte, bool) {
	if p != "/images/generations" {
		return dst, false
	}
	return append(append(append(dst, "/openai/deployments/"...), model...), p+"?api-version=x"...), true
}

func TestPassUnservable(t *testing.T) {
	openaiT := target{bind: &binding{}}
	anthropicT := target{bind: &binding{adapter: &provider.Anthropic{}}}
	azureT := target{bind: &binding{adapter: azureLike{}}}
	rt := &route{targets: []target{openaiT, anthropicT, azureT}}
	tests := []struct {
		ep   openai.Endpoint
		want uint64
	}{
		{endpointImagesGenerations, 0b010},
		{endpointAudioSpeech, 0b110},
	}
	for _, tt := range tests {
		pe := passEndpointOf(tt.ep)
		if got := passUnservable(rt, pe, []byte("m")); got != tt.want {
			t.Errorf("%s: mask %03b; want %03b", pe.label, got, tt.want)
		}
	}
	p, ok := passAddress(nil, &azureT, "/images/generations", "dep-1")
	if !ok || string(p) != "/openai/deployments/dep-1/images/generations?api-version=x" {
		t.Errorf("azure-like path %q %v", p, ok)
	}
	if p, ok := passAddress(nil, &openaiT, "/files/file-1/content?x=1", ""); !ok || string(p) != "/files/file-1/content?x=1" {
		t.Errorf("openai path %q %v", p, ok)
	}
}

// FuzzPassRelayScan checks that a relayed stream's usage does not depend
// on how the upstream's bytes were cut into reads: scanning the stream in
// pieces of any size finds what scanning it whole finds.
func FuzzPassRelayScan(f *testing.F) {
	f.Add([]byte("data: {\"type\":\"transcript.text.done\",\"usage\":{\"input_tokens\":7,\"output_tokens\":1}}\n\n"), uint8(3))
	f.Add([]byte("event: x\ndata: {\"usage\":{\"input_tokens\":1}}\r\ndata: {\"usage\":{\"type\":\"duration\"}}\n"), uint8(1))
	f.Fuzz(func(t *testing.T, stream []byte, size uint8) {
		whole := &passRelay{scan: true}
		whole.scanLines(stream)
		cut := &passRelay{scan: true}
		n := int(size) + 1
		for off := 0; off < len(stream); off += n {
			cut.scanLines(stream[off:min(off+n, len(stream))])
		}
		if whole.usage != cut.usage {
			t.Fatalf("whole %+v, in pieces of %d %+v", whole.usage, n, cut.usage)
		}
	})
}
