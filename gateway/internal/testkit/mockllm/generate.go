package mockllm

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"
)

// GarbageSSE is what a stream with Config.GarbageAfter writes: events a
// broken upstream might send — truncated JSON, text that is not JSON,
// invalid UTF-8, JSON of the wrong shape, a comment, fields other than
// data, a line without a colon, a bare "data" field, empty events. None
// carries content text: a client that skips what it cannot parse reads the
// same reply as without it.
const GarbageSSE = "data: {\"id\":\"chatcmpl-garbage\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"rol\n\n" +
	"data: this is not JSON\n\n" +
	"data: \xff\xfe\xfd\x00\x01\n\n" +
	"data: {\"choices\":\"not an array\",\"usage\":\"none\"}\n\n" +
	"data: {\"choices\":[{\"index\":\"zero\",\"delta\":{\"tool_calls\":7}}]}\n\n" +
	": a comment\n\n" +
	"event: mystery\nid: 42\nretry: 10\n\n" +
	"a line without a colon\n\n" +
	"data\n\n" +
	"\n\n\n"

// doneEvent is the last event of a complete stream.
var doneEvent = []byte("data: [DONE]\n\n")

// systemFingerprint is sent in every completion object and chunk.
const systemFingerprint = "fp_mock"

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type chatMessage struct {
	Content json.RawMessage `json:"content"`
}

type chatRequest struct {
	Model               string         `json:"model"`
	Messages            []chatMessage  `json:"messages"`
	Stream              bool           `json:"stream"`
	StreamOptions       *streamOptions `json:"stream_options"`
	MaxTokens           *int           `json:"max_tokens"`
	MaxCompletionTokens *int           `json:"max_completion_tokens"`
}

type completionRequest struct {
	Model         string          `json:"model"`
	Prompt        json.RawMessage `json:"prompt"`
	Stream        bool            `json:"stream"`
	StreamOptions *streamOptions  `json:"stream_options"`
	MaxTokens     *int            `json:"max_tokens"`
}

// completion describes one chat or legacy completion to generate.
type completion struct {
	chat         bool
	id           string
	model        string
	created      int64
	stream       bool
	includeUsage bool // the request asked for stream_options.include_usage
	promptTokens int
	limit        int // cap on content events; -1 for none
}

func (s *Server) serveChat(w http.ResponseWriter, r *http.Request, body []byte, p *params) {
	var req chatRequest
	if err := json.Unmarshal(body, &req); err != nil {
		s.badJSON(w, err)
		return
	}
	if req.Model == "" {
		s.writeError(w, http.StatusBadRequest, "invalid_request_error", "", "you must provide a model parameter")
		return
	}
	if len(req.Messages) == 0 {
		s.writeError(w, http.StatusBadRequest, "invalid_request_error", "",
			"'messages' must be a non-empty array")
		return
	}
	limit, ok := s.limit(w, "max_tokens", req.MaxTokens, -1)
	if !ok {
		return
	}
	if limit, ok = s.limit(w, "max_completion_tokens", req.MaxCompletionTokens, limit); !ok {
		return
	}
	chars, tokens := 0, 0
	for _, m := range req.Messages {
		c, t, err := countPrompt(m.Content)
		if err != nil {
			s.writeError(w, http.StatusBadRequest, "invalid_request_error", "", "invalid message content: "+err.Error())
			return
		}
		chars += c
		tokens += t
	}
	c := &completion{
		chat:         true,
		id:           "chatcmpl-mock-" + strconv.FormatInt(s.seq.Add(1), 10),
		model:        req.Model,
		created:      time.Now().Unix(),
		stream:       req.Stream,
		includeUsage: req.Stream && req.StreamOptions != nil && req.StreamOptions.IncludeUsage,
		promptTokens: max(1, chars/4+tokens),
		limit:        limit,
	}
	if p.tokensPerByte {
		c.promptTokens = 0
		for _, m := range req.Messages {
			c.promptTokens += promptBytes(m.Content) + 4
		}
	}
	s.complete(w, r, c, p)
}

