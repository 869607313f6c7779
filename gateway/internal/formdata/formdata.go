// Package formdata reads a multipart/form-data request body (RFC 7578) in
// place: the gateway routes an upload (an image edit, an audio file for
// transcription, a file for the Files API) by the form's `model` field,
// and the body is already in memory, bounded by the server's max body
// size. Parts borrows its values from that body: nothing is copied, and
// the body is not buffered a second time.
//
// The reader is strict where readers disagree, because the gateway and the
// upstream must read the same model: the body must start with its
// boundary (no preamble), every line of the framing ends in CRLF, part
// headers are not folded and name no header twice, a part's
// Content-Disposition is read by mime.ParseMediaType as Go's
// mime/multipart reads it, and the model field is named once. What it
// accepts, Go's mime/multipart reads the same (FuzzParts holds it to that).
package formdata

import (
	"bytes"
	"errors"
	"fmt"
	"mime"
	"strings"
)

// ErrMalformed is the error of a body or Content-Type that is not a form
// this package reads. Use errors.Is; the message says what is wrong.
var ErrMalformed = errors.New("malformed multipart/form-data body")

// MaxParts bounds the parts of one form: a request names a model, a file
// and a handful of parameters.
const MaxParts = 256

// maxBoundary is RFC 2046's limit on a boundary's length.
const maxBoundary = 70

// Part is one field of a form. Value borrows from the body given to
// Parts and is valid as long as it is.
type Part struct {
	Name     string // the Content-Disposition's name parameter
	FileName string // its filename parameter ("" for a plain field)
	// HasFile: the part has a filename parameter (possibly empty).
	HasFile bool
	// Encoded: the part has a Content-Transfer-Encoding other than
	// 7bit, 8bit or binary, so Value is not what a reader decodes.
	Encoded bool
	Value   []byte
	// Offset is where Value starts in the body: a field can be replaced
	// by splicing (body[:Offset], new value, body[Offset+len(Value):]).
	Offset int
}

// Boundary returns the boundary of a multipart/form-data Content-Type
// header value.
func Boundary(contentType []byte) ([]byte, error) {
	mt, params, err := mime.ParseMediaType(string(contentType))
	if err != nil {
		return nil, fmt.Errorf("%w: Content-Type: %w", ErrMalformed, err)
	}
	if mt != "multipart/form-data" {
		return nil, fmt.Errorf("%w: Content-Type is %q, not multipart/form-data", ErrMalformed, mt)
	}
	b := params["boundary"]
	if b == "" || len(b) > maxBoundary || strings.ContainsAny(b, "\r\n") {
		return nil, fmt.Errorf("%w: Content-Type has no valid boundary (1 to %d characters)", ErrMalformed, maxBoundary)
	}
	return []byte(b), nil
}

// Parts checks body as a form with the given boundary and appends its
// parts to dst, in order.
func Parts(dst []Part, body, boundary []byte) ([]Part, error) {
	if len(boundary) == 0 || len(boundary) > maxBoundary {
		return dst, fmt.Errorf("%w: invalid boundary", ErrMalformed)
	}
	// delim is the line that separates parts: CRLF "--" boundary. The
	// first has no CRLF before it: the body starts with it.
	delim := make([]byte, 0, 4+len(boundary))
	delim = append(append(delim, "\r\n--"...), boundary...)
	if !bytes.HasPrefix(body, delim[2:]) {
		return dst, fmt.Errorf("%w: the body does not start with --boundary", ErrMalformed)
	}
	pos := len(delim) - 2
	for n := 0; ; n++ {
		final, next, err := delimiterLine(body, pos)
		if err != nil {
			return dst, err
		}
		if final {
			return dst, nil
		}
		if n == MaxParts {
			return dst, fmt.Errorf("%w: more than %d parts", ErrMalformed, MaxParts)
		}
		p, end, err := readPart(body, next, delim, n)
		if err != nil {
			return dst, err
		}
		dst = append(dst, p)
		pos = end + len(delim)
	}
}

// delimiterLine reads the rest of a delimiter line from pos (just past
// "--boundary"): "--" ends the form, optional spaces or tabs then CRLF
// start a part at next.
func delimiterLine(body []byte, pos int) (final bool, next int, err error) {
	if bytes.HasPrefix(body[pos:], []byte("--")) {
		pos += 2
		final = true
	}
	for pos < len(body) && (body[pos] == ' ' || body[pos] == '\t') {
		pos++
	}
	switch {
	case bytes.HasPrefix(body[pos:], []byte("\r\n")):
		return final, pos + 2, nil
	case final && pos == len(body):
		return true, pos, nil
	}
	return false, 0, fmt.Errorf("%w: a boundary line has more after the boundary", ErrMalformed)
}

