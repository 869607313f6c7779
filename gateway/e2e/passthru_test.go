package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/tollgate/tollgate/gateway/internal/testkit/mockllm"
)

// passPolicy routes the passthrough test models to the mock (upstream
// "up"), claude-* to an Anthropic upstream, and serves /v1/files and
// /v1/batches from "up" to plan "files" only, with the built-in plugins
// as `make run` has them (preflight, ratelimit, budget, holdback): tenant acme (plan files, key tg_pt_1, rpm per key), tenant other
// (plan basic, key tg_pt_other).
func passPolicy(t *testing.T, mockURL string, rpm int) string {
	return fmt.Sprintf(`
version: 1
server:
  max_body_bytes: 256KiB
  drain_timeout: 2s
upstreams:
  - name: up
    base_url: %s/v1
    api_key_env: UP_KEY
    forward_headers: ["x-mock-*"]
    timeouts: {connect: 1s, first_byte: 5s, idle: 5s, total: 30s}
  - name: claude
    provider: anthropic
    base_url: %s/v1
    api_key_env: UP_KEY
routes:
  - models: ["mock-*", "gpt-image-*", "dall-e-*", "tts-*", "gpt-4o-*", "whisper-*", "omni-*"]
    upstream: up
  - models: ["claude-*"]
    upstream: claude
passthrough:
  files: {plans: [files]}
store:
  kind: memory
tenants:
  plans:
    - {id: files, monthly_budget_usd: 5, allowed_models: ["mock-*", "gpt-*", "dall-e-*", "tts-*", "whisper-*", "omni-*", "claude-*"]}
    - {id: basic}
  prices:
    - {model: gpt-image-1, input_usd_per_mtok: 5, output_usd_per_mtok: 40}
  tenants:
    - id: acme
      plan: files
      keys:
        - {id: k-1, key_sha256: %s, rpm: %d}
    - id: other
      plan: basic
      keys:
        - {id: k-2, key_sha256: %s}
plugins:
  - name: preflight
    builtin: preflight
  - name: ratelimit
    builtin: ratelimit
  - name: budget
    builtin: budget
  - name: holdback
    builtin: holdback
    on_error: fail_closed
    config: {markers: [files.oaiusercontent.com]}
`, mockURL, mockURL, sha("tg_pt_1"), rpm, sha("tg_pt_other"))
}

const passUpstreamKey = "sk-upstream-passthru"

// passClient is the OpenAI Go SDK pointed at the gateway with key.
func passClient(gw, key string) openai.Client {
	return openai.NewClient(option.WithBaseURL(gw+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0))
}

// apiStatus is the HTTP status of an SDK error (0 for none or another
// error).
func apiStatus(err error) int {
	var e *openai.Error
	if errors.As(err, &e) {
		return e.StatusCode
	}
	return 0
}

