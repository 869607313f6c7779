package mockllm

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The rest of OpenAI's API, deterministically: images, audio, moderations,
// files and batches. Like the chat routes they honour the X-Mock-* headers
// (TTFT before the reply, Fail-Status, Tokens or Text for generated text,
// Inter-Token between the pieces of a stream) and the API key.
//
//   - POST /v1/images/generations (JSON), /v1/images/edits and
//     /v1/images/variations (multipart, an image file required): n images
//     (default 1), each a 16-byte PNG-like blob as b64_json, or a URL under
//     https://mock.invalid/images/ with response_format url. A gpt-image
//     model's reply has usage: input_tokens a quarter of the prompt's
//     bytes (at least 1), output_tokens the mock's token count per image;
//     dall-e models' (and variations') have none, as OpenAI's.
//   - POST /v1/audio/speech: MockSpeechBytes bytes of audio per byte of
//     input, written in ChunkSize pieces (chunked, Inter-Token apart);
//     Content-Type audio/mpeg (or audio/<response_format>). With
//     stream_format sse: speech.audio.delta events of ChunkSize bytes and a
//     speech.audio.done event with usage (input a quarter of the input's
//     bytes, at least 1; output one token per delta).
//   - POST /v1/audio/transcriptions and /v1/audio/translations (multipart,
//     a file required): the generated text as {"text":...}, as plain text
//     with response_format text, or (transcriptions, stream=true) as
//     transcript.text.delta events and a transcript.text.done event.
//     Transcriptions report usage in tokens (input a hundredth of the
//     file's bytes, at least 1; output the mock's token count), or by
//     duration for whisper-1; translations report none.
//   - POST /v1/moderations: omni-moderation's shape, one result per input,
//     its verdict following trigger words in the input (moderation.go).
//   - /v1/files (POST multipart file+purpose, GET list with ?purpose=),
//     /v1/files/{id} (GET, DELETE), /v1/files/{id}/content (GET), and
//     /v1/batches (POST with an existing input_file_id, GET list),
//     /v1/batches/{id} (GET), /v1/batches/{id}/cancel (POST): kept in
//     memory, ids numbered from 1 in order of creation.

// The images and audio routes are also served below an Azure deployment
// (azure.go), the deployment naming the model when the body has none.
func init() {
	for op, h := range map[string]func(*Server, http.ResponseWriter, *http.Request, []byte, *params){
		"images/generations": func(s *Server, w http.ResponseWriter, r *http.Request, b []byte, p *params) {
			s.serveImages(w, r, b, p, false)
		},
		"images/edits": func(s *Server, w http.ResponseWriter, r *http.Request, b []byte, p *params) {
			s.serveImages(w, r, b, p, true)
		},
		"audio/speech": (*Server).serveSpeech,
		"audio/transcriptions": func(s *Server, w http.ResponseWriter, r *http.Request, b []byte, p *params) {
			s.serveTranscription(w, r, b, p, false)
		},
	} {
		azureOperations[op] = h
	}
}

// MockSpeechBytes is the audio the mock returns per byte of speech input.
const MockSpeechBytes = 64

// passStore holds the mock's files and batches.
type passStore struct {
	mu      sync.Mutex
	seq     int
	files   map[string]*mockFile
	batches map[string]*mockBatch
}

type mockFile struct {
	ID        string `json:"id"`
	Object    string `json:"object"`
	Bytes     int    `json:"bytes"`
	CreatedAt int64  `json:"created_at"`
	Filename  string `json:"filename"`
	Purpose   string `json:"purpose"`
	Status    string `json:"status"`
	content   []byte
}

type mockBatch struct {
	ID               string            `json:"id"`
	Object           string            `json:"object"`
	Endpoint         string            `json:"endpoint"`
	InputFileID      string            `json:"input_file_id"`
	CompletionWindow string            `json:"completion_window"`
	Status           string            `json:"status"`
	CreatedAt        int64             `json:"created_at"`
	Metadata         map[string]string `json:"metadata,omitempty"`
	RequestCounts    map[string]int    `json:"request_counts"`
}

// isPassthru reports whether path is one of the routes of this file.
func isPassthru(path string) bool {
	for _, p := range []string{"/v1/images/", "/v1/audio/", "/v1/files", "/v1/batches"} {
		if strings.HasPrefix(path, p) {
			return true
		}
	}
	return path == "/v1/moderations"
}

