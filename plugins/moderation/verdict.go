package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"unicode/utf8"

	"github.com/tollgate/tollgate/sdk/jsonscan"
)

// answer is what the plugin reads of a moderation answer's first result.
type answer struct {
	flagged    bool
	categories []string // those the classifier flagged
	scores     []score
}

type score struct {
	category string
	value    float64
}

var errAnswer = errors.New("the classifier's answer is not a moderation result")

// parseAnswer reads an OpenAI moderation answer:
// {"results": [{"flagged": …, "categories": {…}, "category_scores": {…}}]}.
// Only the first result counts: the plugin sends one input.
func parseAnswer(body []byte) (answer, error) {
	var a answer
	if err := a.parse(body, true); err != nil {
		return answer{}, err
	}
	return a, nil
}

// parse reads body into a (see parseAnswer), reusing a's slices: the
// guest's allocator and collector are what a callback pays for most, so
// the category names are the known ones' constants, not copies. Without
// withScores the scores are checked but not kept: only thresholds need
// them, and ParseFloat was a third of the parse in the guest.
func (a *answer) parse(body []byte, withScores bool) error {
	a.flagged, a.categories, a.scores = false, a.categories[:0], a.scores[:0]
	var s jsonscan.Scanner
	s.Reset(body)
	if s.Peek() != '{' {
		return errAnswer
	}
	seen := false
	err := s.Object(func(key []byte) error {
		if string(key) != "results" {
			return s.Skip()
		}
		if s.Peek() != '[' {
			return errAnswer
		}
		return s.Array(func(i int) error {
			if i > 0 {
				return s.Skip()
			}
			seen = true
			return parseResult(&s, a, withScores)
		})
	})
	if err == nil {
		err = s.End()
	}
	if err != nil || !seen {
		a.flagged, a.categories, a.scores = false, a.categories[:0], a.scores[:0]
		return errAnswer
	}
	return nil
}

// categoryName is k as a string: a known category's constant, else a copy.
func categoryName(k []byte) string {
	switch string(k) {
	case "harassment":
		return "harassment"
	case "harassment/threatening":
		return "harassment/threatening"
	case "hate":
		return "hate"
	case "hate/threatening":
		return "hate/threatening"
	case "illicit":
		return "illicit"
	case "illicit/violent":
		return "illicit/violent"
	case "self-harm":
		return "self-harm"
	case "self-harm/intent":
		return "self-harm/intent"
	case "self-harm/instructions":
		return "self-harm/instructions"
	case "sexual":
		return "sexual"
	case "sexual/minors":
		return "sexual/minors"
	case "violence":
		return "violence"
	case "violence/graphic":
		return "violence/graphic"
	}
	return string(k)
}

func parseResult(s *jsonscan.Scanner, a *answer, withScores bool) error {
	if s.Peek() != '{' {
		return errAnswer
	}
	return s.Object(func(key []byte) error {
		switch string(key) {
		case "flagged":
			return boolean(s, "flagged", &a.flagged)
		case "categories":
			if s.Peek() != '{' {
				return errAnswer
			}
			return s.Object(func(k []byte) error {
				var on bool
				if s.Peek() == 'n' {
					return s.Literal("null")
				}
				if err := boolean(s, "categories", &on); err != nil {
					return err
				}
				if on {
					a.categories = append(a.categories, categoryName(k))
				}
				return nil
			})
		case "category_scores":
			if s.Peek() != '{' {
				return errAnswer
			}
			return s.Object(func(k []byte) error {
				num, err := s.Number()
				if err != nil {
					return err
				}
				if !withScores {
					if !parsesAsFloat(num) {
						return errAnswer
					}
					return nil
				}
				name := categoryName(k)
				f, err := strconv.ParseFloat(string(num), 64)
				if err != nil {
					return errAnswer
				}
				a.scores = append(a.scores, score{category: name, value: f})
				return nil
			})
		}
		return s.Skip()
	})
}

// parsesAsFloat reports whether ParseFloat takes num, a JSON number,
// without calling it when it surely does: without an exponent and
// shorter than 300 digits a number is below MaxFloat64.
func parsesAsFloat(num []byte) bool {
	if len(num) < 300 && bytes.IndexAny(num, "eE") < 0 {
		return true
	}
	_, err := strconv.ParseFloat(string(num), 64)
	return err == nil
}

// flaggedCategories are the categories that refuse the text: with
// thresholds, those whose score reaches their threshold; without, those
// the classifier flagged (or "flagged" alone when it flagged the text but
// named none).
func (c *config) flaggedCategories(a answer) []string {
	if len(c.thresholds) == 0 {
		if a.flagged && len(a.categories) == 0 {
			return []string{"flagged"}
		}
		return a.categories
	}
	var out []string
	for _, t := range c.thresholds {
		for _, sc := range a.scores {
			if sc.category == t.category && sc.value >= t.score {
				out = append(out, t.category)
				break
			}
		}
	}
	return out
}

// appendRequest appends the classifier's request body for text:
// {"model": MODEL, "input": TEXT}.
func (c *config) appendRequest(dst []byte, text []byte) []byte {
	dst = append(dst, `{"model":`...)
	dst = appendJSONString(dst, []byte(c.model))
	dst = append(dst, `,"input":`...)
	dst = appendJSONString(dst, text)
	return append(dst, '}')
}

// cacheKey names a verdict in the host's cache: the model and a hash of
// the text (never the text itself), so an equal text gets the cached
// verdict and a changed model does not.
func (c *config) cacheKey(dst []byte, text []byte) []byte {
	// The hash of model, NUL, text, in one buffer: sha256.New's digest and
	// its Sum escape to the heap.
	keyInput = append(append(append(keyInput[:0], c.model...), 0), text...)
	sum := sha256.Sum256(keyInput)
	dst = append(dst, "moderation:"...)
	return hex.AppendEncode(dst, sum[:])
}

var keyInput []byte // cacheKey's buffer, reused

// appendJSONString appends s as a JSON string; invalid UTF-8 becomes
// U+FFFD, as encoding/json writes it. Runs of bytes that need no escape
// are copied whole: byte by byte, a 500-byte prompt took 15 µs in the
// guest.
func appendJSONString(dst, s []byte) []byte {
	const hexDigits = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		j := i
		for j < len(s) && plainByte[s[j]] {
			j++
		}
		dst = append(dst, s[i:j]...)
		if i = j; i == len(s) {
			break
		}
		b := s[i]
		if b < utf8.RuneSelf {
			switch {
			case b == '"' || b == '\\':
				dst = append(dst, '\\', b)
			case b == '\n':
				dst = append(dst, '\\', 'n')
			case b == '\r':
				dst = append(dst, '\\', 'r')
			case b == '\t':
				dst = append(dst, '\\', 't')
			default: // a control character
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xf])
			}
			i++
			continue
		}
		r, n := utf8.DecodeRune(s[i:])
		if r == utf8.RuneError && n == 1 {
			dst = append(dst, `\ufffd`...)
		} else {
			dst = append(dst, s[i:i+n]...)
		}
		i += n
	}
	return append(dst, '"')
}

// plainByte are the bytes a JSON string holds as they are: ASCII but for
// control characters, '"' and '\\'.
var plainByte = func() (t [256]bool) {
	for b := 0x20; b < utf8.RuneSelf; b++ {
		t[b] = b != '"' && b != '\\'
	}
	return t
}()

// categoryList joins the categories for the client's message.
func categoryList(cats []string) string {
	out := ""
	for i, c := range cats {
		if i > 0 {
			out += ", "
		}
		out += c
	}
	return out
}
