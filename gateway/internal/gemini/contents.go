package gemini

import (
	"bytes"
	"fmt"
	"path"
	"strings"

	"github.com/valyala/fastjson"

	"github.com/tollgate/tollgate/gateway/internal/openai"
)

// Roles of Gemini turns.
const (
	roleUser  = "user"
	roleModel = "model"
)

// skipSignature is the thoughtSignature Google documents for function
// calls that did not come from the model with a signature (a history
// rewritten or carried over from another API): Gemini 3 models refuse a
// replayed functionCall part without one, and the OpenAI surface has no
// place to keep the real signature.
const skipSignature = "skip_thought_signature_validator"

// messages writes "contents" (the turns, consecutive turns of one role
// merged) and "systemInstruction" (system and developer messages).
func (w *requestWriter) messages(v *fastjson.Value) error {
	if isNull(v) {
		return openai.BadRequest("messages", "'messages' is a required property")
	}
	msgs, err := v.Array()
	if err != nil {
		return openai.BadRequest("messages", "'messages' must be an array")
	}
	if len(msgs) == 0 {
		return openai.BadRequest("messages", "'messages' must be a non-empty array")
	}
	roles := w.roles[:0]
	for i, m := range msgs {
		role, err := messageRole(m, i)
		if err != nil {
			return err
		}
		roles = append(roles, role)
	}
	w.roles = roles
	if w.calls == nil {
		w.calls = make(map[string]toolCall)
	}
	w.out = append(w.out, `"contents":[`...)
	for i, m := range msgs {
		if roles[i] != "tool" {
			w.commitResponses() // a run of tool messages has ended
		}
		switch roles[i] {
		case "user":
			err = w.userMessage(m, i)
		case "assistant":
			err = w.assistantMessage(m, i)
		case "tool":
			err = w.toolMessage(m, i)
		}
		if err != nil {
			return err
		}
	}
	w.commitResponses()
	w.flush()
	if w.turns == 0 {
		return openai.BadRequest("messages", "'messages' must contain at least one user, assistant or tool message with content")
	}
	w.out = append(w.out, ']')
	return w.system(msgs, roles)
}

// messageRoles are the OpenAI message roles the translation takes.
var messageRoles = [...]string{"system", "developer", "user", "assistant", "tool"}

// messageRole returns messages[i].role, checked.
func messageRole(m *fastjson.Value, i int) (string, error) {
	if m.Type() != fastjson.TypeObject {
		return "", openai.BadRequest(fmt.Sprintf("messages[%d]", i), "'messages[%d]' must be an object", i)
	}
	role, ok := stringOf(m.Get("role"))
	if !ok {
		return "", openai.BadRequest(fmt.Sprintf("messages[%d].role", i), "'messages[%d].role' is a required property and must be a string", i)
	}
	for _, r := range messageRoles {
		if string(role) == r {
			return r, nil // the constant: string(role) would allocate
		}
	}
	if string(role) == "function" {
		return "", openai.BadRequest(fmt.Sprintf("messages[%d].role", i),
			"'messages[%d].role': role \"function\" is deprecated and not supported for Gemini models; use tool calls and role \"tool\"", i)
	}
	return "", openai.BadRequest(fmt.Sprintf("messages[%d].role", i),
		"'messages[%d].role' must be one of \"system\", \"developer\", \"user\", \"assistant\", \"tool\"; got %q", i, role)
}

// system writes the text of every system and developer message, wherever
// it stands, as the parts of systemInstruction: Gemini has one system
// instruction, before the conversation.
func (w *requestWriter) system(msgs []*fastjson.Value, roles []string) error {
	n := 0
	add := func(s []byte) {
		if len(s) == 0 {
			return
		}
		if n == 0 {
			w.out = append(w.out, `,"systemInstruction":{"parts":[`...)
		} else {
			w.out = append(w.out, ',')
		}
		w.out = append(w.out, `{"text":`...)
		w.out = openai.AppendJSONString(w.out, s)
		w.out = append(w.out, '}')
		n++
	}
	for i, m := range msgs {
		if roles[i] != "system" && roles[i] != "developer" {
			continue
		}
		if err := eachText(m.Get("content"), i, "system messages may contain only text parts", add); err != nil {
			return err
		}
	}
	if n > 0 {
		w.out = append(w.out, "]}"...)
	}
	return nil
}