func (s *Server) serveCompletion(w http.ResponseWriter, r *http.Request, body []byte, p *params) {
	var req completionRequest
	if err := json.Unmarshal(body, &req); err != nil {
		s.badJSON(w, err)
		return
	}
	if req.Model == "" {
		s.writeError(w, http.StatusBadRequest, "invalid_request_error", "", "you must provide a model parameter")
		return
	}
	limit, ok := s.limit(w, "max_tokens", req.MaxTokens, -1)
	if !ok {
		return
	}
	chars, tokens, err := countPrompt(req.Prompt)
	if err != nil {
		s.writeError(w, http.StatusBadRequest, "invalid_request_error", "", "invalid prompt: "+err.Error())
		return
	}
	c := &completion{
		id:           "cmpl-mock-" + strconv.FormatInt(s.seq.Add(1), 10),
		model:        req.Model,
		created:      time.Now().Unix(),
		stream:       req.Stream,
		includeUsage: req.Stream && req.StreamOptions != nil && req.StreamOptions.IncludeUsage,
		promptTokens: max(1, chars/4+tokens),
		limit:        limit,
	}
	if p.tokensPerByte {
		c.promptTokens = promptBytes(req.Prompt) + tokens + 4
	}
	s.complete(w, r, c, p)
}

// promptBytes is the UTF-8 bytes of a content or prompt's text: a string,
// the text of parts, the strings of an array (token numbers count 0).
func promptBytes(raw json.RawMessage) int {
	raw = trimSpace(raw)
	if len(raw) == 0 {
		return 0
	}
	switch raw[0] {
	case '"':
		var s string
		json.Unmarshal(raw, &s)
		return len(s)
	case '{':
		var part struct {
			Text string `json:"text"`
		}
		json.Unmarshal(raw, &part)
		return len(part.Text)
	case '[':
		var items []json.RawMessage
		json.Unmarshal(raw, &items)
		n := 0
		for _, it := range items {
			n += promptBytes(it)
		}
		return n
	}
	return 0
}

// completionTokens is the completion_tokens of a reply of n pieces: n, or
// with tokensPerByte the bytes of their text.
func (p *params) completionTokens(n int) int {
	if !p.tokensPerByte {
		return n
	}
	bytes, off := 0, 0
	for i := range n {
		if !p.textSet {
			bytes += len("tok ") + len(strconv.Itoa(i))
			continue
		}
		end := p.pieceEnd(off)
		bytes += end - off
		off = end
	}
	return bytes
}

// piecesWithin is how many pieces a limit of tokens allows: limit itself
// (-1: none), or with tokensPerByte the most whose bytes fit in it.
func (p *params) piecesWithin(limit int) int {
	if !p.tokensPerByte || limit < 0 {
		return limit
	}
	n := 0
	for n < p.eventCount() && p.completionTokens(n+1) <= limit {
		n++
	}
	return n
}

// limit validates a max_tokens-style field and returns the tighter of it and
// prev (-1 meaning no limit).
func (s *Server) limit(w http.ResponseWriter, name string, v *int, prev int) (int, bool) {
	if v == nil {
		return prev, true
	}
	if *v < 1 {
		s.writeError(w, http.StatusBadRequest, "invalid_request_error", "integer_below_min_value",
			"Invalid '"+name+"': integer below minimum value. Expected a value >= 1, but got "+itoa(*v)+" instead.")
		return 0, false
	}
	if prev < 0 || *v < prev {
		return *v, true
	}
	return prev, true
}

func (s *Server) badJSON(w http.ResponseWriter, err error) {
	s.writeError(w, http.StatusBadRequest, "invalid_request_error", "",
		"We could not parse the JSON body of your request. ("+err.Error()+")")
}

// countPrompt returns the number of characters (runes) in the strings of a
// prompt or message content (a string, an array of strings, an array of
// content parts with "text", or token arrays) and the number of literal
// tokens in token arrays.
func countPrompt(raw json.RawMessage) (chars, tokens int, err error) {
	raw = trimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return 0, 0, nil
	}
	switch raw[0] {
	case '"':
		var str string
		if err := json.Unmarshal(raw, &str); err != nil {
			return 0, 0, err
		}
		return utf8.RuneCountInString(str), 0, nil
	case '[':
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			return 0, 0, err
		}
		for _, it := range items {
			it = trimSpace(it)
			if len(it) == 0 {
				continue
			}
			switch it[0] {
			case '"', '[':
				c, t, err := countPrompt(it)
				if err != nil {
					return 0, 0, err
				}
				chars += c
				tokens += t
			case '{':
				var part struct {
					Text string `json:"text"`
				}
				if err := json.Unmarshal(it, &part); err != nil {
					return 0, 0, err
				}
				chars += utf8.RuneCountInString(part.Text)
			default:
				tokens++
			}
		}
		return chars, tokens, nil
	}
	return 0, 0, errUnsupportedPrompt
}

type promptError string

func (e promptError) Error() string { return string(e) }

const errUnsupportedPrompt = promptError("expected a string or an array")

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\n' || b[0] == '\r') {
		b = b[1:]
	}
	return b
}

