package mockllm

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// The Bedrock mode: POST /model/{modelId}/converse and
// /model/{modelId}/converse-stream answer as Amazon Bedrock's Converse API
// does, so the gateway's Bedrock provider (and the AWS SDK's
// bedrockruntime client) can be tested against it.
//
// Every request must carry a Bedrock API key (Authorization: Bearer
// Config.APIKey, when that is set) or a SigV4 Authorization header whose credential
// scope names a region and the service "bedrock", and X-Amz-Date; with
// Config.AWSSecretKeys set, the access key must be one of them and the
// signature is recomputed over the request as received (method, escaped
// path, query, the signed headers, the body's SHA-256), so a request
// signed over anything else than what was sent is refused, as AWS refuses
// it. Errors are Bedrock's: {"message":...} with the exception's name in
// X-Amzn-Errortype.
//
// The reply is the same content as the chat routes' (Config.Text or
// generated tokens, cut as for chat, at most inferenceConfig.maxTokens
// pieces), with a toolUse block at ToolCallAt whose input streams as
// ToolCallArgs; usage is always reported. A stream is AWS event-stream
// framed (application/vnd.amazon.eventstream): messageStart, a
// contentBlockDelta per piece, contentBlockStart for the toolUse block,
// contentBlockStop per block, messageStop, metadata. TTFT, InterToken
// (before each contentBlockDelta after the first), FailStatus, FailDelay
// and CutAfter (messages) apply; GarbageAfter and Usage do not;
// HeaderBedrockException breaks a stream off with an exception, and
// HeaderBedrockErrorType names an injected failure's exception.

// HeaderBedrockException makes a ConverseStream reply break off with an
// exception message, as Bedrock does mid-stream: "NAME" sends the
// exception (e.g. throttlingException) after the first content delta,
// "NAME@N" after N messages. Its payload is {"message":"mock: NAME"}.
const HeaderBedrockException = "X-Mock-Bedrock-Exception"

// HeaderBedrockErrorType names the exception of a failure injected with
// HeaderFailStatus (e.g. ServiceQuotaExceededException with 400); by
// default the usual one for the status.
const HeaderBedrockErrorType = "X-Mock-Bedrock-Error-Type"

// bedrockExceptions names the exception Bedrock answers with for a status.
var bedrockExceptions = map[int]string{
	400: "ValidationException", 403: "AccessDeniedException", 404: "ResourceNotFoundException",
	408: "ModelTimeoutException", 424: "ModelErrorException", 429: "ThrottlingException",
	500: "InternalServerException", 503: "ServiceUnavailableException",
}

// writeBedrockError writes Bedrock's error reply for status; exception ""
// picks the usual one for the status.
func (s *Server) writeBedrockError(w http.ResponseWriter, status int, exception, msg string) {
	if exception == "" {
		if exception = bedrockExceptions[status]; exception == "" {
			exception = "ValidationException"
			if status >= 500 {
				exception = "InternalServerException"
			}
		}
	}
	w.Header().Set("X-Amzn-Errortype", exception+":http://internal.amazon.com/coral/com.amazon.bedrock/")
	w.Header().Set("X-Amzn-Requestid", "mock-request")
	s.writeJSON(w, status, append(appendString([]byte(`{"message":`), msg), "}\n"...))
}

// converseRequest is what the mock reads of a Converse request.
type converseRequest struct {
	Messages []struct {
		Role    string `json:"role"`
		Content []struct {
			Text       *string         `json:"text"`
			Image      json.RawMessage `json:"image"`
			ToolUse    json.RawMessage `json:"toolUse"`
			ToolResult json.RawMessage `json:"toolResult"`
		} `json:"content"`
	} `json:"messages"`
	System []struct {
		Text string `json:"text"`
	} `json:"system"`
	InferenceConfig *struct {
		MaxTokens *int `json:"maxTokens"`
	} `json:"inferenceConfig"`
	ToolConfig *struct {
		Tools []json.RawMessage `json:"tools"`
	} `json:"toolConfig"`
}

