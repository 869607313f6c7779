package respcache

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
)

// The two OpenAI reply formats the conversions know.
const (
	objChat      = "chat.completion"
	objChatChunk = "chat.completion.chunk"
	objText      = "text_completion" // whole replies and chunks alike
)

var errConvert = errors.New("respcache: cannot convert the reply")

type toolFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type toolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function toolFunction `json:"function"`
}

type toolCallDelta struct {
	Index    int           `json:"index"`
	ID       string        `json:"id,omitempty"`
	Type     string        `json:"type,omitempty"`
	Function *toolFunction `json:"function,omitempty"`
}

type delta struct {
	Role      string          `json:"role,omitempty"`
	Content   *string         `json:"content,omitempty"`
	Refusal   *string         `json:"refusal,omitempty"`
	ToolCalls []toolCallDelta `json:"tool_calls,omitempty"`
}

type chunkChoice struct {
	Index        int             `json:"index"`
	Delta        *delta          `json:"delta,omitempty"` // chat
	Text         *string         `json:"text,omitempty"`  // completions
	Logprobs     json.RawMessage `json:"logprobs"`
	FinishReason *string         `json:"finish_reason"`
}

type chunk struct {
	ID                string          `json:"id"`
	Object            string          `json:"object"`
	Created           json.RawMessage `json:"created"`
	Model             string          `json:"model"`
	SystemFingerprint *string         `json:"system_fingerprint,omitempty"`
	Choices           []chunkChoice   `json:"choices"`
	Usage             json.RawMessage `json:"usage,omitempty"`
}

type message struct {
	Role      string     `json:"role"`
	Content   *string    `json:"content"`
	Refusal   *string    `json:"refusal,omitempty"`
	ToolCalls []toolCall `json:"tool_calls,omitempty"`
}

type wholeChoice struct {
	Index        int             `json:"index"`
	Message      *message        `json:"message,omitempty"` // chat
	Text         *string         `json:"text,omitempty"`    // completions
	Logprobs     json.RawMessage `json:"logprobs"`
	FinishReason *string         `json:"finish_reason"`
}

type whole struct {
	ID                string          `json:"id"`
	Object            string          `json:"object"`
	Created           json.RawMessage `json:"created"`
	Model             string          `json:"model"`
	SystemFingerprint *string         `json:"system_fingerprint,omitempty"`
	Choices           []wholeChoice   `json:"choices"`
	Usage             json.RawMessage `json:"usage,omitempty"`
}

// chatLogprobs and textLogprobs are the logprobs of a chat choice and of a
// completions choice; a stream's pieces are concatenated array by array.
type chatLogprobs struct {
	Content []json.RawMessage `json:"content"`
	Refusal []json.RawMessage `json:"refusal"`
}

type textLogprobs struct {
	Tokens        []json.RawMessage `json:"tokens"`
	TokenLogprobs []json.RawMessage `json:"token_logprobs"`
	TopLogprobs   []json.RawMessage `json:"top_logprobs"`
	TextOffset    []json.RawMessage `json:"text_offset"`
}

// isNull reports whether raw is absent or JSON null.
func isNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}

// assembly is one choice being assembled from a stream.
type assembly struct {
	index              int
	role               string
	text, refusal      []byte
	hasText, hasRefuse bool
	tools              map[int]*toolCall
	finish             *string
	logprobs           bool
	chatLP             chatLogprobs
	textLP             textLogprobs
}