// eventCount returns the number of content events the reply has without a
// max_tokens cap.
func (p *params) eventCount() int {
	if !p.textSet {
		return p.tokens
	}
	n := 0
	for off := 0; off < len(p.text); off = p.pieceEnd(off) {
		n++
	}
	return n
}

// pieceEnd returns the end offset of the piece of text starting at off:
// the next split offset, or ChunkSize bytes on (see nextPiece); a tool
// call's offset ends a piece too.
func (p *params) pieceEnd(off int) int {
	end := len(p.text)
	if len(p.split) > 0 {
		for _, s := range p.split {
			if s > off {
				end = s
				break
			}
		}
	} else {
		end = nextPiece(p.text, off, p.chunkSize)
	}
	if p.toolCallAt > off && p.toolCallAt < end {
		end = p.toolCallAt
	}
	return end
}

// nextPiece returns the end offset of the piece of text starting at off: at
// most size bytes, shortened to a rune boundary, but at least one rune.
func nextPiece(text string, off, size int) int {
	end := off + size
	if end >= len(text) {
		return len(text)
	}
	for e := end; e > off; e-- {
		if utf8.RuneStart(text[e]) {
			return e
		}
	}
	_, n := utf8.DecodeRuneInString(text[off:])
	return off + n
}

// appendPiece appends the JSON-escaped content of event i (without quotes)
// and returns the new text offset (text mode only).
func (p *params) appendPiece(b []byte, i, off int) ([]byte, int) {
	if !p.textSet {
		b = append(b, "tok"...)
		b = strconv.AppendInt(b, int64(i), 10)
		return append(b, ' '), off
	}
	end := p.pieceEnd(off)
	return appendEscaped(b, p.text[off:end]), end
}

// complete writes a chat or legacy completion, streaming or not.
func (s *Server) complete(w http.ResponseWriter, r *http.Request, c *completion, p *params) {
	n, finish := p.eventCount(), "stop"
	if limit := p.piecesWithin(c.limit); limit >= 0 && limit < n {
		n, finish = limit, "length"
	}
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	if !c.stream {
		if !p.wait.wait(p.ttft) {
			s.noticeClose(r)
			return
		}
		if p.cutAfter > 0 {
			panic(http.ErrAbortHandler)
		}
		*bp = c.appendBody((*bp)[:0], p, n, finish)
		s.writeJSON(w, http.StatusOK, *bp)
		return
	}
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

	prefix := c.appendPrefix(make([]byte, 0, 160+len(c.model)))
	var tail string
	if c.includeUsage {
		tail = `],"usage":null}` + "\n\n"
	} else {
		tail = "]}\n\n"
	}
	events := 0
	// emit writes and flushes buf as one event, then applies CutAfter.
	emit := func(buf []byte) bool {
		if _, err := w.Write(buf); err != nil || rc.Flush() != nil {
			s.noticeClose(r)
			return false
		}
		events++
		if p.garbage > 0 && events == p.garbage {
			if _, err := io.WriteString(w, GarbageSSE); err != nil || rc.Flush() != nil {
				s.noticeClose(r)
				return false
			}
		}
		if p.cutAfter > 0 && events >= p.cutAfter {
			panic(http.ErrAbortHandler)
		}
		return true
	}
	b := *bp
	defer func() { *bp = b }()
	if c.chat {
		b = append(append(b[:0], prefix...), `{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}`...)
		if b = append(b, tail...); !emit(b) {
			return
		}
	}
	off := 0
	toolCall := c.chat && p.textSet && p.toolCallAt > 0
	if toolCall && finish == "stop" {
		finish = "tool_calls"
	}
	for i := 0; i < n; i++ {
		if i > 0 && !p.wait.wait(p.interToken) {
			s.noticeClose(r)
			return
		}
		if toolCall && off == p.toolCallAt {
			for k := range p.toolCallEvents() {
				if b = p.appendToolCall(append(b[:0], prefix...), k); !emit(append(b, tail...)) {
					return
				}
			}
		}
		b = append(b[:0], prefix...)
		if c.chat {
			b = append(b, `{"index":0,"delta":{"content":"`...)
			b, off = p.appendPiece(b, i, off)
			b = append(b, `"},"logprobs":null,"finish_reason":null}`...)
		} else {
			b = append(b, `{"text":"`...)
			b, off = p.appendPiece(b, i, off)
			b = append(b, `","index":0,"logprobs":null,"finish_reason":null}`...)
		}
		if b = append(b, tail...); !emit(b) {
			return
		}
	}
	if toolCall && off == p.toolCallAt && p.toolCallAt == len(p.text) {
		for k := range p.toolCallEvents() {
			if b = p.appendToolCall(append(b[:0], prefix...), k); !emit(append(b, tail...)) {
				return
			}
		}
	}
	b = append(b[:0], prefix...)
	if c.chat {
		b = append(b, `{"index":0,"delta":{},"logprobs":null,"finish_reason":"`...)
	} else {
		b = append(b, `{"text":"","index":0,"logprobs":null,"finish_reason":"`...)
	}
	b = append(append(b, finish...), `"}`...)
	if b = append(b, tail...); !emit(b) {
		return
	}
	if c.includeUsage || p.usage {
		b = append(b[:0], prefix...)
		b = append(b, `],"usage":`...)
		b = appendOpenAIUsage(b, c.promptTokens, p.completionTokens(n), &p.kinds)
		if b = append(b, "}\n\n"...); !emit(b) {
			return
		}
	}
	if p.cutAfter > 0 {
		panic(http.ErrAbortHandler)
	}
	if _, err := w.Write(doneEvent); err != nil || rc.Flush() != nil {
		s.noticeClose(r)
		return
	}
	s.completed.Add(1)
}