// eachText calls add with the text of content (a string, or an array of
// text parts); notText explains which parts are allowed.
func eachText(c *fastjson.Value, i int, notText string, add func([]byte)) error {
	if s, ok := stringOf(c); ok {
		add(s)
		return nil
	}
	if isNull(c) {
		return nil
	}
	parts, err := c.Array()
	if err != nil {
		return openai.BadRequest(fmt.Sprintf("messages[%d].content", i), "'messages[%d].content' must be a string or an array of text parts", i)
	}
	for j, part := range parts {
		text, err := textPart(part, i, j, notText)
		if err != nil {
			return err
		}
		add(text)
	}
	return nil
}

// textPart returns the text of a {"type":"text"} part, or an error saying
// why part is not one.
func textPart(part *fastjson.Value, i, j int, notText string) ([]byte, error) {
	at := fmt.Sprintf("messages[%d].content[%d]", i, j)
	if part.Type() != fastjson.TypeObject {
		return nil, openai.BadRequest(at, "'%s' must be an object", at)
	}
	typ, _ := stringOf(part.Get("type"))
	if string(typ) != "text" {
		return nil, openai.BadRequest(at+".type", "'%s.type' is %q: %s", at, typ, notText)
	}
	text, ok := stringOf(part.Get("text"))
	if !ok {
		return nil, openai.BadRequest(at+".text", "'%s.text' must be a string", at)
	}
	return text, nil
}

