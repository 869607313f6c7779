package mockllm

import (
	"bytes"
	"crypto/subtle"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
)

// The generateContent mode: the mock answers as Google's Gemini API
// (POST /{version}/models/{model}:generateContent, the key in
// x-goog-api-key or ?key=) and as Vertex AI (POST
// /{version}/projects/{p}/locations/{l}/publishers/google/models/{model}:generateContent,
// an OAuth token in "Authorization: Bearer"), so the gateway's gemini and
// vertex providers and Google's own clients can be tested against it.
// :streamGenerateContent needs alt=sse and streams one
// GenerateContentResponse per SSE event.
//
// Config.APIKey, when set, is the key the Gemini API path requires and
// the bearer token the Vertex path requires (a Vertex request without a
// bearer token is refused either way). The reply is the same as for
// chat: Config.Text or generated tokens, cut as for chat, maxOutputTokens
// pieces at most (finishReason MAX_TOKENS), with the tool call of
// Config.ToolCallAt as one functionCall part (name mock_tool, args the
// concatenated Config.ToolCallArgs, {} when they are not a JSON object);
// every event carries usageMetadata, the last one with the finishReason
// and the whole count. A model turn's function calls must be answered by
// as many function responses in the next turn, as Google requires. TTFT, InterToken (between events), FailStatus,
// FailDelay and CutAfter apply; GarbageAfter does not. Errors use
// Google's format ({"error":{"code","message","status"}}).

// googleStatus is the google.rpc status name Google sends with an HTTP
// status.
func googleStatus(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "INVALID_ARGUMENT"
	case http.StatusUnauthorized:
		return "UNAUTHENTICATED"
	case http.StatusForbidden:
		return "PERMISSION_DENIED"
	case http.StatusNotFound:
		return "NOT_FOUND"
	case http.StatusConflict:
		return "ABORTED"
	case http.StatusTooManyRequests:
		return "RESOURCE_EXHAUSTED"
	case http.StatusNotImplemented:
		return "UNIMPLEMENTED"
	case http.StatusServiceUnavailable:
		return "UNAVAILABLE"
	case http.StatusGatewayTimeout:
		return "DEADLINE_EXCEEDED"
	}
	if status >= 500 {
		return "INTERNAL"
	}
	return "FAILED_PRECONDITION"
}

// writeGoogleError writes {"error":{"code":...,"message":...,"status":...}}
// and, for reason, an ErrorInfo detail. A 429 says when to retry as Google
// does, in a RetryInfo detail (retryDelay "1s") and no Retry-After header;
// a 503 has Retry-After: 1.
func (s *Server) writeGoogleError(w http.ResponseWriter, status int, msg, reason string) {
	b := []byte(`{"error":{"code":`)
	b = strconv.AppendInt(b, int64(status), 10)
	b = append(b, `,"message":`...)
	b = appendString(b, msg)
	b = append(b, `,"status":`...)
	b = appendString(b, googleStatus(status))
	if reason != "" || status == http.StatusTooManyRequests {
		b = append(b, `,"details":[`...)
		if reason != "" {
			b = append(b, `{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":`...)
			b = appendString(b, reason)
			b = append(b, `,"domain":"googleapis.com"}`...)
		}
		if status == http.StatusTooManyRequests {
			if reason != "" {
				b = append(b, ',')
			}
			b = append(b, `{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"1s"}`...)
		}
		b = append(b, ']')
	}
	b = append(b, "}}\n"...)
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	s.writeJSON(w, status, b)
}

// geminiRoute parses a generateContent path: the model, the method and
// whether it is Vertex AI's form. ok is false for other paths.
func geminiRoute(path string) (model, method string, vertex, ok bool) {
	i := strings.LastIndexByte(path, ':')
	if i < 0 {
		return "", "", false, false
	}
	method = path[i+1:]
	if method != "generateContent" && method != "streamGenerateContent" {
		return "", "", false, false
	}
	parts := strings.Split(path[:i], "/")
	// "", version, "models", model
	if len(parts) == 4 && parts[0] == "" && parts[2] == "models" && parts[3] != "" {
		return parts[3], method, false, true
	}
	// "", version, "projects", p, "locations", l, "publishers", "google", "models", model
	if len(parts) == 10 && parts[0] == "" && parts[2] == "projects" && parts[3] != "" && parts[4] == "locations" &&
		parts[5] != "" && parts[6] == "publishers" && parts[7] == "google" && parts[8] == "models" && parts[9] != "" {
		return parts[9], method, true, true
	}
	return "", "", false, false
}

