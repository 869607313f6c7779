package bedrock

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"

	"github.com/tollgate/tollgate/gateway/internal/openai"
)

// FuzzParseMessage checks the decoder against the AWS SDK's: whatever
// ParseMessage accepts, the SDK decodes to the same payload and string
// headers; and the streaming Decoder, fed one byte at a time, returns the
// same messages ParseMessage finds one after another.
func FuzzParseMessage(f *testing.F) {
	f.Add(eventMessage(f, "contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"hi"}}`))
	f.Add(exceptionMessage(f, "throttlingException", `{"message":"slow down"}`))
	f.Add(stream(eventMessage(f, "messageStop", `{}`), eventMessage(f, "metadata", `{"usage":{}}`)))
	f.Add(frame([]byte{1, 'a', 7, 0, 3, 'x'}, []byte("{}")))
	f.Add(frame([]byte{1, 'a', 9}, nil))
	f.Fuzz(func(t *testing.T, in []byte) {
		var want []Message
		rest := in
		for {
			var m Message
			n, err := ParseMessage(rest, &m)
			if err != nil {
				break
			}
			checkAgainstSDK(t, rest[:n], &m)
			want = append(want, m)
			rest = rest[n:]
		}
		d := NewDecoder(iotest.OneByteReader(bytes.NewReader(in)), 1<<16)
		for i := range want {
			var m Message
			if err := d.Next(&m); err != nil {
				if errors.Is(err, ErrMessageTooLarge) && len(want[i].Payload) > 1<<15 {
					return
				}
				t.Fatalf("Decoder message %d: %v", i, err)
			}
			if fmt.Sprint(m) != fmt.Sprint(want[i]) {
				t.Fatalf("Decoder message %d = %q, ParseMessage's %q", i, m, want[i])
			}
		}
		var m Message
		err := d.Next(&m)
		switch {
		case len(rest) == 0 && err != io.EOF:
			t.Fatalf("after %d messages: %v, want io.EOF", len(want), err)
		case len(rest) > 0 && err == nil:
			t.Fatalf("Decoder accepted a message ParseMessage refused: %q", rest)
		}
	})
}

func checkAgainstSDK(t *testing.T, raw []byte, m *Message) {
	t.Helper()
	sm, err := eventstream.NewDecoder().Decode(bytes.NewReader(raw), nil)
	if err != nil {
		t.Fatalf("accepted a message the SDK refuses (%v): %q", err, raw)
	}
	if !bytes.Equal(sm.Payload, m.Payload) {
		t.Fatalf("payload %q, SDK's %q", m.Payload, sm.Payload)
	}
	for name, got := range map[string][]byte{":message-type": m.MessageType, ":event-type": m.EventType,
		":exception-type": m.ExceptionType, ":error-code": m.ErrorCode, ":error-message": m.ErrorMessage, ":content-type": m.ContentType} {
		v := sm.Headers.Get(name)
		want := ""
		if s, ok := v.(eventstream.StringValue); ok {
			want = string(s)
		}
		if string(got) != want {
			t.Fatalf("%s = %q, SDK's %q", name, got, want)
		}
	}
}

// FuzzEncodedMessage frames arbitrary headers and payloads with the SDK's
// encoder; the decoder must read them back exactly.
func FuzzEncodedMessage(f *testing.F) {
	f.Add("contentBlockDelta", "event", "x-custom", int64(7), []byte(`{"a":1}`))
	f.Add("", "exception", "", int64(-1), []byte{})
	f.Fuzz(func(t *testing.T, eventType, messageType, extra string, n int64, payload []byte) {
		if len(eventType) > 1<<15-1 || len(messageType) > 1<<15-1 || len(extra) == 0 || len(extra) > 255 || strings.HasPrefix(extra, ":") {
			return
		}
		var b bytes.Buffer
		err := eventstream.NewEncoder().Encode(&b, eventstream.Message{Headers: eventstream.Headers{
			{Name: extra, Value: eventstream.Int64Value(n)},
			{Name: ":event-type", Value: eventstream.StringValue(eventType)},
			{Name: extra + "s", Value: eventstream.BytesValue(payload[:min(len(payload), 100)])},
			{Name: ":message-type", Value: eventstream.StringValue(messageType)},
		}, Payload: payload})
		if err != nil {
			return
		}
		var m Message
		got, err := ParseMessage(b.Bytes(), &m)
		if err != nil || got != b.Len() {
			t.Fatalf("ParseMessage = %d, %v; want %d", got, err, b.Len())
		}
		if string(m.EventType) != eventType || string(m.MessageType) != messageType || !bytes.Equal(m.Payload, payload) {
			t.Fatalf("got %q %q %q", m.EventType, m.MessageType, m.Payload)
		}
	})
}

// converseRequest is the subset of a Converse request the checks read,
// decoded strictly so an unknown member is an error.
type converseRequest struct {
	Messages []struct {
		Role    string            `json:"role"`
		Content []json.RawMessage `json:"content"`
	} `json:"messages"`
	System          []struct{ Text string } `json:"system"`
	InferenceConfig *struct {
		MaxTokens     *int     `json:"maxTokens"`
		Temperature   *float64 `json:"temperature"`
		TopP          *float64 `json:"topP"`
		StopSequences []string `json:"stopSequences"`
	} `json:"inferenceConfig"`
	ToolConfig *struct {
		Tools      []json.RawMessage `json:"tools"`
		ToolChoice json.RawMessage   `json:"toolChoice"`
	} `json:"toolConfig"`
	OutputConfig *struct {
		TextFormat struct {
			Type      string `json:"type"`
			Structure struct {
				JSONSchema struct {
					Schema      string `json:"schema"`
					Name        string `json:"name"`
					Description string `json:"description"`
				} `json:"jsonSchema"`
			} `json:"structure"`
		} `json:"textFormat"`
	} `json:"outputConfig"`
	ServiceTier *struct {
		Type string `json:"type"`
	} `json:"serviceTier"`
}

// FuzzAppendRequest checks that AppendRequest never panics, that a refusal
// is a 400 *openai.Error that leaves dst alone, and that what it accepts
// is a Converse request that keeps the API's rules: alternating non-empty
// turns, one member per content block, tools whenever tool blocks occur.
func FuzzAppendRequest(f *testing.F) {
	for _, tc := range requestTests {
		f.Add([]byte(tc.in))
	}
	for _, tc := range requestErrorTests {
		f.Add([]byte(tc.in))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		orig := bytes.Clone(body)
		out, err := AppendRequest([]byte("dst"), body)
		if !bytes.Equal(body, orig) {
			t.Fatal("AppendRequest modified its input")
		}
		if err != nil {
			var e *openai.Error
			if !errors.As(err, &e) || e.Status != 400 || e.Type != openai.TypeInvalidRequest || e.Message == "" || string(out) != "dst" {
				t.Fatalf("error %#v (dst %q) is not a 400 *openai.Error leaving dst alone", err, out)
			}
			return
		}
		got, _ := bytes.CutPrefix(out, []byte("dst"))
		if err := checkConverseRequest(got); err != nil {
			t.Fatalf("%v\nin:  %q\nout: %s", err, body, got)
		}
	})
}

func checkConverseRequest(body []byte) error {
	var r converseRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return err
	}
	if len(r.Messages) == 0 {
		return errors.New("no messages")
	}
	tools := false
	for i, m := range r.Messages {
		if m.Role != "user" && m.Role != "assistant" || i > 0 && r.Messages[i-1].Role == m.Role || len(m.Content) == 0 {
			return fmt.Errorf("messages[%d]: role %q after %d turns, %d blocks", i, m.Role, i, len(m.Content))
		}
		for j, c := range m.Content {
			var blk map[string]json.RawMessage
			if err := json.Unmarshal(c, &blk); err != nil || len(blk) != 1 {
				return fmt.Errorf("messages[%d].content[%d] is not a one-member block: %s", i, j, c)
			}
			_, tu := blk["toolUse"]
			_, tr := blk["toolResult"]
			tools = tools || tu || tr
			if string(blk["text"]) == `""` {
				return fmt.Errorf("messages[%d].content[%d] is an empty text block", i, j)
			}
		}
	}
	if tools && (r.ToolConfig == nil || len(r.ToolConfig.Tools) == 0) {
		return errors.New("tool blocks without toolConfig")
	}
	if o := r.OutputConfig; o != nil && !json.Valid([]byte(o.TextFormat.Structure.JSONSchema.Schema)) {
		return fmt.Errorf("outputConfig schema %q is not JSON", o.TextFormat.Structure.JSONSchema.Schema)
	}
	return nil
}

