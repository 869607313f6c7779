package mockllm

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The Responses API mode: POST /v1/responses answers as OpenAI's
// Responses API does (https://platform.openai.com/docs/api-reference/responses),
// so the gateway can pass a Responses request to an OpenAI upstream
// natively. It checks the key as the OpenAI routes do, validates model,
// input and max_output_tokens, and replies with a Response object or, for
// "stream": true, the event stream: response.created,
// response.in_progress, a message item whose text streams as
// output_text.delta events (Config.Text or generated tokens, cut as for
// chat, max_output_tokens events at most), a function_call item at
// Config.ToolCallAt whose arguments stream as Config.ToolCallArgs (the
// text after it in a second message item), then response.completed (or
// response.incomplete at max_output_tokens) with the output and usage.
// Every event has sequence_number. TTFT, InterToken, FailStatus,
// FailDelay and CutAfter apply, errors use OpenAI's format.
//
// GET and DELETE /v1/responses/{id} and GET /v1/responses/{id}/input_items
// answer for the ids this server generated (it keeps the last
// MaxStoredResponses replies): the Response, its deletion, and its input
// as given; other ids get a 404.

// MaxStoredResponses bounds the replies kept for GET /v1/responses/{id}.
const MaxStoredResponses = 256

// responsesRequest is what the mock reads of a Responses request.
type responsesRequest struct {
	Model           string          `json:"model"`
	Input           json.RawMessage `json:"input"`
	Instructions    string          `json:"instructions"`
	Stream          bool            `json:"stream"`
	MaxOutputTokens *int            `json:"max_output_tokens"`
}

// responsesRoute is the handler of method on path p, under /v1/responses.
func responsesRoute(method, p string) func(*Server, http.ResponseWriter, *http.Request, []byte, *params) {
	if p == "/v1/responses" && method == http.MethodPost {
		return (*Server).serveResponses
	}
	rest := strings.TrimPrefix(p, "/v1/responses/")
	return func(s *Server, w http.ResponseWriter, r *http.Request, _ []byte, _ *params) {
		if rest == p || rest == "" {
			s.writeError(w, http.StatusNotFound, "invalid_request_error", "", "Invalid URL ("+r.Method+" "+r.URL.Path+")")
			return
		}
		s.serveStoredResponse(w, r, rest)
	}
}

// serveResponses serves POST /v1/responses (see the top of this file).
func (s *Server) serveResponses(w http.ResponseWriter, r *http.Request, body []byte, p *params) {
	var req responsesRequest
	if err := json.Unmarshal(body, &req); err != nil {
		s.badJSON(w, err)
		return
	}
	if req.Model == "" {
		s.writeError(w, http.StatusBadRequest, "invalid_request_error", "", "Missing required parameter: 'model'.")
		return
	}
	chars, _, err := countPrompt(req.Input)
	if err == nil && len(bytes.TrimSpace(req.Input)) > 0 && bytes.TrimSpace(req.Input)[0] == '[' {
		chars, err = countItems(req.Input)
	}
	if err != nil || len(req.Input) == 0 {
		s.writeError(w, http.StatusBadRequest, "invalid_request_error", "", "Invalid 'input': expected a string or an array of items.")
		return
	}
	limit := 1 << 30
	if req.MaxOutputTokens != nil {
		if *req.MaxOutputTokens < 1 {
			s.writeError(w, http.StatusBadRequest, "invalid_request_error", "", "Invalid 'max_output_tokens': integer below minimum value.")
			return
		}
		limit = *req.MaxOutputTokens
	}
	chars += len(req.Instructions)
	m := s.generateMessage(&anthropicRequest{Model: req.Model, MaxTokens: &limit}, max(1, chars/4), p)
	rs := &mockResponse{msg: m, id: "resp_mock_" + strconv.FormatInt(s.seq.Add(1), 10), created: time.Now().Unix()}
	s.storeResponse(rs.id, rs.object(), req.Input)
	if !req.Stream {
		if !p.wait.wait(p.ttft) {
			s.noticeClose(r)
			return
		}
		if p.cutAfter > 0 {
			panic(http.ErrAbortHandler)
		}
		s.writeJSON(w, http.StatusOK, append(rs.object(), '\n'))
		return
	}
	s.sendResponseEvents(w, r, rs.events(), p)
}

// countItems counts the text of input items: string contents, text parts,
// function call arguments and outputs.
func countItems(raw json.RawMessage) (int, error) {
	var items []struct {
		Content   json.RawMessage `json:"content"`
		Output    json.RawMessage `json:"output"`
		Arguments string          `json:"arguments"`
	}
	if err := json.Unmarshal(raw, &items); err != nil {
		return 0, err
	}
	n := 0
	for _, it := range items {
		c, _, err := countPrompt(it.Content)
		if err != nil {
			return 0, err
		}
		o, _, _ := countPrompt(it.Output)
		n += c + o + len(it.Arguments)
	}
	return n, nil
}