func isGeminiRoute(path string) bool {
	_, _, _, ok := geminiRoute(path)
	return ok
}

// geminiRequest is what the mock reads of a GenerateContentRequest.
type geminiRequest struct {
	Contents []struct {
		Role  string            `json:"role"`
		Parts []json.RawMessage `json:"parts"`
	} `json:"contents"`
	SystemInstruction *struct {
		Parts []json.RawMessage `json:"parts"`
	} `json:"systemInstruction"`
	GenerationConfig struct {
		MaxOutputTokens *int `json:"maxOutputTokens"`
	} `json:"generationConfig"`
}

// geminiAuthorized checks the key (Gemini API) or bearer token (Vertex)
// and writes Google's error if it is wrong.
func (s *Server) geminiAuthorized(w http.ResponseWriter, r *http.Request, vertex bool) bool {
	if vertex {
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || tok == "" || s.cfg.APIKey != "" && subtle.ConstantTimeCompare([]byte(tok), []byte(s.cfg.APIKey)) != 1 {
			s.writeGoogleError(w, http.StatusUnauthorized, "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential.", "ACCESS_TOKEN_TYPE_UNSUPPORTED")
			return false
		}
		return true
	}
	if s.cfg.APIKey == "" {
		return true
	}
	key := r.Header.Get("X-Goog-Api-Key")
	if key == "" {
		key = r.URL.Query().Get("key")
	}
	if key == "" {
		s.writeGoogleError(w, http.StatusForbidden, "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API.", "")
		return false
	}
	if subtle.ConstantTimeCompare([]byte(key), []byte(s.cfg.APIKey)) != 1 {
		s.writeGoogleError(w, http.StatusBadRequest, "API key not valid. Please pass a valid API key.", "API_KEY_INVALID")
		return false
	}
	return true
}

// serveGenerateContent serves both APIs' generateContent and
// streamGenerateContent (see the top of this file).
func (s *Server) serveGenerateContent(w http.ResponseWriter, r *http.Request, body []byte) {
	model, method, vertex, _ := geminiRoute(r.URL.Path)
	if !s.geminiAuthorized(w, r, vertex) {
		return
	}
	stream := method == "streamGenerateContent"
	if stream && r.URL.Query().Get("alt") != "sse" {
		s.writeGoogleError(w, http.StatusBadRequest, "mock: streamGenerateContent is served with alt=sse only", "")
		return
	}
	p, err := s.params(r.Header)
	if err != nil {
		s.writeGoogleError(w, http.StatusBadRequest, err.Error(), "")
		return
	}
	t := newWaiter(r.Context())
	defer t.stop()
	p.wait = t
	if !t.wait(p.failDelay) {
		s.noticeClose(r)
		return
	}
	if p.failStatus != 0 {
		st := p.failStatus
		s.writeGoogleError(w, st, "mock: injected failure with HTTP status "+itoa(st), "")
		return
	}
	var req geminiRequest
	if err := json.Unmarshal(body, &req); err != nil {
		s.writeGoogleError(w, http.StatusBadRequest, "Invalid JSON payload received. "+err.Error(), "")
		return
	}
	chars, msg := geminiPrompt(&req)
	if msg != "" {
		s.writeGoogleError(w, http.StatusBadRequest, msg, "")
		return
	}
	limit := 1 << 30
	if n := req.GenerationConfig.MaxOutputTokens; n != nil {
		if *n < 1 {
			s.writeGoogleError(w, http.StatusBadRequest, "generationConfig.maxOutputTokens must be positive", "")
			return
		}
		limit = *n
	}
	m := s.generateMessage(&anthropicRequest{Model: model, MaxTokens: &limit}, max(1, chars/4), p)
	events := geminiEvents(m)
	if !stream {
		if !p.wait.wait(p.ttft) {
			s.noticeClose(r)
			return
		}
		if p.cutAfter > 0 {
			panic(http.ErrAbortHandler)
		}
		s.writeJSON(w, http.StatusOK, geminiBody(m))
		return
	}
	s.sendGeminiEvents(w, r, events, p)
}

