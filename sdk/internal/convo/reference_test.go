package convo

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// The reference encoder: request_messages written again on encoding/json,
// as plainly as possible, for FuzzAppend to compare Append with. It reads
// the body into an ordered tree that keeps every copy of a key.

type node struct {
	raw json.RawMessage
	str *string
	arr []node
	obj []member
}

type member struct {
	key string
	val node
}

func parseNode(raw json.RawMessage) (node, error) {
	n := node{raw: raw}
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return n, err
		}
		n.str = &s
	case '[', '{':
		dec := json.NewDecoder(bytes.NewReader(raw))
		if _, err := dec.Token(); err != nil {
			return n, err
		}
		for dec.More() {
			var key string
			if raw[0] == '{' {
				k, err := dec.Token()
				if err != nil {
					return n, err
				}
				key = k.(string)
			}
			var v json.RawMessage
			if err := dec.Decode(&v); err != nil {
				return n, err
			}
			child, err := parseNode(v)
			if err != nil {
				return n, err
			}
			if raw[0] == '{' {
				n.obj = append(n.obj, member{key, child})
			} else {
				n.arr = append(n.arr, child)
			}
		}
		if n.arr == nil && raw[0] == '[' {
			n.arr = []node{}
		}
	}
	return n, nil
}

func (n node) isObject() bool { return len(n.raw) > 0 && n.raw[0] == '{' }
func (n node) isArray() bool  { return len(n.raw) > 0 && n.raw[0] == '[' }

// lastString is the last copy of key whose value is a string.
func (n node) lastString(key string) (string, bool) {
	v, ok := "", false
	for _, m := range n.obj {
		if m.key == key && m.val.str != nil {
			v, ok = *m.val.str, true
		}
	}
	return v, ok
}

// typ is the part's type: its last "type", when that is a string.
func (n node) typ() string {
	t := ""
	for _, m := range n.obj {
		if m.key == "type" {
			t = ""
			if m.val.str != nil {
				t = *m.val.str
			}
		}
	}
	return t
}

type refEncoder struct {
	out   []byte
	index int
}

func (r *refEncoder) record(kind, role, name, text string) {
	r.out = fmt.Appendf(r.out, "%d %s %d %d %d\n%s%s%s\n", r.index, kind, len(role), len(name), len(text), role, name, text)
}

func reference(body []byte) []byte {
	if !json.Valid(body) {
		return nil
	}
	root, err := parseNode(bytes.TrimSpace(body))
	if err != nil || !root.isObject() {
		return nil
	}
	r := &refEncoder{}
	for _, m := range root.obj {
		if m.key == "system" && (m.val.str != nil || m.val.isArray()) || m.key == "instructions" && m.val.str != nil {
			r.content(m.val, "system")
			r.index++
		}
	}
	for _, m := range root.obj {
		switch m.key {
		case "messages":
			for _, msg := range m.val.arr {
				if msg.isObject() {
					r.message(msg)
				}
			}
		case "prompt", "input", "suffix":
			if m.val.str != nil {
				r.record(KindText, "user", "", *m.val.str)
				r.index++
			}
			for _, el := range m.val.arr {
				if el.str != nil {
					r.record(KindText, "user", "", *el.str)
					r.index++
				} else if el.isObject() && m.key == "input" {
					r.item(el)
				}
			}
		}
	}
	return r.out
}

func (r *refEncoder) message(msg node) {
	defer func() { r.index++ }()
	role, _ := msg.lastString("role")
	if role == "tool" {
		id, _ := msg.lastString("tool_call_id")
		text, found := "", false
		for _, m := range msg.obj {
			if m.key == "content" && (m.val.str != nil || m.val.isArray()) {
				found = true
				text += resultText(m.val)
			}
		}
		if found {
			r.record(KindToolResult, role, id, text)
		}
		return
	}
	for _, m := range msg.obj {
		switch m.key {
		case "content":
			r.content(m.val, role)
		case "tool_calls":
			for _, call := range m.val.arr {
				if !call.isObject() {
					continue
				}
				var name, args string
				for _, f := range call.obj {
					if f.key == "function" && f.val.isObject() {
						if v, ok := f.val.lastString("name"); ok {
							name = v
						}
						if v, ok := f.val.lastString("arguments"); ok {
							args = v
						}
					}
				}
				r.record(KindToolCall, role, name, args)
			}
		}
	}
}

func (r *refEncoder) content(v node, role string) {
	if v.str != nil {
		r.record(KindText, role, "", *v.str)
		return
	}
	for _, p := range v.arr {
		if !p.isObject() {
			continue
		}
		switch p.typ() {
		case "text", "input_text", "output_text":
			for _, m := range p.obj {
				if m.key == "text" && m.val.str != nil {
					r.record(KindText, role, "", *m.val.str)
				}
			}
		case "tool_use":
			name, _ := p.lastString("name")
			input := ""
			for _, m := range p.obj {
				if m.key == "input" {
					input = string(m.val.raw)
				}
			}
			r.record(KindToolCall, role, name, input)
		case "tool_result":
			id, _ := p.lastString("tool_use_id")
			text := ""
			for _, m := range p.obj {
				if m.key == "content" {
					text += resultText(m.val)
				}
			}
			r.record(KindToolResult, "tool", id, text)
		}
	}
}

func resultText(v node) string {
	if v.str != nil {
		return *v.str
	}
	text := ""
	for _, b := range v.arr {
		if t := b.typ(); b.isObject() && (t == "text" || t == "input_text" || t == "output_text") {
			for _, m := range b.obj {
				if m.key == "text" && m.val.str != nil {
					text += *m.val.str
				}
			}
		}
	}
	return text
}

// item is an element of "input": a Responses function call or its output,
// else a message.
func (r *refEncoder) item(it node) {
	t, _ := it.lastString("type")
	switch t {
	case "function_call":
		name, _ := it.lastString("name")
		args, _ := it.lastString("arguments")
		r.record(KindToolCall, "assistant", name, args)
		r.index++
	case "function_call_output":
		id, _ := it.lastString("call_id")
		text, found := "", false
		for _, m := range it.obj {
			if m.key == "output" && (m.val.str != nil || m.val.isArray()) {
				found = true
				text += resultText(m.val)
			}
		}
		if found {
			r.record(KindToolResult, "tool", id, text)
		}
		r.index++
	default:
		r.message(it)
	}
}