func (s *Server) servePassthru(w http.ResponseWriter, r *http.Request, body []byte, p *params) {
	if !p.wait.wait(p.ttft) {
		s.noticeClose(r)
		return
	}
	path := r.URL.Path
	switch {
	case r.Method == http.MethodPost && path == "/v1/images/generations":
		s.serveImages(w, r, body, p, false)
	case r.Method == http.MethodPost && (path == "/v1/images/edits" || path == "/v1/images/variations"):
		s.serveImages(w, r, body, p, true)
	case r.Method == http.MethodPost && path == "/v1/audio/speech":
		s.serveSpeech(w, r, body, p)
	case r.Method == http.MethodPost && (path == "/v1/audio/transcriptions" || path == "/v1/audio/translations"):
		s.serveTranscription(w, r, body, p, path == "/v1/audio/translations")
	case r.Method == http.MethodPost && path == "/v1/moderations":
		s.serveModeration(w, r, body, p)
	case strings.HasPrefix(path, "/v1/files"):
		s.serveFiles(w, r, body)
	case strings.HasPrefix(path, "/v1/batches"):
		s.serveBatches(w, r, body)
	default:
		s.writeError(w, http.StatusNotFound, "invalid_request_error", "", "Invalid URL ("+r.Method+" "+path+")")
	}
}

// pieces are the mock's generated text in its stream pieces.
func (p *params) pieces() []string {
	n := p.eventCount()
	out := make([]string, 0, n)
	for i, off := 0, 0; i < n; i++ {
		if !p.textSet {
			out = append(out, "tok"+strconv.Itoa(i)+" ")
			continue
		}
		end := p.pieceEnd(off)
		out = append(out, p.text[off:end])
		off = end
	}
	return out
}

// mockForm reads a multipart request's fields and files (their contents).
func mockForm(r *http.Request, body []byte) (fields map[string]string, files map[string][]byte, err error) {
	_, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil {
		return nil, nil, err
	}
	mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
	fields, files = map[string]string{}, map[string][]byte{}
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			return fields, files, nil
		}
		if err != nil {
			return nil, nil, err
		}
		b, err := io.ReadAll(part)
		if err != nil {
			return nil, nil, err
		}
		if part.FileName() != "" {
			files[part.FormName()] = b
			fields[part.FormName()+".filename"] = part.FileName()
		} else {
			fields[part.FormName()] = string(b)
		}
	}
}

// requestFields reads a JSON or multipart body's fields (files apart).
func (s *Server) requestFields(w http.ResponseWriter, r *http.Request, body []byte, form bool) (map[string]any, map[string][]byte, bool) {
	if form {
		f, files, err := mockForm(r, body)
		if err != nil {
			s.writeError(w, http.StatusBadRequest, "invalid_request_error", "", "invalid multipart body: "+err.Error())
			return nil, nil, false
		}
		m := make(map[string]any, len(f))
		for k, v := range f {
			m[k] = v
		}
		return m, files, true
	}
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		s.badJSON(w, err)
		return nil, nil, false
	}
	return m, nil, true
}

func str(m map[string]any, k string) string { v, _ := m[k].(string); return v }

func (s *Server) serveImages(w http.ResponseWriter, r *http.Request, body []byte, p *params, form bool) {
	m, files, ok := s.requestFields(w, r, body, form)
	if !ok {
		return
	}
	model := str(m, "model")
	if form && len(files["image"]) == 0 && len(files["image[]"]) == 0 {
		s.writeError(w, http.StatusBadRequest, "invalid_request_error", "", "an image file is required")
		return
	}
	n := 1
	switch v := m["n"].(type) {
	case float64:
		n = int(v)
	case string:
		n, _ = strconv.Atoi(v)
	}
	if n < 1 || n > 10 {
		s.writeError(w, http.StatusBadRequest, "invalid_request_error", "", "n must be between 1 and 10")
		return
	}
	id := s.seq.Add(1)
	data := make([]map[string]string, n)
	for i := range data {
		if str(m, "response_format") == "url" {
			data[i] = map[string]string{"url": "https://mock.invalid/images/" + strconv.FormatInt(id, 10) + "-" + strconv.Itoa(i) + ".png"}
		} else {
			data[i] = map[string]string{"b64_json": base64.StdEncoding.EncodeToString(MockImage(i))}
		}
	}
	reply := map[string]any{"created": modelsCreated, "data": data}
	if strings.HasPrefix(model, "gpt-image") && r.URL.Path != "/v1/images/variations" {
		in := max(1, len(str(m, "prompt"))/4)
		out := n * len(p.pieces())
		reply["usage"] = map[string]any{"input_tokens": in, "output_tokens": out, "total_tokens": in + out,
			"input_tokens_details": map[string]int{"text_tokens": in, "image_tokens": 0}}
	}
	s.writeValue(w, reply)
}

// MockImage is the i-th image of a mock reply: 16 bytes that start like a PNG.
func MockImage(i int) []byte {
	return append([]byte("\x89PNG\r\n\x1a\nmock-00"), byte('0'+i%10))[:16:16]
}

