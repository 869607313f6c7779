package detect

import "bytes"

// secretRule is a credential format: a fixed prefix and a body of allowed
// bytes whose length is between min and max.
type secretRule struct {
	prefix     string
	body       byteClass
	min, max   int
	needsDigit bool // the body must hold a digit (keeps hyphenated words out)
}

type byteClass uint8

const (
	classUpperDigit byteClass = iota // A-Z 0-9
	classAlnum                       // A-Z a-z 0-9
	classAlnumUnder                  // A-Z a-z 0-9 _
	classToken                       // A-Z a-z 0-9 _ -
	classAlnumDash                   // A-Z a-z 0-9 -
)

func (c byteClass) has(b byte) bool {
	switch c {
	case classUpperDigit:
		return isUpper(b) || isDigit(b)
	case classAlnum:
		return isAlnum(b)
	case classAlnumUnder:
		return isAlnum(b) || b == '_'
	case classToken:
		return isAlnum(b) || b == '_' || b == '-'
	case classAlnumDash:
		return isAlnum(b) || b == '-'
	}
	return false
}

// secretRules are the credential formats, longest prefix first within a
// first byte (sk-ant- and sk-proj- before sk-).
var secretRules = [...]secretRule{
	{prefix: "AKIA", body: classUpperDigit, min: 16, max: 16}, // AWS access key id
	{prefix: "ASIA", body: classUpperDigit, min: 16, max: 16}, // AWS temporary access key id
	{prefix: "AIza", body: classToken, min: 35, max: 35},      // Google API key
	{prefix: "github_pat_", body: classAlnumUnder, min: 22, max: 255},
	{prefix: "ghp_", body: classAlnum, min: 36, max: 255}, // GitHub personal access token
	{prefix: "gho_", body: classAlnum, min: 36, max: 255}, // GitHub OAuth token
	{prefix: "ghu_", body: classAlnum, min: 36, max: 255}, // GitHub user-to-server token
	{prefix: "ghs_", body: classAlnum, min: 36, max: 255}, // GitHub server-to-server token
	{prefix: "ghr_", body: classAlnum, min: 36, max: 255}, // GitHub refresh token
	{prefix: "glpat-", body: classToken, min: 20, max: 255},
	{prefix: "sk-ant-", body: classToken, min: 20, max: 255},  // Anthropic
	{prefix: "sk-proj-", body: classToken, min: 20, max: 255}, // OpenAI project key
	{prefix: "sk-", body: classToken, min: 20, max: 255, needsDigit: true},
	{prefix: "sk_live_", body: classAlnum, min: 20, max: 255},  // Stripe secret key
	{prefix: "rk_live_", body: classAlnum, min: 20, max: 255},  // Stripe restricted key
	{prefix: "xoxa-", body: classAlnumDash, min: 10, max: 255}, // Slack tokens
	{prefix: "xoxb-", body: classAlnumDash, min: 10, max: 255},
	{prefix: "xoxp-", body: classAlnumDash, min: 10, max: 255},
	{prefix: "xoxr-", body: classAlnumDash, min: 10, max: 255},
	{prefix: "xoxs-", body: classAlnumDash, min: 10, max: 255},
}

// secretsByFirst lists the rules by their prefix's first byte, in order.
var secretsByFirst = func() (t [256][]uint8) {
	for k, r := range secretRules {
		t[r.prefix[0]] = append(t[r.prefix[0]], uint8(k))
	}
	return t
}()