// readPart reads the part whose headers start at pos; end is where its
// closing delimiter starts.
func readPart(body []byte, pos int, delim []byte, n int) (p Part, end int, err error) {
	var disposition []byte
	sawEncoding := false
	for {
		eol := bytes.Index(body[pos:], []byte("\r\n"))
		if eol < 0 {
			return p, 0, fmt.Errorf("%w: part %d: its headers do not end", ErrMalformed, n)
		}
		line := body[pos : pos+eol]
		pos += eol + 2
		if len(line) == 0 {
			break
		}
		name, value, err := headerLine(line)
		if err != nil {
			return p, 0, fmt.Errorf("%w: part %d: %w", ErrMalformed, n, err)
		}
		switch {
		case bytes.EqualFold(name, []byte("Content-Disposition")):
			if disposition != nil {
				return p, 0, fmt.Errorf("%w: part %d: Content-Disposition appears twice", ErrMalformed, n)
			}
			disposition = value
		case bytes.EqualFold(name, []byte("Content-Transfer-Encoding")):
			if sawEncoding {
				return p, 0, fmt.Errorf("%w: part %d: Content-Transfer-Encoding appears twice", ErrMalformed, n)
			}
			sawEncoding = true
			switch strings.ToLower(string(value)) {
			case "7bit", "8bit", "binary":
			default:
				p.Encoded = true
			}
		}
	}
	if disposition == nil {
		return p, 0, fmt.Errorf("%w: part %d has no Content-Disposition", ErrMalformed, n)
	}
	if err := p.readDisposition(disposition); err != nil {
		return p, 0, fmt.Errorf("%w: part %d: %w", ErrMalformed, n, err)
	}
	// The search starts at the CRLF that ended the headers: an empty part
	// may close with --boundary at once, as if that CRLF were the
	// delimiter's (mime/multipart reads it so).
	end, err = contentEnd(body, pos-2, delim)
	if err != nil {
		return p, 0, fmt.Errorf("%w: part %d (%q): %w", ErrMalformed, n, p.Name, err)
	}
	p.Value, p.Offset = body[pos:max(pos, end):max(pos, end)], pos
	return p, end, nil
}

// contentEnd finds the delimiter that ends a part's content starting at
// pos: CRLF--boundary followed by "--", a space, a tab, CR or LF, as Go's
// mime/multipart tells a delimiter from content that merely contains it.
func contentEnd(body []byte, pos int, delim []byte) (int, error) {
	for from := pos; ; {
		i := bytes.Index(body[from:], delim)
		if i < 0 {
			return 0, errors.New("its content does not end with a boundary")
		}
		end := from + i
		after := body[end+len(delim):]
		if len(after) == 0 {
			return end, nil // delimiterLine refuses what follows
		}
		switch after[0] {
		case ' ', '\t', '\r', '\n':
			return end, nil
		case '-':
			if len(after) == 1 || after[1] == '-' {
				return end, nil
			}
		}
		from = end + 1
	}
}

// headerLine splits a part header line; folded lines, bare LFs, names
// that are not tokens and control characters in values are refused (as
// net/textproto refuses them).
func headerLine(line []byte) (name, value []byte, err error) {
	if bytes.IndexByte(line, '\n') >= 0 || bytes.IndexByte(line, '\r') >= 0 {
		return nil, nil, errors.New("a header line has a bare CR or LF")
	}
	colon := bytes.IndexByte(line, ':')
	if colon <= 0 {
		return nil, nil, fmt.Errorf("header line %q has no name", truncate(line))
	}
	name = line[:colon]
	for _, c := range name {
		if !isTokenChar(c) {
			return nil, nil, fmt.Errorf("header name %q is not a token", truncate(name))
		}
	}
	value = bytes.Trim(line[colon+1:], " \t")
	for _, c := range value {
		if (c < 0x20 && c != '\t') || c == 0x7f {
			return nil, nil, fmt.Errorf("header %q has a control character", truncate(name))
		}
	}
	return name, value, nil
}

// readDisposition reads a form-data Content-Disposition's name and
// filename as mime/multipart's Part.FormName and FileName do.
func (p *Part) readDisposition(v []byte) error {
	d, params, err := mime.ParseMediaType(string(v))
	if err != nil {
		return fmt.Errorf("Content-Disposition: %w", err)
	}
	if d != "form-data" {
		return fmt.Errorf("Content-Disposition is %q, not form-data", d)
	}
	name, ok := params["name"]
	if !ok {
		return errors.New("Content-Disposition has no name")
	}
	p.Name = name
	p.FileName, p.HasFile = params["filename"]
	return nil
}

// FieldPart returns the part of the field name among parts (nil when
// none), under Field's rules.
func FieldPart(parts []Part, name string) (*Part, error) {
	var found *Part
	for i := range parts {
		p := &parts[i]
		if p.Name != name {
			continue
		}
		switch {
		case found != nil:
			return nil, fmt.Errorf("%w: the field %q appears more than once; send it once", ErrMalformed, name)
		case p.HasFile:
			return nil, fmt.Errorf("%w: the field %q is a file; send it as a plain field", ErrMalformed, name)
		case p.Encoded:
			return nil, fmt.Errorf("%w: the field %q has a Content-Transfer-Encoding; send it as it is", ErrMalformed, name)
		}
		found = p
	}
	return found, nil
}

// Field returns the value of the field name among parts; found false when
// no part has that name. A field named twice, a file part and an encoded
// value are errors: readers would disagree about the value.
func Field(parts []Part, name string) (value []byte, found bool, err error) {
	p, err := FieldPart(parts, name)
	if p == nil || err != nil {
		return nil, false, err
	}
	return p.Value, true, nil
}

func isTokenChar(c byte) bool {
	return c > 0x20 && c < 0x7f && !strings.ContainsRune(`()<>@,;:\"/[]?={}`, rune(c))
}

func truncate(b []byte) []byte {
	if len(b) > 40 {
		return b[:40]
	}
	return b
}