// toolCallDelta is the choice of the tool-call event of Config.ToolCallAt
// without Config.ToolCallArgs.
const toolCallDelta = `{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_mock","type":"function","function":{"name":"mock_tool","arguments":"{}"}}]},"logprobs":null,"finish_reason":null}`

// toolCallEvents is the number of events the tool call takes: one per
// fragment of its arguments.
func (p *params) toolCallEvents() int { return max(len(p.toolCallArgs), 1) }

// appendToolCall appends the choice of the tool call's event k: the first
// carries the call's id and name, every one a fragment of its arguments.
func (p *params) appendToolCall(b []byte, k int) []byte {
	if len(p.toolCallArgs) == 0 {
		return append(b, toolCallDelta...)
	}
	b = append(b, `{"index":0,"delta":{"tool_calls":[{"index":0,`...)
	if k == 0 {
		b = append(b, `"id":"call_mock","type":"function","function":{"name":"mock_tool","arguments":`...)
	} else {
		b = append(b, `"function":{"arguments":`...)
	}
	b = appendString(b, p.toolCallArgs[k])
	return append(b, `}}]},"logprobs":null,"finish_reason":null}`...)
}

// appendPrefix appends the part of a stream event shared by all events:
// `data: {"id":..,...,"choices":[`.
func (c *completion) appendPrefix(b []byte) []byte {
	b = append(b, `data: {"id":"`...)
	b = append(b, c.id...)
	if c.chat {
		b = append(b, `","object":"chat.completion.chunk","created":`...)
	} else {
		b = append(b, `","object":"text_completion","created":`...)
	}
	b = strconv.AppendInt(b, c.created, 10)
	b = append(b, `,"model":`...)
	b = appendString(b, c.model)
	b = append(b, `,"system_fingerprint":"`+systemFingerprint+`","choices":[`...)
	return b
}

// appendBody appends a non-streaming completion object with n content pieces.
func (c *completion) appendBody(b []byte, p *params, n int, finish string) []byte {
	b = append(b, `{"id":"`...)
	b = append(b, c.id...)
	if c.chat {
		b = append(b, `","object":"chat.completion","created":`...)
	} else {
		b = append(b, `","object":"text_completion","created":`...)
	}
	b = strconv.AppendInt(b, c.created, 10)
	b = append(b, `,"model":`...)
	b = appendString(b, c.model)
	b = append(b, `,"system_fingerprint":"`+systemFingerprint+`","choices":[{`...)
	if c.chat {
		b = append(b, `"index":0,"message":{"role":"assistant","content":"`...)
	} else {
		b = append(b, `"text":"`...)
	}
	off := 0
	for i := 0; i < n; i++ {
		b, off = p.appendPiece(b, i, off)
	}
	if c.chat {
		b = append(b, `"},"logprobs":null,"finish_reason":"`...)
	} else {
		b = append(b, `","index":0,"logprobs":null,"finish_reason":"`...)
	}
	b = append(append(b, finish...), `"}],"usage":`...)
	b = appendOpenAIUsage(b, c.promptTokens, p.completionTokens(n), &p.kinds)
	return append(b, "}\n"...)
}

// appendUsage appends {"prompt_tokens":..,"completion_tokens":..,"total_tokens":..}.
func appendUsage(b []byte, prompt, completion int) []byte {
	b = append(b, `{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(prompt), 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, int64(completion), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(prompt+completion), 10)
	return append(b, '}')
}