// apiCode and apiMessage are an SDK error's code and message.
func apiCode(err error) string {
	var e *openai.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

func apiMessage(err error) string {
	var e *openai.Error
	if errors.As(err, &e) {
		return e.Message
	}
	return ""
}

// TestPassthroughSDK drives every passthrough endpoint with the OpenAI Go
// SDK through the gateway (preflight and ratelimit on) to the mock: what
// the client gets is the mock's reply, the upstream sees the gateway's key
// and never the client's, and usage is metered where the reply has it.
func TestPassthroughSDK(t *testing.T) {
	t.Parallel() // checks no time (see the package doc)
	mock, mockURL := startMock(t, mockllm.Config{Tokens: 5, APIKey: passUpstreamKey})
	seen := recordRequests(mock)
	srv, gw := startGateway(t, passPolicy(t, mockURL, 1000), map[string]string{"UP_KEY": passUpstreamKey})
	metrics := httptest.NewServer(srv.MetricsHandler())
	defer metrics.Close()
	c := passClient(gw, "tg_pt_1")
	ctx := context.Background()
	lastAuth := func(t *testing.T) {
		t.Helper()
		var r seenRequest
		for len(seen) > 0 {
			r = <-seen
		}
		if got := r.h.Get("Authorization"); got != "Bearer "+passUpstreamKey {
			t.Errorf("the upstream got Authorization %q; want the gateway's key", got)
		}
		for k, v := range r.h {
			if strings.Contains(strings.Join(v, ","), "tg_pt_1") {
				t.Errorf("the client's key reached the upstream in %s", k)
			}
		}
	}

	t.Run("images", func(t *testing.T) {
		res, err := c.Images.Generate(ctx, openai.ImageGenerateParams{Prompt: "a lighthouse at dusk, oil", Model: openai.ImageModelGPTImage1, N: openai.Int(2)})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Data) != 2 || res.Data[1].B64JSON != base64.StdEncoding.EncodeToString(mockllm.MockImage(1)) {
			t.Fatalf("data %+v", res.Data)
		}
		// 25 prompt bytes / 4; 2 images of 5 tokens.
		if res.Usage.InputTokens != 6 || res.Usage.OutputTokens != 10 {
			t.Errorf("usage %+v; want 6 in, 10 out", res.Usage)
		}
		lastAuth(t)
		edit, err := c.Images.Edit(ctx, openai.ImageEditParams{Image: openai.ImageEditParamsImageUnion{OfFile: namedReader("in.png", mockllm.MockImage(7))},
			Prompt: "add a boat", Model: openai.ImageModelGPTImage1})
		if err != nil {
			t.Fatal(err)
		}
		if len(edit.Data) != 1 || edit.Usage.InputTokens != 2 || edit.Usage.OutputTokens != 5 {
			t.Errorf("edit: %d images, usage %+v; want 1, 2 in, 5 out", len(edit.Data), edit.Usage)
		}
		v, err := c.Images.NewVariation(ctx, openai.ImageNewVariationParams{Image: namedReader("in.png", mockllm.MockImage(3)), Model: openai.ImageModelDallE2})
		if err != nil || len(v.Data) != 1 {
			t.Fatalf("variation: %v %+v", err, v)
		}
	})

	t.Run("speech", func(t *testing.T) {
		const input = "Hello from the gateway."
		resp, err := c.Audio.Speech.New(ctx, openai.AudioSpeechNewParams{Input: input, Model: openai.SpeechModelTTS1,
			Voice: openai.AudioSpeechNewParamsVoiceUnion{OfString: openai.String("alloy")}})
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		audio, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(audio, mockllm.SpeechAudio(input)) || resp.Header.Get("Content-Type") != "audio/mpeg" {
			t.Errorf("%d bytes of %s; want the mock's %d bytes of audio/mpeg", len(audio), resp.Header.Get("Content-Type"), len(mockllm.SpeechAudio(input)))
		}
	})

	t.Run("speech relayed as it arrives", func(t *testing.T) {
		// 8 pieces of 64 bytes, 150 ms apart: the first reaches the client
		// while the mock is still writing.
		const input = "Eight by."
		before := mock.Stats().Completed
		resp, err := c.Audio.Speech.New(ctx, openai.AudioSpeechNewParams{Input: input, Model: openai.SpeechModelTTS1,
			Voice: openai.AudioSpeechNewParamsVoiceUnion{OfString: openai.String("alloy")}},
			option.WithHeader("X-Mock-Inter-Token", "150ms"), option.WithHeader("X-Mock-Chunk-Size", "64"))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		first := make([]byte, 1)
		if _, err := io.ReadFull(resp.Body, first); err != nil {
			t.Fatal(err)
		}
		if done := mock.Stats().Completed - before; done != 0 {
			t.Errorf("the mock had finished %d replies when the first byte arrived: the reply was buffered", done)
		}
		rest, err := io.ReadAll(resp.Body)
		if err != nil || !bytes.Equal(append(first, rest...), mockllm.SpeechAudio(input)) {
			t.Errorf("%d bytes, %v; want the mock's %d", 1+len(rest), err, len(mockllm.SpeechAudio(input)))
		}
	})

	t.Run("speech events", func(t *testing.T) {
		// 13 bytes of input: 832 bytes of audio in 2 events of 416.
		resp, err := c.Audio.Speech.New(ctx, openai.AudioSpeechNewParams{Input: "Hello events.", Model: "gpt-4o-mini-tts",
			Voice: openai.AudioSpeechNewParamsVoiceUnion{OfString: openai.String("alloy")}, StreamFormat: "sse"},
			option.WithHeader("X-Mock-Chunk-Size", "416"))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if n := strings.Count(string(b), `"type":"speech.audio.delta"`); n != 2 || !strings.Contains(string(b), `"type":"speech.audio.done"`) {
			t.Errorf("%d delta events:\n%s", n, b)
		}
	})

	t.Run("transcription", func(t *testing.T) {
		wav := bytes.Repeat([]byte("RIFF"), 250) // 1000 bytes: 10 input tokens
		res, err := c.Audio.Transcriptions.New(ctx, openai.AudioTranscriptionNewParams{File: namedReader("a.wav", wav), Model: openai.AudioModelGPT4oTranscribe})
		if err != nil {
			t.Fatal(err)
		}
		if res.Text != "tok0 tok1 tok2 tok3 tok4 " || res.Usage.InputTokens != 10 || res.Usage.OutputTokens != 5 {
			t.Errorf("text %q usage %+v; want 5 tokens, 10 in, 5 out", res.Text, res.Usage)
		}
		st := c.Audio.Transcriptions.NewStreaming(ctx, openai.AudioTranscriptionNewParams{File: namedReader("a.wav", wav), Model: openai.AudioModelGPT4oTranscribe})
		var deltas strings.Builder
		var done openai.TranscriptionTextDoneEvent
		for st.Next() {
			switch ev := st.Current(); ev.Type {
			case "transcript.text.delta":
				deltas.WriteString(ev.Delta)
			case "transcript.text.done":
				done = ev.AsTranscriptTextDone()
			}
		}
		if err := st.Err(); err != nil {
			t.Fatal(err)
		}
		if deltas.String() != "tok0 tok1 tok2 tok3 tok4 " || done.Text != deltas.String() || done.Usage.InputTokens != 10 {
			t.Errorf("deltas %q, done %q with %d input tokens", deltas.String(), done.Text, done.Usage.InputTokens)
		}
		tr, err := c.Audio.Translations.New(ctx, openai.AudioTranslationNewParams{File: namedReader("a.wav", wav), Model: openai.AudioModelWhisper1})
		if err != nil || tr.Text != "tok0 tok1 tok2 tok3 tok4 " {
			t.Errorf("translation %+v, %v", tr, err)
		}
	})

	t.Run("moderation", func(t *testing.T) {
		res, err := c.Moderations.New(ctx, openai.ModerationNewParams{Model: openai.ModerationModelOmniModerationLatest,
			Input: openai.ModerationNewParamsInputUnion{OfStringArray: []string{"fine", "FLAG me"}}})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Results) != 2 || res.Results[0].Flagged || !res.Results[1].Flagged {
			t.Errorf("results %+v; want the second flagged", res.Results)
		}
	})

	t.Run("files and batches", func(t *testing.T) {
		line := []byte(`{"custom_id":"1","method":"POST","url":"/v1/chat/completions","body":{"model":"mock-1","messages":[{"role":"user","content":"hi"}]}}` + "\n")
		f, err := c.Files.New(ctx, openai.FileNewParams{File: namedReader("in.jsonl", line), Purpose: openai.FilePurposeBatch})
		if err != nil {
			t.Fatal(err)
		}
		if f.Bytes != int64(len(line)) || f.Filename != "in.jsonl" || f.Purpose != "batch" {
			t.Errorf("file %+v", f)
		}
		lastAuth(t)
		got, err := c.Files.Get(ctx, f.ID)
		if err != nil || got.ID != f.ID {
			t.Fatalf("get: %+v %v", got, err)
		}
		page, err := c.Files.List(ctx, openai.FileListParams{Purpose: openai.String("batch")})
		if err != nil || len(page.Data) != 1 || page.Data[0].ID != f.ID {
			t.Fatalf("list: %+v %v", page, err)
		}
		resp, err := c.Files.Content(ctx, f.ID)
		if err != nil {
			t.Fatal(err)
		}
		content, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !bytes.Equal(content, line) {
			t.Errorf("content %q; want %q", content, line)
		}
		b, err := c.Batches.New(ctx, openai.BatchNewParams{InputFileID: f.ID, Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions,
			CompletionWindow: openai.BatchNewParamsCompletionWindow24h})
		if err != nil || b.InputFileID != f.ID || b.Status != "in_progress" {
			t.Fatalf("batch: %+v %v", b, err)
		}
		if g, err := c.Batches.Get(ctx, b.ID); err != nil || g.ID != b.ID {
			t.Fatalf("batch get: %+v %v", g, err)
		}
		if l, err := c.Batches.List(ctx, openai.BatchListParams{Limit: openai.Int(10)}); err != nil || len(l.Data) != 1 {
			t.Fatalf("batch list: %+v %v", l, err)
		}
		if cb, err := c.Batches.Cancel(ctx, b.ID); err != nil || cb.Status != "cancelled" {
			t.Fatalf("batch cancel: %+v %v", cb, err)
		}
		if d, err := c.Files.Delete(ctx, f.ID); err != nil || !d.Deleted {
			t.Fatalf("delete: %+v %v", d, err)
		}
		if _, err := c.Files.Get(ctx, f.ID); apiStatus(err) != 404 {
			t.Errorf("a deleted file: %v; want the upstream's 404", err)
		}
	})

	t.Run("metered", func(t *testing.T) {
		time.Sleep(50 * time.Millisecond) // the end work runs after the reply
		text, err := httpGet(metrics.URL)
		if err != nil {
			t.Fatal(err)
		}
		m := metricValues(t, text)
		// Images 6+10 and 2+5, speech events 3+2, transcriptions 10+5
		// twice; speech as audio, moderations, files and batches carry no
		// usage.
		in, out := m[`tollgate_tokens_total{tenant="acme",type="prompt"}`], m[`tollgate_tokens_total{tenant="acme",type="completion"}`]
		if in != 31 || out != 27 {
			t.Errorf("tokens metered: %v prompt, %v completion; want 31 and 27", in, out)
		}
		// gpt-image-1 at 5 µ$ an input token and 40 an output token:
		// (6·5 + 10·40) + (2·5 + 5·40); the other models have no price.
		if c := m[`tollgate_cost_usd_micros_total{tenant="acme"}`]; c != 640 {
			t.Errorf("cost %v µ$; want 640", c)
		}
		if n := m[`tollgate_requests_total{endpoint="/v1/files/{id}",model="",status="200",upstream="up"}`]; n != 2 {
			t.Errorf("requests to /v1/files/{id}: %v; want 2 (get, delete)\n%s", n, grepLines(text, "tollgate_requests_total"))
		}
	})
}

