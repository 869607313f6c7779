package hostsvc

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"unicode/utf8"

	"github.com/valyala/fastjson"

	"github.com/tollgate/tollgate/sdk/wasmhost"
)

// DefaultEndUserHeader is the header naming a request's end user when
// Config.EndUserHeader is empty.
const DefaultEndUserHeader = "X-Tollgate-End-User"

// maxEndUser is the longest end-user id kept as sent; a longer one (or
// one that is not UTF-8 text without NUL) is replaced by "sha256:" and its
// hash in hex, so distinct ids stay distinct and the call log can store
// every one.
const maxEndUser = 128

var bodyParsers fastjson.ParserPool

// endUserOf returns the end user r names: the header's value, else the
// JSON body's top-level "user", else its "safety_identifier" (OpenAI's
// names for it); "" for none. The body is parsed only when one of those
// names appears in it followed by a colon, as a key does ("role": "user"
// in every chat request is not one); a key spelled with escapes is not
// seen.
func endUserOf(r *wasmhost.Request, header []byte) string {
	if r.ClientHeader != nil {
		if v := bytes.TrimSpace(r.ClientHeader.PeekBytes(header)); len(v) > 0 {
			return endUserID(v)
		}
	}
	body := r.Body
	if !hasKey(body, `"user"`) && !hasKey(body, `"safety_identifier"`) {
		return ""
	}
	p := bodyParsers.Get()
	defer bodyParsers.Put(p)
	v, err := p.ParseBytes(body)
	if err != nil || v.Type() != fastjson.TypeObject {
		return ""
	}
	for _, name := range [...]string{"user", "safety_identifier"} {
		if f := v.Get(name); f != nil && f.Type() == fastjson.TypeString {
			if s := f.GetStringBytes(); len(s) > 0 {
				return endUserID(s)
			}
		}
	}
	return ""
}

// hasKey reports whether quoted (a name in quotes) occurs in body followed
// by optional JSON whitespace and a colon: where it might be a key, at any
// depth.
func hasKey(body []byte, quoted string) bool {
	for {
		i := bytes.Index(body, []byte(quoted))
		if i < 0 {
			return false
		}
		body = body[i+len(quoted):]
		rest := bytes.TrimLeft(body, " \t\r\n")
		if len(rest) > 0 && rest[0] == ':' {
			return true
		}
	}
}

// endUserID copies v, or its hash when it is too long or not text.
func endUserID(v []byte) string {
	if len(v) <= maxEndUser && utf8.Valid(v) && bytes.IndexByte(v, 0) < 0 {
		return string(v)
	}
	sum := sha256.Sum256(v)
	return "sha256:" + hex.EncodeToString(sum[:])
}