// matchSecret finds a credential at i: one of secretRules, a JSON Web
// Token or a PEM private key block.
func matchSecret(text []byte, i int) int {
	switch text[i] {
	case 'e':
		return matchJWT(text, i)
	case '-':
		return matchPEM(text, i)
	}
	rest := text[i:]
	for _, k := range secretsByFirst[text[i]] {
		r := &secretRules[k]
		if len(rest) < len(r.prefix) || string(rest[:len(r.prefix)]) != r.prefix {
			continue
		}
		j, digit := len(r.prefix), false
		for j < len(rest) && r.body.has(rest[j]) && j-len(r.prefix) <= r.max {
			digit = digit || isDigit(rest[j])
			j++
		}
		n := j - len(r.prefix)
		if n < r.min || n > r.max || (r.needsDigit && !digit) || !boundaryAt(rest, j) {
			return 0 // a longer prefix failed: a shorter one would read the same body
		}
		return i + j
	}
	return 0
}

func isB64URL(c byte) bool { return isAlnum(c) || c == '_' || c == '-' }

// matchJWT finds a JSON Web Token: three base64url parts joined by dots,
// the header and payload JSON objects (so both start "eyJ"), the
// signature possibly empty (alg none).
func matchJWT(text []byte, i int) int {
	j := i
	for part := 0; part < 3; part++ {
		if part > 0 {
			if j >= len(text) || text[j] != '.' {
				return 0
			}
			j++
		}
		start := j
		for j < len(text) && isB64URL(text[j]) {
			j++
		}
		if part < 2 && (j-start < 10 || !bytes.HasPrefix(text[start:j], []byte("eyJ"))) {
			return 0
		}
	}
	return j
}

// maxPEM bounds the search for a PEM block's end (an RSA-8192 key is
// about 6.5 KB).
const maxPEM = 16 << 10

// matchPEM finds a PEM private key block, "-----BEGIN … PRIVATE
// KEY-----" to its "-----END … PRIVATE KEY-----" line. Without such an
// end within maxPEM bytes and before the next BEGIN line, the block runs
// to the end of its base64 body.
func matchPEM(text []byte, i int) int {
	end, _ := scanPEM(text, i)
	return end
}

const pemBegin, pemEnd = "-----BEGIN ", "-----END "

// pemLabel reads "… PRIVATE KEY-----" at b[0:]: the label's length with
// its dashes, or 0.
func pemLabel(b []byte) int {
	const label, dashes = "PRIVATE KEY", "-----"
	j := 0
	for j < len(b) && j < 64 && (isUpper(b[j]) || b[j] == ' ') {
		j++
	}
	if !bytes.HasSuffix(b[:j], []byte(label)) || !bytes.HasPrefix(b[j:], []byte(dashes)) {
		return 0
	}
	return j + len(dashes)
}

// scanPEM reads the block at i: its end (0 for none) and whether an END
// line closed it.
func scanPEM(text []byte, i int) (end int, closed bool) {
	rest := text[i:]
	if !bytes.HasPrefix(rest, []byte(pemBegin)) {
		return 0, false
	}
	n := pemLabel(rest[len(pemBegin):])
	if n == 0 {
		return 0, false
	}
	j := len(pemBegin) + n
	window := rest[j:min(len(rest), j+maxPEM)]
	if b := bytes.Index(window, []byte(pemBegin)); b >= 0 {
		window = window[:b] // the END must be this block's, not the next's
	}
	for off := 0; ; {
		k := bytes.Index(window[off:], []byte(pemEnd))
		if k < 0 {
			break
		}
		e := j + off + k + len(pemEnd)
		if n := pemLabel(rest[e:]); n > 0 {
			return i + e + n, true
		}
		off += k + 1
	}
	for j < len(rest) && j < maxPEM {
		c := rest[j]
		if !(isAlnum(c) || c == '+' || c == '/' || c == '=' || c == '\n' || c == '\r' || c == ' ' || c == '\t') {
			break
		}
		j++
	}
	return i + j, false
}

// OpenPEM returns the start of a PEM private key block in text that no END
// line closes yet, or -1: a stream that is redacted holds it back until
// it ends.
func OpenPEM(text []byte) int {
	b := bytes.LastIndex(text, []byte(pemBegin))
	if b < 0 {
		return -1
	}
	if end, closed := scanPEM(text, b); end > 0 && !closed {
		return b
	}
	return -1
}