func (s *Server) writeValue(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		s.writeError(w, http.StatusInternalServerError, "server_error", "", err.Error())
		return
	}
	s.writeJSON(w, http.StatusOK, b)
}

func (s *Server) serveSpeech(w http.ResponseWriter, r *http.Request, body []byte, p *params) {
	m, _, ok := s.requestFields(w, r, body, false)
	if !ok {
		return
	}
	input := str(m, "input")
	if input == "" || str(m, "voice") == "" {
		s.writeError(w, http.StatusBadRequest, "invalid_request_error", "", "input and voice are required")
		return
	}
	format := str(m, "response_format")
	if format == "" {
		format = "mpeg"
	}
	audio := SpeechAudio(input)
	if str(m, "stream_format") == "sse" {
		s.streamSpeech(w, r, input, audio, p)
		return
	}
	w.Header().Set("Content-Type", "audio/"+format)
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	size := max(p.chunkSize, 1)
	for off := 0; off < len(audio); off += size {
		if off > 0 && !p.wait.wait(p.interToken) {
			s.noticeClose(r)
			return
		}
		if _, err := w.Write(audio[off:min(off+size, len(audio))]); err != nil {
			s.noticeClose(r)
			return
		}
		if f != nil {
			f.Flush()
		}
	}
	s.completed.Add(1)
}

// streamSpeech sends speech as speech.audio.delta events (base64 audio,
// ChunkSize bytes each, Inter-Token apart) and a speech.audio.done event
// with usage: input_tokens a quarter of the input's bytes (at least 1),
// output_tokens one per delta.
func (s *Server) streamSpeech(w http.ResponseWriter, r *http.Request, input string, audio []byte, p *params) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	send := func(v any) bool {
		b, _ := json.Marshal(v)
		_, err := w.Write(append(append([]byte("data: "), b...), "\n\n"...))
		if f != nil {
			f.Flush()
		}
		return err == nil
	}
	size, n := max(p.chunkSize, 1), 0
	for off := 0; off < len(audio); off += size {
		if (off > 0 && !p.wait.wait(p.interToken)) ||
			!send(map[string]string{"type": "speech.audio.delta", "audio": base64.StdEncoding.EncodeToString(audio[off:min(off+size, len(audio))])}) {
			s.noticeClose(r)
			return
		}
		n++
	}
	in := max(1, len(input)/4)
	if send(map[string]any{"type": "speech.audio.done", "usage": map[string]int{"input_tokens": in, "output_tokens": n, "total_tokens": in + n}}) {
		s.completed.Add(1)
	}
}

// SpeechAudio is the mock's audio for a speech input: MockSpeechBytes
// bytes per input byte, a repeating pattern a test can check.
func SpeechAudio(input string) []byte {
	b := make([]byte, len(input)*MockSpeechBytes)
	for i := range b {
		b[i] = input[i/MockSpeechBytes] ^ byte(i)
	}
	return b
}

func (s *Server) serveTranscription(w http.ResponseWriter, r *http.Request, body []byte, p *params, translation bool) {
	m, files, ok := s.requestFields(w, r, body, true)
	if !ok {
		return
	}
	model := str(m, "model")
	if len(files["file"]) == 0 || model == "" {
		s.writeError(w, http.StatusBadRequest, "invalid_request_error", "", "file and model are required")
		return
	}
	pieces := p.pieces()
	text := strings.Join(pieces, "")
	usage := map[string]any{"type": "tokens", "input_tokens": max(1, len(files["file"])/100), "output_tokens": len(pieces),
		"total_tokens": max(1, len(files["file"])/100) + len(pieces)}
	if model == "whisper-1" {
		usage = map[string]any{"type": "duration", "seconds": max(1, len(files["file"])/1000)}
	}
	switch {
	case str(m, "stream") == "true" && !translation:
		s.streamTranscription(w, r, pieces, text, usage, p)
	case str(m, "response_format") == "text":
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, text+"\n")
		s.completed.Add(1)
	case translation:
		s.writeValue(w, map[string]any{"text": text})
	default:
		s.writeValue(w, map[string]any{"text": text, "usage": usage})
	}
}

func (s *Server) streamTranscription(w http.ResponseWriter, r *http.Request, pieces []string, text string, usage map[string]any, p *params) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	send := func(v any) bool {
		b, _ := json.Marshal(v)
		_, err := w.Write(append(append([]byte("data: "), b...), "\n\n"...))
		if f != nil {
			f.Flush()
		}
		return err == nil
	}
	for i, piece := range pieces {
		if i > 0 && !p.wait.wait(p.interToken) {
			s.noticeClose(r)
			return
		}
		if !send(map[string]any{"type": "transcript.text.delta", "delta": piece}) {
			s.noticeClose(r)
			return
		}
	}
	if send(map[string]any{"type": "transcript.text.done", "text": text, "usage": usage}) {
		s.completed.Add(1)
	}
}