// serveBedrock serves the Converse routes (see the top of this file).
func (s *Server) serveBedrock(w http.ResponseWriter, r *http.Request, body []byte) {
	modelID, stream, ok := bedrockRoute(r)
	if !ok {
		s.writeBedrockError(w, http.StatusNotFound, "UnknownOperationException", "mock: no such Bedrock operation: "+r.URL.EscapedPath())
		return
	}
	if status, exception, msg := s.checkSigV4(r, body); status != 0 {
		s.writeBedrockError(w, status, exception, msg)
		return
	}
	p, err := s.params(r.Header)
	if err != nil {
		s.writeBedrockError(w, http.StatusBadRequest, "", err.Error())
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
		s.writeBedrockError(w, st, r.Header.Get(HeaderBedrockErrorType), "mock: injected failure with HTTP status "+itoa(st))
		return
	}
	var req converseRequest
	if err := json.Unmarshal(body, &req); err != nil {
		s.writeBedrockError(w, http.StatusBadRequest, "", "Malformed input request: "+err.Error())
		return
	}
	chars, msg := checkConverse(&req)
	if msg != "" {
		s.writeBedrockError(w, http.StatusBadRequest, "", msg)
		return
	}
	maxTokens := 1 << 30
	if req.InferenceConfig != nil && req.InferenceConfig.MaxTokens != nil {
		maxTokens = *req.InferenceConfig.MaxTokens
	}
	m := s.generateMessage(&anthropicRequest{Model: modelID, MaxTokens: &maxTokens}, max(1, chars/4), p)
	if !stream {
		if !p.wait.wait(p.ttft) {
			s.noticeClose(r)
			return
		}
		if p.cutAfter > 0 {
			panic(http.ErrAbortHandler)
		}
		s.writeJSON(w, http.StatusOK, m.converseBody())
		return
	}
	events := m.converseEvents()
	if ex := r.Header.Get(HeaderBedrockException); ex != "" {
		name, at, _ := strings.Cut(ex, "@")
		n, err := strconv.Atoi(at)
		if at == "" {
			n, err = 2, nil // messageStart and the first delta
		}
		if err != nil || n < 0 || name == "" {
			s.writeBedrockError(w, http.StatusBadRequest, "", "mock: "+HeaderBedrockException+" must be NAME or NAME@N")
			return
		}
		payload := appendString([]byte(`{"message":`), "mock: "+name)
		events = append(events[:min(n, len(events))], bedrockEvent{exception: name, payload: append(payload, '}')})
	}
	s.sendEventStream(w, r, events, p)
}

// bedrockRoute reads the model id and the operation from the path.
func bedrockRoute(r *http.Request) (modelID string, stream, ok bool) {
	if r.Method != http.MethodPost {
		return "", false, false
	}
	rest, ok := strings.CutPrefix(r.URL.EscapedPath(), "/model/")
	if !ok {
		return "", false, false
	}
	if id, found := strings.CutSuffix(rest, "/converse-stream"); found {
		rest, stream = id, true
	} else if rest, ok = strings.CutSuffix(rest, "/converse"); !ok {
		return "", false, false
	}
	id, err := url.PathUnescape(rest)
	if err != nil || id == "" || strings.Contains(rest, "/") {
		return "", false, false
	}
	return id, stream, true
}

// checkConverse validates what Bedrock validates of the conversation and
// returns the prompt's length in characters, or a ValidationException
// message.
func checkConverse(req *converseRequest) (chars int, msg string) {
	if len(req.Messages) == 0 {
		return 0, "A conversation must start with a user message. Try again with a conversation that starts with a user message."
	}
	tools := req.ToolConfig != nil && len(req.ToolConfig.Tools) > 0
	for i, m := range req.Messages {
		switch {
		case m.Role != "user" && m.Role != "assistant":
			return 0, "messages." + itoa(i) + ".role: must be user or assistant"
		case i == 0 && m.Role != "user":
			return 0, "A conversation must start with a user message. Try again with a conversation that starts with a user message."
		case i > 0 && req.Messages[i-1].Role == m.Role:
			return 0, "A conversation must alternate between user and assistant roles. Make sure the conversation alternates between user and assistant roles and try again."
		case len(m.Content) == 0:
			return 0, "The content field in the Message object at messages." + itoa(i) + " is empty. Add a ContentBlock object to the content field and try again."
		}
		for _, c := range m.Content {
			if c.Text != nil {
				if *c.Text == "" {
					return 0, "The text field in the ContentBlock object at messages." + itoa(i) + " is blank. Add text to the text field, and try again."
				}
				chars += len([]rune(*c.Text))
			}
			if (c.ToolUse != nil || c.ToolResult != nil) && !tools {
				return 0, "The toolConfig field must be defined when using toolUse and toolResult content blocks."
			}
		}
	}
	for _, sys := range req.System {
		chars += len([]rune(sys.Text))
	}
	return chars, ""
}

func (m *anthropicMessage) converseUsage(b []byte) []byte {
	k := &m.kinds
	out := m.outN + k.Reasoning
	b = append(b, `"usage":{"inputTokens":`...)
	b = append(b, itoa(m.input)...)
	b = append(b, `,"outputTokens":`...)
	b = append(b, itoa(out)...)
	b = append(b, `,"totalTokens":`...)
	b = append(b, itoa(m.input+k.CachedInput+k.CacheWrite+out)...)
	if k.CachedInput > 0 || k.CacheWrite > 0 {
		b = append(b, `,"cacheReadInputTokens":`...)
		b = append(b, itoa(k.CachedInput)...)
		b = append(b, `,"cacheWriteInputTokens":`...)
		b = append(b, itoa(k.CacheWrite)...)
	}
	return append(b, '}')
}