// WholeFromEvents assembles the whole reply from a stream's events (the
// SSE data payloads without [DONE]): id, created, model and
// system_fingerprint from the chunks; per choice index the role, the
// content and the refusal concatenated, tool calls merged by their index
// (id, type and function name set once, arguments concatenated), the last
// non-null finish_reason, logprobs arrays concatenated; the usage of the
// last chunk that has one. A chunk without object, choices or usage (Azure
// OpenAI's prompt_filter_results chunk) is skipped. A chat message's content is null when it has no
// text but tool calls or a refusal. Events that are not chat.completion.chunk
// or text_completion objects (all of one kind) are an error.
func WholeFromEvents(events [][]byte) ([]byte, error) {
	if len(events) == 0 {
		return nil, fmt.Errorf("%w: no events", errConvert)
	}
	var out whole
	var kind string
	choices := map[int]*assembly{}
	for i, ev := range events {
		var c chunk
		if err := json.Unmarshal(ev, &c); err != nil {
			return nil, fmt.Errorf("%w: event %d: %v", errConvert, i, err)
		}
		if c.Object == "" && len(c.Choices) == 0 && isNull(c.Usage) {
			// Azure OpenAI's first chunk: prompt_filter_results only.
			continue
		}
		if c.Object != objChatChunk && c.Object != objText {
			return nil, fmt.Errorf("%w: event %d: object %q is not a chat.completion.chunk or text_completion", errConvert, i, c.Object)
		}
		if kind == "" {
			kind = c.Object
		} else if c.Object != kind {
			return nil, fmt.Errorf("%w: event %d: object %q in a stream of %q", errConvert, i, c.Object, kind)
		}
		if out.ID == "" {
			out.ID = c.ID
		}
		if isNull(out.Created) && !isNull(c.Created) {
			out.Created = c.Created
		}
		if out.Model == "" {
			out.Model = c.Model
		}
		if out.SystemFingerprint == nil && c.SystemFingerprint != nil {
			out.SystemFingerprint = c.SystemFingerprint
		}
		if !isNull(c.Usage) {
			out.Usage = c.Usage
		}
		for _, ch := range c.Choices {
			a := choices[ch.Index]
			if a == nil {
				a = &assembly{index: ch.Index}
				choices[ch.Index] = a
			}
			if ch.FinishReason != nil {
				a.finish = ch.FinishReason
			}
			if err := a.add(kind, &ch); err != nil {
				return nil, fmt.Errorf("%w: event %d: %v", errConvert, i, err)
			}
		}
	}
	if kind == "" {
		return nil, fmt.Errorf("%w: no chat.completion.chunk or text_completion event", errConvert)
	}
	if isNull(out.Created) {
		out.Created = json.RawMessage("0")
	}
	order := make([]int, 0, len(choices))
	for i := range choices {
		order = append(order, i)
	}
	slices.Sort(order)
	out.Choices = make([]wholeChoice, 0, len(order))
	for _, i := range order {
		c, err := choices[i].whole(kind)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", errConvert, err)
		}
		out.Choices = append(out.Choices, c)
	}
	if kind == objChatChunk {
		out.Object = objChat
	} else {
		out.Object = objText
	}
	return marshal(&out)
}

// marshal is json.Marshal without escaping <, > and & (a reply's text
// stays as the upstream wrote it) and without the trailing newline.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

func (a *assembly) add(kind string, ch *chunkChoice) error {
	if kind == objText {
		if ch.Text != nil {
			a.text = append(a.text, *ch.Text...)
			a.hasText = true
		}
		if !isNull(ch.Logprobs) {
			var lp textLogprobs
			if err := json.Unmarshal(ch.Logprobs, &lp); err != nil {
				return fmt.Errorf("logprobs: %v", err)
			}
			a.logprobs = true
			a.textLP.Tokens = append(a.textLP.Tokens, lp.Tokens...)
			a.textLP.TokenLogprobs = append(a.textLP.TokenLogprobs, lp.TokenLogprobs...)
			a.textLP.TopLogprobs = append(a.textLP.TopLogprobs, lp.TopLogprobs...)
			a.textLP.TextOffset = append(a.textLP.TextOffset, lp.TextOffset...)
		}
		return nil
	}
	if d := ch.Delta; d != nil {
		if d.Role != "" && a.role == "" {
			a.role = d.Role
		}
		if d.Content != nil {
			a.text = append(a.text, *d.Content...)
			a.hasText = true
		}
		if d.Refusal != nil {
			a.refusal = append(a.refusal, *d.Refusal...)
			a.hasRefuse = true
		}
		for _, tc := range d.ToolCalls {
			if a.tools == nil {
				a.tools = map[int]*toolCall{}
			}
			t := a.tools[tc.Index]
			if t == nil {
				t = &toolCall{}
				a.tools[tc.Index] = t
			}
			if t.ID == "" {
				t.ID = tc.ID
			}
			if t.Type == "" {
				t.Type = tc.Type
			}
			if tc.Function != nil {
				if t.Function.Name == "" {
					t.Function.Name = tc.Function.Name
				}
				t.Function.Arguments += tc.Function.Arguments
			}
		}
	}
	if !isNull(ch.Logprobs) {
		var lp chatLogprobs
		if err := json.Unmarshal(ch.Logprobs, &lp); err != nil {
			return fmt.Errorf("logprobs: %v", err)
		}
		a.logprobs = true
		a.chatLP.Content = append(a.chatLP.Content, lp.Content...)
		a.chatLP.Refusal = append(a.chatLP.Refusal, lp.Refusal...)
	}
	return nil
}