// mockResponse is a generated Response: the Messages API reply the
// Anthropic mode would give, rendered as Responses output items.
type mockResponse struct {
	msg     *anthropicMessage
	id      string
	created int64
}

// mockCallID is the function call's call_id, as in the chat mode.
const mockCallID = "call_mock"

func (rs *mockResponse) status() (status, reason string) {
	if rs.msg.stopReason == "max_tokens" {
		return "incomplete", "max_output_tokens"
	}
	return "completed", ""
}

// item appends output item i; open items are in progress with no text.
func (rs *mockResponse) item(b []byte, i int, open bool) []byte {
	bl := rs.msg.blocks[i]
	status := "completed"
	if open {
		status = "in_progress"
	}
	joined := ""
	if !open {
		joined = strings.Join(bl.pieces, "")
	}
	if bl.tool {
		if !open && !json.Valid([]byte(joined)) {
			joined = "{}"
		}
		b = append(b, `{"type":"function_call","id":"fc_`+rs.id[5:]+`_`+strconv.Itoa(i)+`","call_id":"`+mockCallID+`","name":"`+mockToolName+`","arguments":`...)
		b = appendString(b, joined)
		return append(b, `,"status":"`+status+`"}`...)
	}
	b = append(b, `{"type":"message","id":"msg_`+rs.id[5:]+`_`+strconv.Itoa(i)+`","status":"`+status+`","role":"assistant","content":[`...)
	if !open {
		b = append(b, `{"type":"output_text","text":`...)
		b = appendString(b, joined)
		b = append(b, `,"annotations":[]}`...)
	}
	return append(b, `]}`...)
}

// object is the Response; with done false, as it stands at
// response.created.
func (rs *mockResponse) object() []byte { return rs.appendObject(nil, true) }