// toolInput is the tool call's input: its fragments joined, or {} when
// they do not make JSON.
func toolInput(bl anthropicBlock) []byte {
	input := []byte(strings.Join(bl.pieces, ""))
	if !json.Valid(input) {
		return []byte("{}")
	}
	return input
}

// converseBody is the non-streamed Converse reply.
func (m *anthropicMessage) converseBody() []byte {
	b := []byte(`{"output":{"message":{"role":"assistant","content":[`)
	n := 0
	for _, bl := range m.blocks {
		if !bl.tool && len(bl.pieces) == 0 {
			continue
		}
		if n++; n > 1 {
			b = append(b, ',')
		}
		if bl.tool {
			b = append(b, `{"toolUse":{"toolUseId":"`+mockBedrockToolID+`","name":"`+mockToolName+`","input":`...)
			b = append(append(b, toolInput(bl)...), "}}"...)
			continue
		}
		b = append(b, `{"text":"`...)
		for _, s := range bl.pieces {
			b = appendEscaped(b, s)
		}
		b = append(b, `"}`...)
	}
	b = append(b, `]}},"stopReason":"`...)
	b = append(b, m.stopReason...)
	b = append(b, `",`...)
	b = m.converseUsage(b)
	return append(b, `,"metrics":{"latencyMs":1}}`+"\n"...)
}

const mockBedrockToolID = "tooluse_mock"

// bedrockEvent is one ConverseStream event (or, with exception set, an
// exception message) before framing.
type bedrockEvent struct {
	typ       string
	payload   []byte
	exception string
}

// converseEvents is the streamed reply, event by event.
func (m *anthropicMessage) converseEvents() []bedrockEvent {
	out := []bedrockEvent{{typ: "messageStart", payload: []byte(`{"role":"assistant"}`)}}
	idx := 0
	for _, bl := range m.blocks {
		if !bl.tool && len(bl.pieces) == 0 {
			continue
		}
		i := itoa(idx)
		idx++
		if bl.tool {
			out = append(out, bedrockEvent{typ: "contentBlockStart", payload: []byte(`{"contentBlockIndex":` + i +
				`,"start":{"toolUse":{"toolUseId":"` + mockBedrockToolID + `","name":"` + mockToolName + `"}}}`)})
		}
		for _, piece := range bl.pieces {
			d := []byte(`{"contentBlockIndex":` + i + `,"delta":`)
			if bl.tool {
				d = append(appendString(append(d, `{"toolUse":{"input":`...), piece), "}}}"...)
			} else {
				d = append(appendString(append(d, `{"text":`...), piece), "}}"...)
			}
			out = append(out, bedrockEvent{typ: "contentBlockDelta", payload: d})
		}
		out = append(out, bedrockEvent{typ: "contentBlockStop", payload: []byte(`{"contentBlockIndex":` + i + `}`)})
	}
	out = append(out, bedrockEvent{typ: "messageStop", payload: []byte(`{"stopReason":"` + m.stopReason + `"}`)})
	meta := append(m.converseUsage([]byte{'{'}), `,"metrics":{"latencyMs":1}}`...)
	return append(out, bedrockEvent{typ: "metadata", payload: meta})
}

// sendEventStream streams events in AWS event-stream framing, flushing
// each: TTFT before the first, InterToken before each contentBlockDelta
// after the first; CutAfter closes the connection after that many.
func (s *Server) sendEventStream(w http.ResponseWriter, r *http.Request, events []bedrockEvent, p *params) {
	s.streams.Add(1)
	h := w.Header()
	h["Content-Type"] = []string{"application/vnd.amazon.eventstream"}
	h["X-Amzn-Requestid"] = []string{"mock-request"}
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	if rc.Flush() != nil || !p.wait.wait(p.ttft) {
		s.noticeClose(r)
		return
	}
	enc := eventstream.NewEncoder()
	var buf bytes.Buffer
	deltas := 0
	for i, e := range events {
		if e.typ == "contentBlockDelta" {
			if deltas > 0 && !p.wait.wait(p.interToken) {
				s.noticeClose(r)
				return
			}
			deltas++
		}
		buf.Reset()
		headers := eventstream.Headers{
			{Name: ":event-type", Value: eventstream.StringValue(e.typ)},
			{Name: ":content-type", Value: eventstream.StringValue("application/json")},
			{Name: ":message-type", Value: eventstream.StringValue("event")},
		}
		if e.exception != "" {
			headers[0] = eventstream.Header{Name: ":exception-type", Value: eventstream.StringValue(e.exception)}
			headers[2].Value = eventstream.StringValue("exception")
		}
		err := enc.Encode(&buf, eventstream.Message{Headers: headers, Payload: e.payload})
		if err != nil {
			panic(http.ErrAbortHandler)
		}
		if _, err := w.Write(buf.Bytes()); err != nil || rc.Flush() != nil {
			s.noticeClose(r)
			return
		}
		if p.cutAfter > 0 && i+1 >= p.cutAfter {
			panic(http.ErrAbortHandler)
		}
	}
	s.completed.Add(1)
}

