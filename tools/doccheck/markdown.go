package doccheck

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"
	"unicode"
)

// Code is a piece of code in a document: an inline code span or the body of
// a fenced block.
type Code struct {
	Text   string
	Line   int  // 1-based line of its first character
	Fenced bool // a fenced block's body, not an inline span
}

// Link is a link destination as written, before any resolving.
type Link struct {
	Dest string
	Line int
}

// page is one Markdown document split for the checks: its code, and the
// document with every code span and fenced block blanked out (newlines
// kept, so offsets and line numbers still match the source).
type page struct {
	src    []byte
	prose  []byte
	code   []Code
	fenced []bool // per 0-based line: inside a fenced block or its fences
}

// fenceOpen matches a fenced code block's opening line: up to three spaces,
// then three or more backticks or tildes.
var fenceOpen = regexp.MustCompile("^ {0,3}(`{3,}|~{3,})")

func parse(src []byte) *page {
	p := &page{src: src, prose: bytes.Clone(src)}
	lines := bytes.SplitAfter(src, []byte("\n"))
	p.fenced = make([]bool, len(lines))
	off := 0
	var fence string // the open fence's run, "" outside a block
	var body strings.Builder
	bodyLine := 0
	for i, line := range lines {
		trimmed := strings.TrimRight(string(line), "\r\n")
		switch {
		case fence == "":
			if m := fenceOpen.FindStringSubmatch(trimmed); m != nil && !(m[1][0] == '`' && strings.Contains(trimmed[len(m[0]):], "`")) {
				fence = m[1]
				body.Reset()
				bodyLine = i + 2
				p.blank(off, len(line))
				p.fenced[i] = true
			}
		default:
			p.fenced[i] = true
			p.blank(off, len(line))
			if t := strings.TrimLeft(trimmed, " "); len(trimmed)-len(t) <= 3 && strings.HasPrefix(t, fence) &&
				strings.TrimSpace(strings.TrimLeft(t, fence[:1])) == "" {
				p.code = append(p.code, Code{Text: body.String(), Line: bodyLine, Fenced: true})
				fence = ""
				break
			}
			body.WriteString(string(line))
		}
		off += len(line)
	}
	if fence != "" { // an unclosed fence runs to the end of the document
		p.code = append(p.code, Code{Text: body.String(), Line: bodyLine, Fenced: true})
	}
	p.codeSpans()
	return p
}

// blank replaces n bytes of prose from off with spaces, keeping newlines.
func (p *page) blank(off, n int) {
	for i := off; i < off+n; i++ {
		if p.prose[i] != '\n' {
			p.prose[i] = ' '
		}
	}
}

// codeSpans finds inline code outside fenced blocks: a run of n backticks
// up to the next run of exactly n (CommonMark); a run with no partner is
// literal text. Spans end at a blank line, as paragraphs do.
func (p *page) codeSpans() {
	s := p.prose
	for i := 0; i < len(s); {
		if s[i] == '\\' {
			i += 2
			continue
		}
		if s[i] != '`' {
			i++
			continue
		}
		n := runLen(s, i, '`')
		end := closingRun(s, i+n, n)
		if end < 0 {
			i += n
			continue
		}
		text := strings.ReplaceAll(string(s[i+n:end]), "\n", " ")
		if t := strings.TrimSpace(text); t != "" && text[0] == ' ' && text[len(text)-1] == ' ' {
			text = text[1 : len(text)-1]
		}
		p.code = append(p.code, Code{Text: text, Line: lineAt(s, i)})
		p.blank(i, end+n-i)
		i = end + n
	}
}

func runLen(s []byte, i int, c byte) int {
	n := 0
	for i+n < len(s) && s[i+n] == c {
		n++
	}
	return n
}

// closingRun returns the offset of the next run of exactly n backticks from
// i, or -1 if a blank line or the end comes first.
func closingRun(s []byte, i, n int) int {
	for i < len(s) {
		switch {
		case s[i] == '`':
			m := runLen(s, i, '`')
			if m == n {
				return i
			}
			i += m
		case s[i] == '\n' && blankLineAfter(s, i+1):
			return -1
		default:
			i++
		}
	}
	return -1
}