func (rs *mockResponse) appendObject(b []byte, done bool) []byte {
	status, reason := "in_progress", ""
	if done {
		status, reason = rs.status()
	}
	b = append(b, `{"id":"`+rs.id+`","object":"response","created_at":`...)
	b = strconv.AppendInt(b, rs.created, 10)
	b = append(b, `,"status":"`+status+`","error":null,"incomplete_details":`...)
	if reason != "" {
		b = append(b, `{"reason":"`+reason+`"}`...)
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"instructions":null,"model":`...)
	b = appendString(b, rs.msg.model)
	b = append(b, `,"output":[`...)
	if done {
		for i := range rs.msg.blocks {
			if i > 0 {
				b = append(b, ',')
			}
			b = rs.item(b, i, false)
		}
	}
	b = append(b, `],"parallel_tool_calls":true,"store":true,"tool_choice":"auto","tools":[],"usage":`...)
	if !done {
		return append(b, "null}"...)
	}
	k := &rs.msg.kinds
	in, out := rs.msg.input+k.CachedInput, rs.msg.outN+k.Reasoning
	b = append(b, `{"input_tokens":`...)
	b = strconv.AppendInt(b, int64(in), 10)
	b = append(b, `,"input_tokens_details":{"cached_tokens":`...)
	b = strconv.AppendInt(b, int64(k.CachedInput), 10)
	b = append(b, `},"output_tokens":`...)
	b = strconv.AppendInt(b, int64(out), 10)
	b = append(b, `,"output_tokens_details":{"reasoning_tokens":`...)
	b = strconv.AppendInt(b, int64(k.Reasoning), 10)
	b = append(b, `},"total_tokens":`...)
	b = strconv.AppendInt(b, int64(in+out), 10)
	return append(b, "}}"...)
}

// events is the streamed reply, one SSE event each.
func (rs *mockResponse) events() []string {
	var out []string
	seq := 0
	ev := func(typ string, fields []byte) {
		b := append([]byte("event: "+typ+"\ndata: {\"type\":\""+typ+"\""), fields...)
		b = append(b, `,"sequence_number":`...)
		b = strconv.AppendInt(b, int64(seq), 10)
		seq++
		out = append(out, string(b)+"}\n\n")
	}
	ref := func(i int, part bool) []byte {
		b := []byte(`,"item_id":"`)
		if rs.msg.blocks[i].tool {
			b = append(b, "fc_"...)
		} else {
			b = append(b, "msg_"...)
		}
		b = append(b, rs.id[5:]+"_"+strconv.Itoa(i)+`","output_index":`+strconv.Itoa(i)...)
		if part {
			b = append(b, `,"content_index":0`...)
		}
		return b
	}
	ev("response.created", append([]byte(`,"response":`), rs.appendObject(nil, false)...))
	ev("response.in_progress", append([]byte(`,"response":`), rs.appendObject(nil, false)...))
	for i, bl := range rs.msg.blocks {
		ev("response.output_item.added", rs.item([]byte(`,"output_index":`+strconv.Itoa(i)+`,"item":`), i, true))
		joined := strings.Join(bl.pieces, "")
		if bl.tool {
			for _, piece := range bl.pieces {
				ev("response.function_call_arguments.delta", appendString(append(ref(i, false), `,"delta":`...), piece))
			}
			if !json.Valid([]byte(joined)) {
				joined = "{}"
			}
			ev("response.function_call_arguments.done", appendString(append(ref(i, false), `,"name":"`+mockToolName+`","arguments":`...), joined))
		} else {
			ev("response.content_part.added", append(ref(i, true), `,"part":{"type":"output_text","text":"","annotations":[]}`...))
			for _, piece := range bl.pieces {
				ev("response.output_text.delta", append(appendString(append(ref(i, true), `,"delta":`...), piece), `,"logprobs":[]`...))
			}
			ev("response.output_text.done", append(appendString(append(ref(i, true), `,"text":`...), joined), `,"logprobs":[]`...))
			part := appendString(append(ref(i, true), `,"part":{"type":"output_text","text":`...), joined)
			ev("response.content_part.done", append(part, `,"annotations":[]}`...))
		}
		ev("response.output_item.done", rs.item([]byte(`,"output_index":`+strconv.Itoa(i)+`,"item":`), i, false))
	}
	typ := "response.completed"
	if s, _ := rs.status(); s == "incomplete" {
		typ = "response.incomplete"
	}
	ev(typ, append([]byte(`,"response":`), rs.appendObject(nil, true)...))
	return out
}

// sendResponseEvents streams events, flushing each: TTFT before the
// first, InterToken before each delta after the first; CutAfter closes
// the connection after that many.
func (s *Server) sendResponseEvents(w http.ResponseWriter, r *http.Request, events []string, p *params) {
	s.streams.Add(1)
	h := w.Header()
	h["Content-Type"] = []string{"text/event-stream; charset=utf-8"}
	h["Cache-Control"] = []string{"no-cache"}
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	if rc.Flush() != nil || !p.wait.wait(p.ttft) {
		s.noticeClose(r)
		return
	}
	deltas := 0
	for i, e := range events {
		if strings.HasPrefix(e, "event: response.output_text.delta") || strings.HasPrefix(e, "event: response.function_call_arguments.delta") {
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

// storedResponse is a reply kept for GET /v1/responses/{id}.
type storedResponse struct {
	object, input []byte
}

// storeResponse keeps a reply, dropping the oldest beyond
// MaxStoredResponses.
func (s *Server) storeResponse(id string, object, input []byte) {
	s.storeMu.Lock()
	defer s.storeMu.Unlock()
	if s.stored == nil {
		s.stored = make(map[string]storedResponse)
	}
	s.stored[id] = storedResponse{object: object, input: append([]byte(nil), input...)}
	s.storedOrder = append(s.storedOrder, id)
	for len(s.storedOrder) > MaxStoredResponses {
		delete(s.stored, s.storedOrder[0])
		s.storedOrder = s.storedOrder[1:]
	}
}

// serveStoredResponse serves GET and DELETE /v1/responses/{id} and GET
// /v1/responses/{id}/input_items.
func (s *Server) serveStoredResponse(w http.ResponseWriter, r *http.Request, rest string) {
	id, sub, _ := strings.Cut(rest, "/")
	s.storeMu.Lock()
	st, ok := s.stored[id]
	if ok && r.Method == http.MethodDelete && sub == "" {
		delete(s.stored, id)
	}
	s.storeMu.Unlock()
	switch {
	case !ok:
		s.writeError(w, http.StatusNotFound, "invalid_request_error", "", "Response with id '"+id+"' not found.")
	case r.Method == http.MethodDelete && sub == "":
		s.writeJSON(w, http.StatusOK, []byte(`{"id":"`+id+`","object":"response.deleted","deleted":true}`+"\n"))
	case r.Method == http.MethodGet && sub == "":
		s.writeJSON(w, http.StatusOK, append(append([]byte(nil), st.object...), '\n'))
	case r.Method == http.MethodGet && sub == "input_items":
		s.writeJSON(w, http.StatusOK, appendInputItems(nil, st.input))
	default:
		s.writeError(w, http.StatusNotFound, "invalid_request_error", "", "Invalid URL ("+r.Method+" "+r.URL.Path+")")
	}
}

// appendInputItems appends the input_items list of a stored input.
func appendInputItems(b, input []byte) []byte {
	b = append(b, `{"object":"list","data":[`...)
	in := bytes.TrimSpace(input)
	if len(in) > 0 && in[0] == '"' {
		b = append(b, `{"type":"message","id":"msg_in_0","role":"user","content":[{"type":"input_text","text":`...)
		b = append(b, in...)
		b = append(b, `}]}`...)
	} else if len(in) > 0 && in[0] == '[' {
		b = append(b, bytes.TrimSuffix(in[1:], []byte("]"))...)
	}
	return append(b, `],"has_more":false}`+"\n"...)
}
