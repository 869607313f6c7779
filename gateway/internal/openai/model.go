package openai

// AppendWithModel appends to dst a copy of body whose top-level "model"
// member is the JSON string model, and returns the extended slice. The
// gateway sends a request to a fallback model this way.
//
// body must be a JSON object RequestParser.Parse accepted. Like
// AppendWithIncludeUsage it makes one structural pass over the top-level
// members and copies every other byte verbatim; every "model" member is
// rewritten (also when its key is written with \u escapes), so whichever
// duplicate a decoder picks it reads model, and the member is added when
// absent. On malformed input it returns dst unchanged and ErrNotObject. It
// does not allocate unless dst must grow.
func AppendWithModel(dst, body []byte, model string) ([]byte, error) {
	start := skipSpace(body, 0)
	end := len(body)
	for end > start && isSpace(body[end-1]) {
		end--
	}
	if end-start < 2 || body[start] != '{' || body[end-1] != '}' {
		return dst, ErrNotObject
	}
	out := append(dst, body[:start]...)
	obj := body[start:end]
	i := skipSpace(obj, 1)
	if i >= len(obj) {
		return dst, ErrNotObject
	}
	copied, found := 0, false
	for more := obj[i] != '}'; more; {
		keyEnd, vs, ve, ok := member(obj, i)
		if !ok {
			return dst, ErrNotObject
		}
		if keyEquals(obj[i+1:keyEnd-1], "model") {
			found = true
			out = append(out, obj[copied:vs]...)
			out = AppendJSONString(out, model)
			copied = ve
		}
		if i, more, ok = afterMember(obj, ve); !ok {
			return dst, ErrNotObject
		}
	}
	if i != len(obj)-1 {
		return dst, ErrNotObject
	}
	if !found {
		out = append(out, obj[:i]...)
		if skipSpace(obj, 1) != i { // not empty
			out = append(out, ',')
		}
		out = append(out, `"model":`...)
		out = AppendJSONString(out, model)
		out = append(out, obj[i:]...)
	} else {
		out = append(out, obj[copied:]...)
	}
	return append(out, body[end:]...), nil
}