// geminiPrompt counts the prompt's characters (text parts and function
// responses) and checks the turns as Google does; msg is the error.
func geminiPrompt(req *geminiRequest) (chars int, msg string) {
	if len(req.Contents) == 0 {
		return 0, "* GenerateContentRequest.contents: contents is not specified"
	}
	count := func(raw json.RawMessage) string {
		var part map[string]json.RawMessage
		if json.Unmarshal(raw, &part) != nil || len(part) == 0 {
			return "a part must be an object with data"
		}
		var text string
		if t, ok := part["text"]; ok && json.Unmarshal(t, &text) == nil {
			chars += len(text)
		} else if fr, ok := part["functionResponse"]; ok {
			chars += len(fr)
		}
		return ""
	}
	for i, c := range req.Contents {
		if c.Role != "user" && c.Role != "model" {
			return 0, "* GenerateContentRequest.contents[" + itoa(i) + "].role: must be user or model"
		}
		if len(c.Parts) == 0 {
			return 0, "* GenerateContentRequest.contents[" + itoa(i) + "].parts: contents.parts must not be empty."
		}
		for _, raw := range c.Parts {
			if m := count(raw); m != "" {
				return 0, "* GenerateContentRequest.contents[" + itoa(i) + "]: " + m
			}
		}
	}
	if msg := checkFunctionTurns(req); msg != "" {
		return 0, msg
	}
	if req.SystemInstruction != nil {
		for _, raw := range req.SystemInstruction.Parts {
			if m := count(raw); m != "" {
				return 0, "* GenerateContentRequest.system_instruction: " + m
			}
		}
	}
	return chars, ""
}

