package mockllm

import (
	"bytes"
	"crypto/subtle"
	"encoding/json"
	"net/http"
	"strconv"
)

// The Messages API mode: POST /v1/messages answers as Anthropic's API does
// (https://docs.anthropic.com/en/api/messages), so the gateway's Anthropic
// provider can be tested against it. It needs "x-api-key" (when
// Config.APIKey is set; Authorization is not read) and "anthropic-version",
// validates model, max_tokens and messages, and replies with a message or,
// for "stream": true, the event stream: message_start, ping, a text block
// with the reply text (Config.Text or generated tokens, cut as for chat,
// max_tokens events at most), a tool_use block at Config.ToolCallAt whose
// input streams as Config.ToolCallArgs (the text after it in a third
// block), message_delta with stop_reason and usage, message_stop.
// TTFT, InterToken, FailStatus, FailDelay and CutAfter apply; errors use
// Anthropic's format ({"type":"error","error":{"type":...,"message":...}})
// and FailStatus 529 is its overloaded_error.
//
// HeaderRecording replays an entry of Config.Recordings instead: a stream
// recording (SSE) is sent event by event, InterToken apart, for a
// streaming request; a JSON one is the reply body of a non-streaming one.

// HeaderRecording names the entry of Config.Recordings to replay on
// POST /v1/messages.
const HeaderRecording = "X-Mock-Recording"

// anthropicRequest is what the mock reads of a Messages API request.
type anthropicRequest struct {
	Model     string            `json:"model"`
	MaxTokens *int              `json:"max_tokens"`
	Stream    bool              `json:"stream"`
	System    json.RawMessage   `json:"system"`
	Messages  []json.RawMessage `json:"messages"`
}

// anthropicErrorType is the error type Anthropic uses for a status.
func anthropicErrorType(status int) string {
	switch status {
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusPaymentRequired:
		return "billing_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case http.StatusGatewayTimeout:
		return "timeout_error"
	case 529:
		return "overloaded_error"
	}
	if status >= 500 {
		return "api_error"
	}
	return "invalid_request_error"
}

// writeAnthropicError writes {"type":"error","error":{...}} with status.
func (s *Server) writeAnthropicError(w http.ResponseWriter, status int, msg string) {
	b := append([]byte(`{"type":"error","error":{"type":`), appendString(nil, anthropicErrorType(status))...)
	b = append(b, `,"message":`...)
	b = appendString(b, msg)
	b = append(b, "}}\n"...)
	if status == 529 || status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1")
	}
	s.writeJSON(w, status, b)
}

// serveMessages serves POST /v1/messages (see the top of this file).
func (s *Server) serveMessages(w http.ResponseWriter, r *http.Request, body []byte) {
	if s.cfg.APIKey != "" {
		key := r.Header.Get("X-Api-Key")
		if key == "" || subtle.ConstantTimeCompare([]byte(key), []byte(s.cfg.APIKey)) != 1 {
			s.writeAnthropicError(w, http.StatusUnauthorized, "invalid x-api-key")
			return
		}
	}
	if r.Header.Get("Anthropic-Version") == "" {
		s.writeAnthropicError(w, http.StatusBadRequest, "anthropic-version: header is required")
		return
	}
	p, err := s.params(r.Header)
	if err != nil {
		s.writeAnthropicError(w, http.StatusBadRequest, err.Error())
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
		if st < 200 || st > 599 {
			st = 500
		}
		s.writeAnthropicError(w, st, "mock: injected failure with HTTP status "+itoa(st))
		return
	}
	var req anthropicRequest
	if err := json.Unmarshal(body, &req); err != nil {
		s.writeAnthropicError(w, http.StatusBadRequest, "invalid JSON: "+err.Error())
		return
	}
	switch {
	case req.Model == "":
		s.writeAnthropicError(w, http.StatusBadRequest, "model: Field required")
		return
	case req.MaxTokens == nil:
		s.writeAnthropicError(w, http.StatusBadRequest, "max_tokens: Field required")
		return
	case *req.MaxTokens < 1:
		s.writeAnthropicError(w, http.StatusBadRequest, "max_tokens: Input should be greater than or equal to 1")
		return
	case len(req.Messages) == 0:
		s.writeAnthropicError(w, http.StatusBadRequest, "messages: at least one message is required")
		return
	}
	chars, _, err := countPrompt(req.System)
	for _, m := range req.Messages {
		var msg struct {
			Content json.RawMessage `json:"content"`
		}
		if err == nil {
			err = json.Unmarshal(m, &msg)
		}
		if err == nil {
			var c int
			c, _, err = countPrompt(msg.Content)
			chars += c
		}
	}
	if err != nil {
		s.writeAnthropicError(w, http.StatusBadRequest, "messages: "+err.Error())
		return
	}
	if name := r.Header.Get(HeaderRecording); name != "" {
		s.replay(w, r, name, req.Stream, p)
		return
	}
	m := s.generateMessage(&req, max(1, chars/4), p)
	if !req.Stream {
		if !p.wait.wait(p.ttft) {
			s.noticeClose(r)
			return
		}
		if p.cutAfter > 0 {
			panic(http.ErrAbortHandler)
		}
		s.writeJSON(w, http.StatusOK, m.body())
		return
	}
	s.sendEvents(w, r, m.events(), p)
}