// FuzzAppendResponse checks that any reply becomes valid JSON or a 502.
func FuzzAppendResponse(f *testing.F) {
	for _, tc := range responseTests {
		f.Add([]byte(tc.in))
	}
	f.Add([]byte(`{"output":{"message":{"content":[{"toolUse":{"input":null}}]}}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		out, err := AppendResponse([]byte("dst"), body, "m\xff", "id", 1)
		if err != nil {
			var e *openai.Error
			if !errors.As(err, &e) || e.Status != 502 || string(out) != "dst" {
				t.Fatalf("error %#v (dst %q)", err, out)
			}
			return
		}
		var c struct {
			Choices []struct {
				Message struct {
					ToolCalls []struct {
						Function struct{ Arguments string } `json:"function"`
					} `json:"tool_calls"`
				} `json:"message"`
			} `json:"choices"`
		}
		got, _ := bytes.CutPrefix(out, []byte("dst"))
		if err := json.Unmarshal(got, &c); err != nil || len(c.Choices) != 1 {
			t.Fatalf("invalid completion (%v): %s", err, got)
		}
		for _, tc := range c.Choices[0].Message.ToolCalls {
			if !json.Valid([]byte(tc.Function.Arguments)) {
				t.Fatalf("arguments %q are not JSON", tc.Function.Arguments)
			}
		}
	})
}

// FuzzStreamReader frames random events (one per input line: the event
// type, a space, the payload; "!" before the type makes an exception) and
// checks that the output is well-formed SSE of JSON chunks ending in
// [DONE] or an error event, or that the reader reports an error.
func FuzzStreamReader(f *testing.F) {
	f.Add("messageStart {\"role\":\"assistant\"}\ncontentBlockDelta {\"contentBlockIndex\":0,\"delta\":{\"text\":\"hi\"}}\nmessageStop {\"stopReason\":\"end_turn\"}\nmetadata {\"usage\":{\"inputTokens\":1}}", true)
	f.Add("contentBlockStart {\"contentBlockIndex\":3,\"start\":{\"toolUse\":{\"toolUseId\":\"a\",\"name\":\"b\"}}}\ncontentBlockDelta {\"contentBlockIndex\":3,\"delta\":{\"toolUse\":{\"input\":\"{\\\"\"}}}\n!throttlingException {\"message\":\"x\"}", false)
	f.Add("messageStop {}\nmetadata []", true)
	f.Fuzz(func(t *testing.T, events string, includeUsage bool) {
		var msgs [][]byte
		for _, line := range strings.Split(events, "\n") {
			typ, payload, _ := strings.Cut(line, " ")
			if name, ok := strings.CutPrefix(typ, "!"); ok {
				msgs = append(msgs, exceptionMessage(t, name, payload))
			} else {
				msgs = append(msgs, eventMessage(t, typ, payload))
			}
		}
		out, err := readAll(t, iotest.HalfReader(bytes.NewReader(stream(msgs...))), includeUsage)
		if err == nil && !strings.HasSuffix(out, "data: [DONE]\n\n") && !strings.Contains(out, `data: {"error":`) {
			t.Fatalf("clean end without [DONE] or an error: %q", out)
		}
		for ev := range strings.SplitSeq(strings.TrimSuffix(out, "\n\n"), "\n\n") {
			if ev == "" && out == "" {
				continue
			}
			data, ok := strings.CutPrefix(ev, "data: ")
			if !ok || strings.Contains(data, "\n") || data != "[DONE]" && !json.Valid([]byte(data)) {
				t.Fatalf("bad event %q in %q", ev, out)
			}
		}
	})
}

// FuzzTranslateError checks that any error reply becomes an OpenAI error
// with an error status and a message.
func FuzzTranslateError(f *testing.F) {
	f.Add(429, []byte("ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/"), []byte(`{"message":"slow down"}`))
	f.Add(0, []byte("modelStreamErrorException"), []byte(`{"message":"x","originalStatusCode":500}`))
	f.Add(403, []byte(nil), []byte(`{"__type":"a#UnrecognizedClientException","Message":"bad"}`))
	f.Fuzz(func(t *testing.T, status int, errType, body []byte) {
		e := TranslateError(status, errType, body)
		if e.Status < 400 || e.Status > 599 || e.Type == "" || e.Message == "" {
			t.Fatalf("TranslateError(%d, %q, %q) = %+v", status, errType, body, e)
		}
		if !json.Valid(e.AppendJSON(nil)) {
			t.Fatalf("invalid error body for %+v", e)
		}
	})
}