// geminiFunctionCall is the functionCall part of the mock's tool call.
func geminiFunctionCall(bl anthropicBlock) []byte {
	var args bytes.Buffer
	for _, f := range bl.pieces {
		args.WriteString(f)
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(args.Bytes(), &obj) != nil || obj == nil {
		args.Reset()
		args.WriteString("{}")
	}
	return append(append([]byte(`{"functionCall":{"name":"`+mockToolName+`","args":`), args.Bytes()...), "}}"...)
}

// geminiFinish is the finishReason for the message's stop reason.
func geminiFinish(m *anthropicMessage) string {
	if m.stopReason == "max_tokens" {
		return "MAX_TOKENS"
	}
	return "STOP" // function calls finish with STOP too
}

func geminiUsage(b []byte, m *anthropicMessage, final bool) []byte {
	k := &m.kinds
	prompt := m.input + k.CachedInput + k.AudioInput + k.ImageInput
	b = append(b, `"usageMetadata":{"promptTokenCount":`...)
	b = strconv.AppendInt(b, int64(prompt), 10)
	if k.CachedInput > 0 {
		b = append(b, `,"cachedContentTokenCount":`...)
		b = strconv.AppendInt(b, int64(k.CachedInput), 10)
	}
	b = appendModalities(b, "promptTokensDetails", m.input+k.CachedInput, k.AudioInput, k.ImageInput)
	out := 0
	if final {
		candidates := m.outN + k.AudioOutput + k.ImageOutput
		out = candidates + k.Reasoning
		b = append(b, `,"candidatesTokenCount":`...)
		b = strconv.AppendInt(b, int64(candidates), 10)
		if k.Reasoning > 0 {
			b = append(b, `,"thoughtsTokenCount":`...)
			b = strconv.AppendInt(b, int64(k.Reasoning), 10)
		}
		b = appendModalities(b, "candidatesTokensDetails", m.outN, k.AudioOutput, k.ImageOutput)
	}
	b = append(b, `,"totalTokenCount":`...)
	b = strconv.AppendInt(b, int64(prompt+out), 10)
	return append(b, '}')
}

// geminiResponse appends one GenerateContentResponse with parts (JSON,
// comma-separated; "" for none) and, when finish is set, the finishReason
// and the whole usage.
func geminiResponse(b []byte, m *anthropicMessage, parts []byte, finish string) []byte {
	b = append(b, `{"candidates":[{"content":{"parts":[`...)
	b = append(b, parts...)
	b = append(b, `],"role":"model"}`...)
	if finish != "" {
		b = append(b, `,"finishReason":"`...)
		b = append(b, finish...)
		b = append(b, '"')
	}
	b = append(b, `,"index":0}],`...)
	b = geminiUsage(b, m, finish != "")
	b = append(b, `,"modelVersion":`...)
	b = appendString(b, m.model)
	b = append(b, `,"responseId":`...)
	b = appendString(b, m.id)
	return append(b, '}')
}

// geminiEvents is the streamed reply: one part per event, the last event
// with the finish.
func geminiEvents(m *anthropicMessage) [][]byte {
	var parts [][]byte
	for _, bl := range m.blocks {
		if bl.tool {
			parts = append(parts, geminiFunctionCall(bl))
			continue
		}
		for _, piece := range bl.pieces {
			parts = append(parts, append(appendString([]byte(`{"text":`), piece), '}'))
		}
	}
	if len(parts) == 0 {
		parts = append(parts, []byte(`{"text":""}`))
	}
	events := make([][]byte, len(parts))
	for i, part := range parts {
		finish := ""
		if i == len(parts)-1 {
			finish = geminiFinish(m)
		}
		events[i] = geminiResponse(nil, m, part, finish)
	}
	return events
}

// geminiBody is the non-streamed reply: text parts merged, as Gemini does.
func geminiBody(m *anthropicMessage) []byte {
	var parts []byte
	for _, bl := range m.blocks {
		if len(parts) > 0 {
			parts = append(parts, ',')
		}
		if bl.tool {
			parts = append(parts, geminiFunctionCall(bl)...)
			continue
		}
		parts = append(parts, `{"text":"`...)
		for _, s := range bl.pieces {
			parts = appendEscaped(parts, s)
		}
		parts = append(parts, `"}`...)
	}
	return append(geminiResponse(nil, m, parts, geminiFinish(m)), '\n')
}

// sendGeminiEvents streams events as SSE, flushing each: TTFT before the
// first, InterToken between them; CutAfter closes the connection after
// that many.
func (s *Server) sendGeminiEvents(w http.ResponseWriter, r *http.Request, events [][]byte, p *params) {
	s.streams.Add(1)
	h := w.Header()
	h["Content-Type"] = []string{"text/event-stream"}
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	if rc.Flush() != nil || !p.wait.wait(p.ttft) {
		s.noticeClose(r)
		return
	}
	for i, e := range events {
		if i > 0 && !p.wait.wait(p.interToken) {
			s.noticeClose(r)
			return
		}
		b := append(append([]byte("data: "), e...), "\r\n\r\n"...)
		if _, err := w.Write(b); err != nil || rc.Flush() != nil {
			s.noticeClose(r)
			return
		}
		if p.cutAfter > 0 && i+1 >= p.cutAfter {
			panic(http.ErrAbortHandler)
		}
	}
	s.completed.Add(1)
}

// checkFunctionTurns checks, as Google does, that a model turn's function
// calls are answered, in the next turn, by as many function responses.
func checkFunctionTurns(req *geminiRequest) string {
	count := func(i int, kind string) int {
		n := 0
		for _, raw := range req.Contents[i].Parts {
			var part map[string]json.RawMessage
			if json.Unmarshal(raw, &part) == nil && part[kind] != nil {
				n++
			}
		}
		return n
	}
	for i := range req.Contents {
		if req.Contents[i].Role != "model" || i+1 == len(req.Contents) {
			continue
		}
		if calls := count(i, "functionCall"); calls > 0 && count(i+1, "functionResponse") != calls {
			return "Please ensure that the number of function response parts is equal to the number of function call parts of the function call turn."
		}
	}
	return ""
}