// checkSigV4 checks the request's SigV4 signature (see the top of this
// file) and returns 0, or the status, exception and message to refuse it
// with.
func (s *Server) checkSigV4(r *http.Request, body []byte) (int, string, string) {
	auth := r.Header.Get("Authorization")
	if key, ok := strings.CutPrefix(auth, "Bearer "); ok && s.cfg.APIKey != "" {
		// A Bedrock API key, in place of a signature.
		if subtle.ConstantTimeCompare([]byte(key), []byte(s.cfg.APIKey)) != 1 {
			return http.StatusForbidden, "UnrecognizedClientException", "Invalid API Key format: Must start with pre-defined prefix"
		}
		return 0, "", ""
	}
	rest, ok := strings.CutPrefix(auth, "AWS4-HMAC-SHA256 ")
	if !ok {
		return http.StatusForbidden, "MissingAuthenticationTokenException", "Missing Authentication Token"
	}
	var cred, signed string
	for _, part := range strings.Split(rest, ", ") {
		k, v, _ := strings.Cut(part, "=")
		switch k {
		case "Credential":
			cred = v
		case "SignedHeaders":
			signed = v
		}
	}
	scope := strings.Split(cred, "/")
	date := r.Header.Get("X-Amz-Date")
	switch {
	case len(scope) != 5 || scope[0] == "" || scope[2] == "" || scope[4] != "aws4_request":
		return http.StatusForbidden, "IncompleteSignatureException", "Authorization header requires a valid Credential."
	case scope[3] != "bedrock":
		return http.StatusForbidden, "InvalidSignatureException", "Credential should be scoped to correct service: 'bedrock'."
	case len(date) != 16 || date[:8] != scope[1]:
		return http.StatusForbidden, "IncompleteSignatureException", "X-Amz-Date must be present and match the credential scope's date."
	case !strings.Contains(";"+signed+";", ";host;"):
		return http.StatusForbidden, "IncompleteSignatureException", "The host header must be signed."
	}
	if len(s.cfg.AWSSecretKeys) == 0 {
		return 0, "", ""
	}
	secret, ok := s.cfg.AWSSecretKeys[scope[0]]
	if !ok {
		return http.StatusForbidden, "UnrecognizedClientException", "The security token included in the request is invalid."
	}
	at, err := time.Parse("20060102T150405Z", date)
	if err != nil {
		return http.StatusForbidden, "IncompleteSignatureException", "X-Amz-Date is malformed."
	}
	if want := expectedAuthorization(r, body, signed, scope, secret, at); subtle.ConstantTimeCompare([]byte(want), []byte(auth)) != 1 {
		return http.StatusForbidden, "InvalidSignatureException",
			"The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method."
	}
	return 0, "", ""
}

// expectedAuthorization signs a copy of r carrying only the headers r's
// signature lists, as received, and returns its Authorization value.
func expectedAuthorization(r *http.Request, body []byte, signed string, scope []string, secret string, at time.Time) string {
	path, query, _ := strings.Cut(r.RequestURI, "?")
	cp := &http.Request{Method: r.Method, Host: r.Host, Header: http.Header{},
		URL: &url.URL{Scheme: "https", Host: r.Host, Opaque: "//" + r.Host + path, RawQuery: query}}
	for _, name := range strings.Split(signed, ";") {
		switch name {
		case "host":
		case "content-length":
			cp.ContentLength = r.ContentLength
		default:
			cp.Header[http.CanonicalHeaderKey(name)] = r.Header.Values(name)
		}
	}
	hash := r.Header.Get("X-Amz-Content-Sha256")
	if sum := sha256.Sum256(body); hash == "" || hash != "UNSIGNED-PAYLOAD" {
		hash = hex.EncodeToString(sum[:])
	}
	creds := aws.Credentials{AccessKeyID: scope[0], SecretAccessKey: secret, SessionToken: r.Header.Get("X-Amz-Security-Token")}
	err := v4.NewSigner().SignHTTP(context.Background(), creds, cp, hash, scope[3], scope[2], at)
	if err != nil {
		return ""
	}
	return cp.Header.Get("Authorization")
}
