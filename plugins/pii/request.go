package main

import (
	"errors"

	"github.com/tollgate/tollgate/plugins/pii/detect"
	"github.com/tollgate/tollgate/sdk"
)

// textSetter rewrites a part of the request's conversation and reads the
// conversation again: what masking needs of the request, so the logic is
// tested without a host.
type textSetter interface {
	SetMessageText(record int, text string) error
	Messages(dst []sdk.MessagePart) []sdk.MessagePart
}

var _ textSetter = (*sdk.Request)(nil)

// requestResult is what the request phase found and did.
type requestResult struct {
	found  detect.Set
	counts [16]int // findings per kind
	// rewritten is the number of parts rewritten.
	rewritten int
	// unredactable is set when a part with findings could not be
	// rewritten (its text is not one JSON string in the body): the
	// request is refused rather than sent with the data in it.
	unredactable bool
	entries      []entry
}

// edit is a part's new text; part is its index in the parts scanned.
type edit struct {
	record, part int
	text         []byte
}

// scanRequest scans the parts of the roles the policy names and, unless it
// rejects, rewrites them through w with placeholders numbered by m.
func (p *policy) scanRequest(parts []sdk.MessagePart, w textSetter, m *mapping) (requestResult, error) {
	var res requestResult
	// The placeholders the client's text already holds, found once, when
	// the first finding needs a number.
	var taken map[labelNumber]bool
	m.taken = func(label string, n int) bool {
		if taken == nil {
			texts := make([][]byte, len(parts))
			for i := range parts {
				texts[i] = parts[i].Text
			}
			taken = p.placeholder.occurrences(texts)
		}
		return taken[labelNumber{label, n}]
	}
	var spans []detect.Span
	var edits []edit
	for i, part := range parts {
		if !p.scansRole(part.Role) {
			continue
		}
		spans = p.scanner.Append(spans[:0], part.Text)
		if len(spans) == 0 {
			continue
		}
		for _, sp := range spans {
			res.found |= detect.SetOf(sp.Kind)
			res.counts[sp.Kind]++
		}
		if p.mode == modeReject {
			continue
		}
		var text []byte
		if part.Kind == sdk.PartToolCall {
			text = m.redactJSON(nil, p.placeholder, part.Text, spans)
		} else {
			text = m.redact(nil, p.placeholder, part.Text, spans)
		}
		edits = append(edits, edit{record: part.Record, part: i, text: text})
	}
	res.entries = m.entries
	var stuck []edit
	for _, e := range edits {
		if err := w.SetMessageText(e.record, string(e.text)); err != nil {
			if errors.Is(err, sdk.ErrInvalid) {
				stuck = append(stuck, e)
				continue
			}
			return res, err
		}
		res.rewritten++
	}
	if len(stuck) > 0 {
		p.recheck(&res, parts, stuck, w.Messages(nil))
	}
	return res, nil
}

// recheck decides on the parts that could not be rewritten (their text is
// not one JSON string in the body) by their text after the other parts'
// rewrites: a text made of other parts' strings (an MCP tool call's
// arguments, whose strings are parts of their own) may hold no finding
// left, and its findings, counted with those parts', are not counted
// twice. A finding left (an Anthropic tool_use input, a number in the
// arguments) makes the request unredactable.
func (p *policy) recheck(res *requestResult, parts []sdk.MessagePart, stuck []edit, after []sdk.MessagePart) {
	var spans []detect.Span
	for _, e := range stuck {
		if e.record >= len(after) || len(p.scanner.Append(spans[:0], after[e.record].Text)) > 0 {
			res.unredactable = true
			return
		}
	}
	for _, e := range stuck {
		for _, sp := range p.scanner.Append(spans[:0], parts[e.part].Text) {
			res.counts[sp.Kind]--
		}
	}
	res.found = 0
	for k, n := range res.counts {
		if n > 0 {
			res.found |= detect.SetOf(detect.Kind(k))
		}
	}
}

// needsReply reports whether the reply phase has work after a request
// that res describes: restoring its placeholders, or scanning the reply.
// Otherwise the plugin skips the reply, which then streams without it.
func (p *policy) needsReply(res *requestResult) bool {
	switch p.reply {
	case replyRestore:
		return len(res.entries) > 0 && p.mode == modeMask && !res.unredactable
	case replyRedact:
		return true
	}
	return false
}