// anthropicMessage is a generated Messages API reply.
type anthropicMessage struct {
	id, model   string
	blocks      []anthropicBlock
	stopReason  string
	input, outN int
	kinds       UsageKinds // reported on top of input and outN
}

// anthropicBlock is one content block: text, or the tool_use block.
type anthropicBlock struct {
	tool   bool
	pieces []string // text deltas, or input_json fragments, as streamed
}

// generateMessage builds the reply the params describe.
func (s *Server) generateMessage(req *anthropicRequest, input int, p *params) *anthropicMessage {
	m := &anthropicMessage{id: "msg_mock_" + strconv.FormatInt(s.seq.Add(1), 10), model: req.Model, input: input, stopReason: "end_turn",
		kinds: p.kinds}
	n := p.eventCount()
	if *req.MaxTokens < n {
		n, m.stopReason = *req.MaxTokens, "max_tokens"
	}
	tool := p.textSet && p.toolCallAt > 0
	cur := &anthropicBlock{}
	off := 0
	for i := 0; i < n; i++ {
		if tool && off == p.toolCallAt {
			m.blocks = append(m.blocks, *cur, *toolBlock(p))
			cur = &anthropicBlock{}
		}
		piece, end := p.appendPiece(nil, i, off)
		var text string
		if p.textSet {
			text = p.text[off:end]
		} else {
			text = string(piece) // generated tokens need no escaping
		}
		off = end
		cur.pieces = append(cur.pieces, text)
	}
	if tool && off == p.toolCallAt && p.toolCallAt == len(p.text) {
		m.blocks = append(m.blocks, *cur, *toolBlock(p))
		cur = &anthropicBlock{}
	}
	if len(cur.pieces) > 0 || len(m.blocks) == 0 {
		m.blocks = append(m.blocks, *cur)
	}
	if tool && m.stopReason == "end_turn" {
		m.stopReason = "tool_use"
	}
	m.outN = n
	return m
}

func toolBlock(p *params) *anthropicBlock {
	args := p.toolCallArgs
	if len(args) == 0 {
		args = []string{"{}"}
	}
	return &anthropicBlock{tool: true, pieces: args}
}

func (m *anthropicMessage) appendUsage(b []byte, input bool) []byte {
	b = append(b, `"usage":{`...)
	if input {
		b = m.appendInputUsage(b)
		b = append(b, ',')
	}
	b = append(b, `"output_tokens":`...)
	b = strconv.AppendInt(b, int64(m.outN+m.kinds.Reasoning), 10)
	return append(b, '}')
}

// appendInputUsage appends the input members of a Messages usage object:
// input_tokens (the cache's reads and writes left out, as Anthropic
// counts) and the cache's.
func (m *anthropicMessage) appendInputUsage(b []byte) []byte {
	b = append(b, `"input_tokens":`...)
	b = strconv.AppendInt(b, int64(m.input), 10)
	b = append(b, `,"cache_creation_input_tokens":`...)
	b = strconv.AppendInt(b, int64(m.kinds.CacheWrite), 10)
	b = append(b, `,"cache_read_input_tokens":`...)
	return strconv.AppendInt(b, int64(m.kinds.CachedInput), 10)
}

const mockToolID, mockToolName = "toolu_mock", "mock_tool"

// body is the non-streamed reply.
func (m *anthropicMessage) body() []byte {
	b := []byte(`{"id":`)
	b = appendString(b, m.id)
	b = append(b, `,"type":"message","role":"assistant","model":`...)
	b = appendString(b, m.model)
	b = append(b, `,"content":[`...)
	for i, bl := range m.blocks {
		if i > 0 {
			b = append(b, ',')
		}
		if bl.tool {
			b = append(b, `{"type":"tool_use","id":"`+mockToolID+`","name":"`+mockToolName+`","input":`...)
			var input bytes.Buffer
			for _, f := range bl.pieces {
				input.WriteString(f)
			}
			if !json.Valid(input.Bytes()) {
				input.Reset()
				input.WriteString("{}")
			}
			b = append(append(b, input.Bytes()...), '}')
			continue
		}
		b = append(b, `{"type":"text","text":"`...)
		for _, s := range bl.pieces {
			b = appendEscaped(b, s)
		}
		b = append(b, `"}`...)
	}
	b = append(b, `],"stop_reason":"`...)
	b = append(b, m.stopReason...)
	b = append(b, `","stop_sequence":null,`...)
	b = m.appendUsage(b, true)
	return append(b, "}\n"...)
}