func (st *passStore) nextID(prefix string) string {
	st.seq++
	if st.files == nil {
		st.files, st.batches = map[string]*mockFile{}, map[string]*mockBatch{}
	}
	return prefix + strconv.Itoa(st.seq)
}

func (s *Server) serveFiles(w http.ResponseWriter, r *http.Request, body []byte) {
	st := &s.store
	id, suffix, _ := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(r.URL.Path, "/v1/files"), "/"), "/")
	st.mu.Lock()
	defer st.mu.Unlock()
	switch {
	case r.Method == http.MethodPost && id == "":
		fields, files, err := mockForm(r, body)
		if err != nil || len(files["file"]) == 0 || fields["purpose"] == "" {
			s.writeError(w, http.StatusBadRequest, "invalid_request_error", "", "a file and its purpose are required")
			return
		}
		f := &mockFile{ID: st.nextID("file-mock-"), Object: "file", Bytes: len(files["file"]), CreatedAt: modelsCreated,
			Filename: fields["file.filename"], Purpose: fields["purpose"], Status: "processed", content: files["file"]}
		st.files[f.ID] = f
		s.writeValue(w, f)
	case r.Method == http.MethodGet && id == "":
		list := []*mockFile{}
		for _, f := range st.files {
			if p := r.URL.Query().Get("purpose"); p == "" || p == f.Purpose {
				list = append(list, f)
			}
		}
		sort.Slice(list, func(i, j int) bool { return list[i].ID < list[j].ID })
		s.writeValue(w, map[string]any{"object": "list", "data": list, "has_more": false})
	case st.files[id] == nil:
		s.writeError(w, http.StatusNotFound, "invalid_request_error", "", "No such File object: "+id)
	case r.Method == http.MethodGet && suffix == "":
		s.writeValue(w, st.files[id])
	case r.Method == http.MethodDelete && suffix == "":
		delete(st.files, id)
		s.writeValue(w, map[string]any{"id": id, "object": "file", "deleted": true})
	case r.Method == http.MethodGet && suffix == "content":
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write(st.files[id].content)
		s.completed.Add(1)
	default:
		s.writeError(w, http.StatusNotFound, "invalid_request_error", "", "Invalid URL ("+r.Method+" "+r.URL.Path+")")
	}
}

func (s *Server) serveBatches(w http.ResponseWriter, r *http.Request, body []byte) {
	st := &s.store
	id, suffix, _ := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(r.URL.Path, "/v1/batches"), "/"), "/")
	st.mu.Lock()
	defer st.mu.Unlock()
	switch {
	case r.Method == http.MethodPost && id == "":
		var req struct {
			InputFileID      string            `json:"input_file_id"`
			Endpoint         string            `json:"endpoint"`
			CompletionWindow string            `json:"completion_window"`
			Metadata         map[string]string `json:"metadata"`
		}
		if err := json.Unmarshal(body, &req); err != nil {
			s.badJSON(w, err)
			return
		}
		if st.files[req.InputFileID] == nil {
			s.writeError(w, http.StatusBadRequest, "invalid_request_error", "", "No such File object: "+req.InputFileID)
			return
		}
		b := &mockBatch{ID: st.nextID("batch_mock_"), Object: "batch", Endpoint: req.Endpoint, InputFileID: req.InputFileID,
			CompletionWindow: req.CompletionWindow, Status: "in_progress", CreatedAt: time.Unix(modelsCreated, 0).Unix(),
			Metadata: req.Metadata, RequestCounts: map[string]int{"total": 1, "completed": 0, "failed": 0}}
		st.batches[b.ID] = b
		s.writeValue(w, b)
	case r.Method == http.MethodGet && id == "":
		list := []*mockBatch{}
		for _, b := range st.batches {
			list = append(list, b)
		}
		sort.Slice(list, func(i, j int) bool { return list[i].ID < list[j].ID })
		s.writeValue(w, map[string]any{"object": "list", "data": list, "has_more": false})
	case st.batches[id] == nil:
		s.writeError(w, http.StatusNotFound, "invalid_request_error", "", "No such Batch object: "+id)
	case r.Method == http.MethodGet && suffix == "":
		s.writeValue(w, st.batches[id])
	case r.Method == http.MethodPost && suffix == "cancel":
		st.batches[id].Status = "cancelled"
		s.writeValue(w, st.batches[id])
	default:
		s.writeError(w, http.StatusNotFound, "invalid_request_error", "", "Invalid URL ("+r.Method+" "+r.URL.Path+")")
	}
}