func blankLineAfter(s []byte, i int) bool {
	for ; i < len(s) && s[i] != '\n'; i++ {
		if s[i] != ' ' && s[i] != '\t' && s[i] != '\r' {
			return false
		}
	}
	return true
}

// lineAt is the 1-based line of offset off.
func lineAt(s []byte, off int) int { return 1 + bytes.Count(s[:off], []byte("\n")) }

// inlineLink matches an inline link or image on prose: [text](dest "title").
// The text may wrap lines but holds no brackets.
var inlineLink = regexp.MustCompile(`!?\[[^\[\]]*\]\(\s*(<[^<>\n]*>|[^\s()<>]+)(?:\s+(?:"[^"]*"|'[^']*'|\([^()]*\)))?\s*\)`)

// refDef matches a link reference definition: [label]: dest.
var refDef = regexp.MustCompile(`(?m)^ {0,3}\[[^\]]+\]:\s*(<[^<>\n]*>|\S+)`)

// Links returns the destinations of the document's inline links, images and
// link reference definitions, in order, leaving out anything in code.
func Links(src []byte) []Link {
	p := parse(src)
	var links []Link
	for _, re := range []*regexp.Regexp{inlineLink, refDef} {
		for _, m := range re.FindAllSubmatchIndex(p.prose, -1) {
			if m[0] > 0 && p.prose[m[0]-1] == '\\' {
				continue
			}
			dest := strings.TrimSuffix(strings.TrimPrefix(string(p.prose[m[2]:m[3]]), "<"), ">")
			links = append(links, Link{Dest: dest, Line: lineAt(p.prose, m[0])})
		}
	}
	return links
}

// atxHeading matches an ATX heading line; group 1 is its text.
var atxHeading = regexp.MustCompile(`^ {0,3}#{1,6}(?:[ \t]+(.*?))?[ \t]*$`)

// htmlID matches an explicit anchor: <a name="x"> or any id="x".
var htmlID = regexp.MustCompile(`<a\s[^>]*\bname="([^"]+)"|\bid="([^"]+)"`)

// Anchors returns the fragment identifiers a document defines: the GitHub
// slug of each ATX heading outside fenced code (a repeated slug gets -1,
// -2, ... as GitHub numbers them) and explicit HTML ids.
func Anchors(src []byte) map[string]bool {
	p := parse(src)
	anchors := map[string]bool{}
	seen := map[string]int{}
	for i, line := range strings.Split(string(src), "\n") {
		if i < len(p.fenced) && p.fenced[i] {
			continue
		}
		m := atxHeading.FindStringSubmatch(strings.TrimRight(line, "\r"))
		if m == nil {
			continue
		}
		slug := Slug(headingText(m[1]))
		if n := seen[slug]; n > 0 {
			seen[slug] = n + 1
			slug += "-" + strconv.Itoa(n)
		} else {
			seen[slug] = 1
		}
		anchors[slug] = true
	}
	for _, m := range htmlID.FindAllStringSubmatch(string(p.prose), -1) {
		anchors[m[1]+m[2]] = true
	}
	return anchors
}

// closingHashes is an ATX heading's optional closing sequence.
var closingHashes = regexp.MustCompile(`(^|[ \t])#+$`)

// headingLink is a link inside a heading; it renders as its text.
var headingLink = regexp.MustCompile(`!?\[([^\[\]]*)\]\([^()]*\)`)

// htmlTag is an inline HTML tag; it renders as nothing.
var htmlTag = regexp.MustCompile(`</?[A-Za-z][^<>]*>`)

// headingText is the text GitHub renders for a heading's source: no
// closing hashes, links as their text, no HTML tags and no backticks.
func headingText(s string) string {
	s = strings.TrimSpace(closingHashes.ReplaceAllString(s, ""))
	s = headingLink.ReplaceAllString(s, "$1")
	s = htmlTag.ReplaceAllString(s, "")
	return strings.ReplaceAll(s, "`", "")
}

// Slug is GitHub's anchor for a heading's rendered text (github-slugger):
// lower case, every character but letters, marks, digits, connector
// punctuation (_), hyphens and spaces dropped, then each space a hyphen.
func Slug(text string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || unicode.In(r, unicode.L, unicode.M, unicode.N, unicode.Pc):
			b.WriteRune(r)
		}
	}
	return b.String()
}