// events is the streamed reply, one SSE event each; content deltas are
// the events InterToken apart.
func (m *anthropicMessage) events() []string {
	ev := func(typ string, data []byte) string {
		return "event: " + typ + "\ndata: " + string(data) + "\n\n"
	}
	b := []byte(`{"type":"message_start","message":{"id":`)
	b = appendString(b, m.id)
	b = append(b, `,"type":"message","role":"assistant","model":`...)
	b = appendString(b, m.model)
	b = append(b, `,"content":[],"stop_reason":null,"stop_sequence":null,"usage":{`...)
	b = m.appendInputUsage(b)
	b = append(b, `,"output_tokens":1}}}`...)
	out := []string{ev("message_start", b), "event: ping\ndata: {\"type\": \"ping\"}\n\n"}
	for i, bl := range m.blocks {
		idx := strconv.Itoa(i)
		if bl.tool {
			out = append(out, ev("content_block_start", []byte(`{"type":"content_block_start","index":`+idx+
				`,"content_block":{"type":"tool_use","id":"`+mockToolID+`","name":"`+mockToolName+`","input":{}}}`)))
		} else {
			out = append(out, ev("content_block_start", []byte(`{"type":"content_block_start","index":`+idx+`,"content_block":{"type":"text","text":""}}`)))
		}
		for _, piece := range bl.pieces {
			d := []byte(`{"type":"content_block_delta","index":` + idx + `,"delta":{"type":`)
			if bl.tool {
				d = append(d, `"input_json_delta","partial_json":`...)
			} else {
				d = append(d, `"text_delta","text":`...)
			}
			d = append(appendString(d, piece), "}}"...)
			out = append(out, ev("content_block_delta", d))
		}
		out = append(out, ev("content_block_stop", []byte(`{"type":"content_block_stop","index":`+idx+`}`)))
	}
	b = append([]byte(`{"type":"message_delta","delta":{"stop_reason":"`), m.stopReason...)
	b = append(b, `","stop_sequence":null},`...)
	b = append(m.appendUsage(b, false), '}')
	return append(out, ev("message_delta", b), ev("message_stop", []byte(`{"type":"message_stop"}`)))
}

// replay sends Config.Recordings[name].
func (s *Server) replay(w http.ResponseWriter, r *http.Request, name string, stream bool, p *params) {
	rec, ok := s.cfg.Recordings[name]
	if !ok {
		s.writeAnthropicError(w, http.StatusBadRequest, "mock: no recording "+strconv.Quote(name))
		return
	}
	isJSON := len(bytes.TrimSpace(rec)) > 0 && bytes.TrimSpace(rec)[0] == '{'
	if isJSON == stream {
		s.writeAnthropicError(w, http.StatusBadRequest, "mock: recording "+strconv.Quote(name)+" does not fit the request's stream setting")
		return
	}
	if !stream {
		if !p.wait.wait(p.ttft) {
			s.noticeClose(r)
			return
		}
		s.writeJSON(w, http.StatusOK, rec)
		return
	}
	var events []string
	for _, e := range bytes.SplitAfter(bytes.ReplaceAll(rec, []byte("\r\n"), []byte("\n")), []byte("\n\n")) {
		if len(bytes.TrimSpace(e)) > 0 {
			events = append(events, string(e))
		}
	}
	s.sendEvents(w, r, events, p)
}

// sendEvents streams events, flushing each: TTFT before the first,
// InterToken before each content_block_delta after the first; CutAfter
// closes the connection after that many.
func (s *Server) sendEvents(w http.ResponseWriter, r *http.Request, events []string, p *params) {
	s.streams.Add(1)
	h := w.Header()
	h["Content-Type"] = []string{"text/event-stream"}
	h["Cache-Control"] = []string{"no-cache"}
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	if rc.Flush() != nil || !p.wait.wait(p.ttft) {
		s.noticeClose(r)
		return
	}
	deltas := 0
	for i, e := range events {
		if len(e) > 26 && e[:26] == "event: content_block_delta" {
			if deltas > 0 && !p.wait.wait(p.interToken) {
				s.noticeClose(r)
				return
			}
			deltas++
		}
		if _, err := w.Write([]byte(e)); err != nil || rc.Flush() != nil {
			s.noticeClose(r)
			return
		}
		if p.cutAfter > 0 && i+1 >= p.cutAfter {
			panic(http.ErrAbortHandler)
		}
	}
	s.completed.Add(1)
}