// namedReader is a file upload's content with its file name (the SDK
// reads the name from a Name method).
func namedReader(name string, b []byte) io.Reader {
	return &named{Reader: bytes.NewReader(b), name: name}
}

type named struct {
	*bytes.Reader
	name string
}

func (n *named) Name() string { return n.name }

func grepLines(text, prefix string) string {
	var b strings.Builder
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, prefix) {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// TestPassthroughRefusals: without a key, over the rate limit, from a plan
// without files, for a model an Anthropic upstream serves, for an unknown
// model, and for a malformed form, the gateway answers itself and the
// upstream sees nothing.
func TestPassthroughRefusals(t *testing.T) {
	t.Parallel() // checks no time (see the package doc)
	mock, mockURL := startMock(t, mockllm.Config{Tokens: 5, APIKey: passUpstreamKey})
	_, gw := startGateway(t, passPolicy(t, mockURL, 2), map[string]string{"UP_KEY": passUpstreamKey})
	ctx := context.Background()
	speech := openai.AudioSpeechNewParams{Input: "hi", Model: openai.SpeechModelTTS1, Voice: openai.AudioSpeechNewParamsVoiceUnion{OfString: openai.String("alloy")}}
	before := mock.Stats().Requests

	anon := passClient(gw, "")
	if _, err := anon.Moderations.New(ctx, openai.ModerationNewParams{Model: "omni-moderation-latest", Input: openai.ModerationNewParamsInputUnion{OfString: openai.String("x")}}); apiStatus(err) != 401 {
		t.Errorf("no key: %v; want 401", err)
	}
	if _, err := anon.Files.List(ctx, openai.FileListParams{}); apiStatus(err) != 401 {
		t.Errorf("files without a key: %v; want 401", err)
	}
	other := passClient(gw, "tg_pt_other")
	if _, err := other.Files.List(ctx, openai.FileListParams{}); apiStatus(err) != 403 || apiCode(err) != "endpoint_not_allowed" {
		t.Errorf("files from plan basic: %v; want 403 endpoint_not_allowed", err)
	}
	c := passClient(gw, "tg_pt_1")
	if _, err := c.Images.Generate(ctx, openai.ImageGenerateParams{Prompt: "x", Model: "claude-3"}); apiStatus(err) != 400 ||
		apiCode(err) != "unsupported_endpoint" || !strings.Contains(apiMessage(err), "POST /v1/images/generations") {
		t.Errorf("images for an Anthropic model: %v; want 400 unsupported_endpoint naming the endpoint", err)
	}
	if _, err := c.Audio.Transcriptions.New(ctx, openai.AudioTranscriptionNewParams{File: namedReader("a.wav", []byte("RIFF")), Model: "nope-1"}); apiStatus(err) != 404 {
		t.Errorf("unknown model: %v; want 404", err)
	}
	if got := mock.Stats().Requests - before; got != 0 {
		t.Errorf("the upstream saw %d requests; want none", got)
	}

	// Rate limit: the key's 2 requests a minute (the 400 and 404 above
	// were refused before the plugins ran).
	for i := range 3 {
		resp, err := c.Audio.Speech.New(ctx, speech)
		if i < 2 {
			if err != nil {
				t.Fatalf("request %d: %v", i, err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			continue
		}
		if apiStatus(err) != 429 {
			t.Errorf("request 3 within a minute: %v; want 429", err)
		}
	}

	for _, tt := range []struct {
		name, ct, body, want string
		status               int
	}{
		{"model twice", "multipart/form-data; boundary=b", "--b\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nwhisper-1\r\n--b\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nclaude-3\r\n--b--\r\n", "more than once", 400},
		{"not a form", "application/json", `{"model":"whisper-1"}`, "multipart/form-data", 400},
		{"no model", "multipart/form-data; boundary=b", "--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.wav\"\r\n\r\nRIFF\r\n--b--\r\n", "model is required", 400},
	} {
		req, _ := http.NewRequest("POST", gw+"/v1/audio/transcriptions", strings.NewReader(tt.body))
		req.Header.Set("Content-Type", tt.ct)
		req.Header.Set("Authorization", "Bearer tg_pt_1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tt.status || !strings.Contains(string(b), tt.want) {
			t.Errorf("%s: %d %s; want %d mentioning %q", tt.name, resp.StatusCode, b, tt.status, tt.want)
		}
	}
	big := "--b\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nwhisper-1\r\n--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.wav\"\r\n\r\n" +
		strings.Repeat("R", 300<<10) + "\r\n--b--\r\n"
	for _, tt := range []struct {
		method, path, ct, body string
		status                 int
		code                   string
	}{
		{"POST", "/v1/audio/transcriptions", "multipart/form-data; boundary=b", big, 413, "request_too_large"},
		{"GET", "/v1/files/file~1", "", "", 400, ""},
		{"GET", "/v1/files/", "", "", 404, "unknown_url"},
	} {
		req, _ := http.NewRequest(tt.method, gw+tt.path, strings.NewReader(tt.body))
		req.Header.Set("Authorization", "Bearer tg_pt_1")
		if tt.ct != "" {
			req.Header.Set("Content-Type", tt.ct)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tt.status || !strings.Contains(string(b), tt.code) {
			t.Errorf("%s %s: %d %s; want %d %s", tt.method, tt.path, resp.StatusCode, b, tt.status, tt.code)
		}
	}
	if got := mock.Stats().Requests - before; got != 2 {
		t.Errorf("the upstream saw %d requests; want the 2 speech requests", got)
	}
	for _, tt := range []struct{ method, path string }{{"PUT", "/v1/files"}, {"POST", "/v1/files/file-1"}, {"GET", "/v1/images/generations"}} {
		req, _ := http.NewRequest(tt.method, gw+tt.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 405 || resp.Header.Get("Allow") == "" {
			t.Errorf("%s %s: %d, Allow %q; want 405 with Allow", tt.method, tt.path, resp.StatusCode, resp.Header.Get("Allow"))
		}
	}
}

// TestPassthroughModelIDs: an upstream's model_ids rename the model a
// passthrough request names — in a JSON body and in a form's model field,
// the rest of the form byte for byte — and the client still sees its own.
func TestPassthroughModelIDs(t *testing.T) {
	t.Parallel() // checks no time (see the package doc)
	mock, mockURL := startMock(t, mockllm.Config{Tokens: 3})
	seen := recordRequests(mock)
	pol := policy(mockURL, "    model_ids: {img: gpt-image-1, stt: gpt-4o-transcribe}", "img", "stt")
	_, gw := startGateway(t, pol, nil)
	c := passClient(gw, "k")
	ctx := context.Background()
	last := func() seenRequest {
		var r seenRequest
		for len(seen) > 0 {
			r = <-seen
		}
		return r
	}

	res, err := c.Images.Generate(ctx, openai.ImageGenerateParams{Prompt: "a lighthouse", Model: "img"})
	if err != nil {
		t.Fatal(err)
	}
	if r := last(); !strings.Contains(string(r.body), `"model":"gpt-image-1"`) || res.Usage.OutputTokens != 3 {
		t.Errorf("upstream body %s, usage %+v; want model gpt-image-1 (which reports usage)", r.body, res.Usage)
	}
	wav := bytes.Repeat([]byte("RIFF"), 100)
	tr, err := c.Audio.Transcriptions.New(ctx, openai.AudioTranscriptionNewParams{File: namedReader("a.wav", wav), Model: "stt"})
	if err != nil {
		t.Fatal(err)
	}
	r := last()
	_, params, _ := mime.ParseMediaType(r.h.Get("Content-Type"))
	form, err := multipart.NewReader(bytes.NewReader(r.body), params["boundary"]).ReadForm(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	if got := form.Value["model"]; len(got) != 1 || got[0] != "gpt-4o-transcribe" || tr.Usage.Type != "tokens" {
		t.Errorf("upstream form model %v, usage %+v; want gpt-4o-transcribe (usage in tokens)", got, tr.Usage)
	}
	f, err := form.File["file"][0].Open()
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(f)
	if !bytes.Equal(got, wav) {
		t.Errorf("the file reached the upstream as %d bytes; want the client's %d", len(got), len(wav))
	}
}

// TestPassthroughAzure: an azure upstream serves images and audio on its
// deployment paths (api-version and api-key checked by the mock), the
// deployment the model_ids name; moderations, which Azure has not, are
// refused naming the endpoint.
func TestPassthroughAzure(t *testing.T) {
	mock, mockURL := startMock(t, mockllm.Config{Tokens: 4, APIKey: "az-key"})
	seen := recordRequests(mock)
	_, gw := startGateway(t, fmt.Sprintf(`
version: 1
server: {drain_timeout: 2s}
upstreams:
  - name: azure
    provider: azure
    base_url: %s
    api_key_env: AZ_KEY
    azure: {api_version: "2025-04-01-preview"}
    model_ids: {img: gpt-image-1}
    timeouts: {connect: 1s, first_byte: 5s, idle: 5s, total: 30s}
routes:
  - models: [img, gpt-4o-transcribe, tts-1, omni-moderation-latest]
    upstream: azure
`, mockURL), map[string]string{"AZ_KEY": "az-key"})
	c := passClient(gw, "k")
	ctx := context.Background()
	last := func() seenRequest {
		var r seenRequest
		for len(seen) > 0 {
			r = <-seen
		}
		return r
	}

	res, err := c.Images.Generate(ctx, openai.ImageGenerateParams{Prompt: "a lighthouse", Model: "img"})
	if err != nil {
		t.Fatal(err)
	}
	r := last()
	if res.Usage.OutputTokens != 4 || r.h.Get("Api-Key") != "az-key" || r.h.Get("Authorization") != "" {
		t.Errorf("usage %+v, api-key %q, Authorization %q; want gpt-image-1's usage and the upstream's api-key only", res.Usage, r.h.Get("Api-Key"), r.h.Get("Authorization"))
	}
	tr, err := c.Audio.Transcriptions.New(ctx, openai.AudioTranscriptionNewParams{File: namedReader("a.wav", bytes.Repeat([]byte("R"), 300)), Model: "gpt-4o-transcribe"})
	if err != nil || tr.Text != "tok0 tok1 tok2 tok3 " || tr.Usage.InputTokens != 3 {
		t.Errorf("transcription %+v, %v", tr, err)
	}
	resp, err := c.Audio.Speech.New(ctx, openai.AudioSpeechNewParams{Input: "hi", Model: "tts-1", Voice: openai.AudioSpeechNewParamsVoiceUnion{OfString: openai.String("alloy")}})
	if err != nil {
		t.Fatal(err)
	}
	audio, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Equal(audio, mockllm.SpeechAudio("hi")) {
		t.Errorf("speech: %d bytes", len(audio))
	}
	_, err = c.Moderations.New(ctx, openai.ModerationNewParams{Model: "omni-moderation-latest", Input: openai.ModerationNewParamsInputUnion{OfString: openai.String("x")}})
	if apiStatus(err) != 400 || apiCode(err) != "unsupported_endpoint" || !strings.Contains(apiMessage(err), "/v1/moderations") {
		t.Errorf("moderations on azure: %v; want 400 unsupported_endpoint", err)
	}
}
