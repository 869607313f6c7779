package mockllm

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// upload is a file for the SDK's multipart encoder (it reads Name).
type upload struct {
	*bytes.Reader
	name string
}

func (u upload) Name() string { return u.name }

func file(name string, b []byte) io.Reader { return upload{bytes.NewReader(b), name} }

// The official client against the mock's passthrough routes: the same
// replies every time, the X-Mock-* knobs honoured, and the API key
// checked.
func TestPassthroughOfficialClient(t *testing.T) {
	srv := httptest.NewServer(New(Config{APIKey: "k", Text: "Hello there.", ChunkSize: 5}))
	t.Cleanup(srv.Close)
	c := openai.NewClient(option.WithBaseURL(srv.URL+"/v1/"), option.WithAPIKey("k"), option.WithMaxRetries(0))
	ctx := context.Background()

	t.Run("images", func(t *testing.T) {
		for _, tt := range []struct {
			model openai.ImageModel
			n     int64
			url   bool
			usage bool
			out   int64
		}{
			{"gpt-image-1", 2, false, true, 6}, // "Hello there." in 3 pieces, twice
			{"dall-e-3", 1, true, false, 0},
		} {
			p := openai.ImageGenerateParams{Prompt: "twelve bytes", Model: tt.model, N: openai.Int(tt.n)}
			if tt.url {
				p.ResponseFormat = openai.ImageGenerateParamsResponseFormatURL
			}
			res, err := c.Images.Generate(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			if int64(len(res.Data)) != tt.n || (res.Usage.JSON.InputTokens.Valid()) != tt.usage || res.Usage.OutputTokens != tt.out {
				t.Errorf("%s: %d images, usage %+v", tt.model, len(res.Data), res.Usage)
			}
			if tt.url && !strings.HasPrefix(res.Data[0].URL, "https://mock.invalid/images/") {
				t.Errorf("url %q", res.Data[0].URL)
			}
			if !tt.url && res.Data[0].B64JSON != base64.StdEncoding.EncodeToString(MockImage(0)) {
				t.Errorf("b64 %q", res.Data[0].B64JSON)
			}
		}
		if _, err := c.Images.Edit(ctx, openai.ImageEditParams{Prompt: "x", Model: "gpt-image-1"}); !isStatus(err, 400) {
			t.Errorf("an edit without an image: %v; want 400", err)
		}
	})

	t.Run("speech", func(t *testing.T) {
		resp, err := c.Audio.Speech.New(ctx, openai.AudioSpeechNewParams{Input: "abc", Model: "tts-1", ResponseFormat: "wav",
			Voice: openai.AudioSpeechNewParamsVoiceUnion{OfString: openai.String("alloy")}})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !bytes.Equal(b, SpeechAudio("abc")) || len(b) != 3*MockSpeechBytes || resp.Header.Get("Content-Type") != "audio/wav" {
			t.Errorf("%d bytes of %s", len(b), resp.Header.Get("Content-Type"))
		}
	})

	t.Run("transcription", func(t *testing.T) {
		audio := bytes.Repeat([]byte{1}, 2500)
		res, err := c.Audio.Transcriptions.New(ctx, openai.AudioTranscriptionNewParams{File: file("a.wav", audio), Model: "gpt-4o-transcribe"})
		if err != nil {
			t.Fatal(err)
		}
		if res.Text != "Hello there." || res.Usage.Type != "tokens" || res.Usage.InputTokens != 25 || res.Usage.OutputTokens != 3 {
			t.Errorf("%q %+v", res.Text, res.Usage)
		}
		w, err := c.Audio.Transcriptions.New(ctx, openai.AudioTranscriptionNewParams{File: file("a.wav", audio), Model: "whisper-1"})
		if err != nil || w.Usage.Type != "duration" || w.Usage.Seconds != 2 {
			t.Errorf("whisper-1: %+v %v", w.Usage, err)
		}
		st := c.Audio.Transcriptions.NewStreaming(ctx, openai.AudioTranscriptionNewParams{File: file("a.wav", audio), Model: "gpt-4o-transcribe"},
			option.WithHeader(HeaderText, "a+b"))
		var types []string
		for st.Next() {
			types = append(types, st.Current().Type+":"+st.Current().Delta+st.Current().Text)
		}
		if err := st.Err(); err != nil || strings.Join(types, ",") != "transcript.text.delta:a b,transcript.text.done:a b" {
			t.Errorf("events %v, %v", types, err)
		}
	})

	t.Run("files and batches", func(t *testing.T) {
		f, err := c.Files.New(ctx, openai.FileNewParams{File: file("in.jsonl", []byte("{}\n")), Purpose: "batch"})
		if err != nil || f.ID != "file-mock-1" || f.Bytes != 3 {
			t.Fatalf("%+v %v", f, err)
		}
		b, err := c.Batches.New(ctx, openai.BatchNewParams{InputFileID: f.ID, Endpoint: "/v1/chat/completions", CompletionWindow: "24h"})
		if err != nil || b.ID != "batch_mock_2" {
			t.Fatalf("%+v %v", b, err)
		}
		if _, err := c.Batches.New(ctx, openai.BatchNewParams{InputFileID: "file-none", Endpoint: "/v1/chat/completions", CompletionWindow: "24h"}); !isStatus(err, 400) {
			t.Errorf("a batch of a missing file: %v; want 400", err)
		}
		if _, err := c.Batches.Get(ctx, "batch_none"); !isStatus(err, 404) {
			t.Errorf("a missing batch: %v; want 404", err)
		}
	})

	t.Run("key checked", func(t *testing.T) {
		bad := openai.NewClient(option.WithBaseURL(srv.URL+"/v1/"), option.WithAPIKey("nope"), option.WithMaxRetries(0))
		if _, err := bad.Moderations.New(ctx, openai.ModerationNewParams{Input: openai.ModerationNewParamsInputUnion{OfString: openai.String("x")}}); !isStatus(err, 401) {
			t.Errorf("a wrong key: %v; want 401", err)
		}
	})
}

func isStatus(err error, status int) bool {
	var e *openai.Error
	return errors.As(err, &e) && e.StatusCode == status
}