func (a *assembly) whole(kind string) (wholeChoice, error) {
	c := wholeChoice{Index: a.index, FinishReason: a.finish, Logprobs: json.RawMessage("null")}
	var err error
	if kind == objText {
		text := string(a.text)
		c.Text = &text
		// Logprobs with no entry at all carry nothing: null, as a
		// stream without them (a stream cannot carry an empty one).
		if lp := &a.textLP; a.logprobs && len(lp.Tokens)+len(lp.TokenLogprobs)+len(lp.TopLogprobs)+len(lp.TextOffset) > 0 {
			c.Logprobs, err = marshal(lp)
		}
		return c, err
	}
	m := &message{Role: a.role}
	if m.Role == "" {
		m.Role = "assistant"
	}
	if len(a.text) > 0 || (len(a.tools) == 0 && !a.hasRefuse) {
		text := string(a.text)
		m.Content = &text
	}
	if a.hasRefuse {
		r := string(a.refusal)
		m.Refusal = &r
	}
	if len(a.tools) > 0 {
		idx := make([]int, 0, len(a.tools))
		for i := range a.tools {
			idx = append(idx, i)
		}
		slices.Sort(idx)
		for _, i := range idx {
			m.ToolCalls = append(m.ToolCalls, *a.tools[i])
		}
	}
	c.Message = m
	if a.logprobs && len(a.chatLP.Content)+len(a.chatLP.Refusal) > 0 {
		c.Logprobs, err = marshal(&a.chatLP)
	}
	return c, err
}

// EventsFromWhole makes a stream of a whole chat.completion or
// text_completion: for each choice a first chunk with the role (and
// content "" for chat; text "" for completions), a chunk with the whole
// content (with the choice's logprobs) if any, a chunk with the refusal if
// any, a chunk with the tool calls (index, id, type, name, whole
// arguments) if any, and a chunk with the finish_reason and an empty
// delta; then, if the reply has usage, a usage-only chunk ("choices":[])
// (a reply with neither choices nor usage gives one chunk with no choices).
// Every chunk carries id, object, created, model and system_fingerprint
// when present.
func EventsFromWhole(body []byte) ([][]byte, error) {
	var w whole
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, fmt.Errorf("%w: %v", errConvert, err)
	}
	var kind string
	switch w.Object {
	case objChat:
		kind = objChatChunk
	case objText:
		kind = objText
	default:
		return nil, fmt.Errorf("%w: object %q is not a chat.completion or text_completion", errConvert, w.Object)
	}
	if isNull(w.Created) {
		w.Created = json.RawMessage("0")
	}
	var events [][]byte
	emit := func(choices []chunkChoice, usage json.RawMessage) error {
		if choices == nil {
			choices = []chunkChoice{}
		}
		b, err := marshal(&chunk{
			ID: w.ID, Object: kind, Created: w.Created, Model: w.Model,
			SystemFingerprint: w.SystemFingerprint, Choices: choices, Usage: usage,
		})
		events = append(events, b)
		return err
	}
	null := json.RawMessage("null")
	empty := ""
	for _, c := range w.Choices {
		one := func(ch chunkChoice) error {
			ch.Index = c.Index
			if ch.Logprobs == nil {
				ch.Logprobs = null
			}
			return emit([]chunkChoice{ch}, nil)
		}
		var err error
		if kind == objText {
			err = one(chunkChoice{Text: &empty})
			if err == nil && c.Text != nil && *c.Text != "" {
				err = one(chunkChoice{Text: c.Text, Logprobs: c.Logprobs})
			} else if err == nil && !isNull(c.Logprobs) {
				// Logprobs without text (a choice that generated none
				// but was scored): carried by an empty chunk of their own.
				err = one(chunkChoice{Text: &empty, Logprobs: c.Logprobs})
			}
			if err == nil {
				err = one(chunkChoice{Text: &empty, FinishReason: c.FinishReason})
			}
			if err != nil {
				return nil, err
			}
			continue
		}
		m := c.Message
		if m == nil {
			return nil, fmt.Errorf("%w: choice %d has no message", errConvert, c.Index)
		}
		role := m.Role
		if role == "" {
			role = "assistant"
		}
		err = one(chunkChoice{Delta: &delta{Role: role, Content: &empty}})
		if err == nil && m.Content != nil && *m.Content != "" {
			err = one(chunkChoice{Delta: &delta{Content: m.Content}, Logprobs: c.Logprobs})
		} else if err == nil && !isNull(c.Logprobs) {
			err = one(chunkChoice{Delta: &delta{}, Logprobs: c.Logprobs})
		}
		if err == nil && m.Refusal != nil {
			err = one(chunkChoice{Delta: &delta{Refusal: m.Refusal}})
		}
		if err == nil && len(m.ToolCalls) > 0 {
			tcs := make([]toolCallDelta, len(m.ToolCalls))
			for i, tc := range m.ToolCalls {
				f := tc.Function
				tcs[i] = toolCallDelta{Index: i, ID: tc.ID, Type: tc.Type, Function: &f}
			}
			err = one(chunkChoice{Delta: &delta{ToolCalls: tcs}})
		}
		if err == nil {
			err = one(chunkChoice{Delta: &delta{}, FinishReason: c.FinishReason})
		}
		if err != nil {
			return nil, err
		}
	}
	if !isNull(w.Usage) || len(events) == 0 {
		// The usage chunk; or, for a reply without choices or usage, one
		// chunk that still says what the stream is.
		if err := emit(nil, w.Usage); err != nil {
			return nil, err
		}
	}
	return events, nil
}