// userMessage adds the parts of a user message to the user turn.
func (w *requestWriter) userMessage(m *fastjson.Value, i int) error {
	c := m.Get("content")
	if isNull(c) {
		return nil
	}
	if s, ok := stringOf(c); ok {
		w.textPart(roleUser, s)
		return nil
	}
	parts, err := c.Array()
	if err != nil {
		return openai.BadRequest(fmt.Sprintf("messages[%d].content", i), "'messages[%d].content' must be a string, an array of content parts, or null", i)
	}
	for j, part := range parts {
		at := fmt.Sprintf("messages[%d].content[%d]", i, j)
		if part.Type() != fastjson.TypeObject {
			return openai.BadRequest(at, "'%s' must be an object", at)
		}
		typ, _ := stringOf(part.Get("type"))
		switch string(typ) {
		case "text":
			text, err := textPart(part, i, j, "")
			if err != nil {
				return err
			}
			w.textPart(roleUser, text)
		case "image_url":
			err = w.imagePart(part.Get("image_url"), at+".image_url")
		case "input_audio":
			err = w.audioPart(part.Get("input_audio"), at+".input_audio")
		case "file":
			err = w.filePart(part.Get("file"), at+".file")
		default:
			return openai.BadRequest(at+".type", "'%s.type' is %q: user messages to Gemini models may contain \"text\", \"image_url\", \"input_audio\" and \"file\" parts", at, typ)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// textPart adds a text part to the turn of role; empty text is dropped
// (Gemini rejects empty parts).
func (w *requestWriter) textPart(role string, text []byte) {
	if len(text) == 0 {
		return
	}
	w.part = append(w.part[:0], `{"text":`...)
	w.part = openai.AppendJSONString(w.part, text)
	w.part = append(w.part, '}')
	w.commit(role)
}

// inlinePart adds an inlineData part.
func (w *requestWriter) inlinePart(mimeType string, data []byte) {
	w.part = append(w.part[:0], `{"inlineData":{"mimeType":`...)
	w.part = openai.AppendJSONString(w.part, mimeType)
	w.part = append(w.part, `,"data":`...)
	w.part = openai.AppendJSONString(w.part, data)
	w.part = append(w.part, "}}"...)
	w.commit(roleUser)
}

// imageTypes maps image file extensions to the media types Gemini reads,
// for image URLs passed by reference (fileData needs a mimeType).
var imageTypes = map[string]string{
	".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg",
	".webp": "image/webp", ".heic": "image/heic", ".heif": "image/heif", ".gif": "image/gif",
}

// imagePart adds an image_url part's value ({"url":...,"detail":...} or,
// leniently, the URL string): a base64 data URL becomes inlineData; an
// http(s) or gs:// URL whose path names an image file becomes fileData.
func (w *requestWriter) imagePart(v *fastjson.Value, at string) error {
	url, ok := stringOf(v)
	if !ok {
		if url, ok = stringOf(v.Get("url")); !ok {
			return openai.BadRequest(at+".url", "'%s.url' is a required property and must be a string", at)
		}
		at += ".url"
	}
	if hasPrefixFold(url, "data:") {
		mediaType, data, err := dataURL(url, at)
		if err != nil {
			return err
		}
		if !strings.HasPrefix(mediaType, "image/") {
			return openai.BadRequest(at, "'%s' has media type %q, not an image", at, mediaType)
		}
		w.inlinePart(mediaType, data)
		return nil
	}
	if !hasPrefixFold(url, "https://") && !hasPrefixFold(url, "http://") && !hasPrefixFold(url, "gs://") {
		return openai.BadRequest(at, "'%s' must be an http(s) or gs:// URL or a base64 data URL", at)
	}
	u := string(url)
	if q := strings.IndexAny(u, "?#"); q >= 0 {
		u = u[:q]
	}
	mediaType, ok := imageTypes[strings.ToLower(path.Ext(u))]
	if !ok {
		return openai.BadRequest(at, "'%s': Gemini needs the media type of an image passed by URL, and the URL's path does not end in .png, .jpg, .jpeg, .webp, .heic, .heif or .gif; send a base64 data URL instead", at)
	}
	w.part = append(w.part[:0], `{"fileData":{"mimeType":"`...)
	w.part = append(w.part, mediaType...)
	w.part = append(w.part, `","fileUri":`...)
	w.part = openai.AppendJSONString(w.part, url)
	w.part = append(w.part, "}}"...)
	w.commit(roleUser)
	return nil
}

// audioPart adds an input_audio part ({"data": base64, "format": "wav"|"mp3"}).
func (w *requestWriter) audioPart(v *fastjson.Value, at string) error {
	data, ok := stringOf(v.Get("data"))
	if !ok || len(data) == 0 {
		return openai.BadRequest(at+".data", "'%s.data' is a required property and must be a non-empty base64 string", at)
	}
	format, _ := stringOf(v.Get("format"))
	switch string(format) {
	case "wav":
		w.inlinePart("audio/wav", data)
	case "mp3":
		w.inlinePart("audio/mp3", data)
	default:
		return openai.BadRequest(at+".format", "'%s.format' must be \"wav\" or \"mp3\"", at)
	}
	return nil
}

// filePart adds a file part carrying its data ({"file_data": data URL});
// uploaded files (file_id) live at OpenAI and cannot be sent to Gemini.
func (w *requestWriter) filePart(v *fastjson.Value, at string) error {
	url, ok := stringOf(v.Get("file_data"))
	if !ok || !hasPrefixFold(url, "data:") {
		return openai.BadRequest(at+".file_data", "'%s.file_data' must be a base64 data URL: Gemini models cannot read files uploaded by id", at)
	}
	mediaType, data, err := dataURL(url, at+".file_data")
	if err != nil {
		return err
	}
	w.inlinePart(mediaType, data)
	return nil
}

// dataURL splits a base64 data URL into its media type (lower case) and
// data.
func dataURL(url []byte, at string) (string, []byte, error) {
	comma := bytes.IndexByte(url, ',')
	if comma < 0 {
		return "", nil, openai.BadRequest(at, "'%s' is a data URL without a comma", at)
	}
	params := strings.Split(string(url[len("data:"):comma]), ";")
	mediaType := strings.ToLower(strings.TrimSpace(params[0]))
	base64 := false
	for _, p := range params[1:] {
		base64 = base64 || strings.EqualFold(strings.TrimSpace(p), "base64")
	}
	if !base64 || mediaType == "" {
		return "", nil, openai.BadRequest(at, "'%s' must be a base64 data URL with a media type (data:image/png;base64,...)", at)
	}
	return mediaType, url[comma+1:], nil
}

func hasPrefixFold(b []byte, prefix string) bool {
	return len(b) >= len(prefix) && strings.EqualFold(string(b[:len(prefix)]), prefix)
}
