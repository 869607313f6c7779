package responses

import (
	"bytes"
	"strconv"

	"github.com/valyala/fastjson"
)

var seqKey = []byte(`"sequence_number":`)

// AppendWithSeq appends the raw SSE event raw to dst with its
// sequence_number set to seq. The member is found as the last
// `"sequence_number":` in the event (a string cannot hold it unescaped,
// and it is a top-level member of every event); an event without one is
// appended as it is, and so is one already numbered seq (no copy is
// made beyond the append). numbered reports whether the event has one.
func AppendWithSeq(dst, raw []byte, seq int64) (out []byte, numbered bool) {
	i := bytes.LastIndex(raw, seqKey)
	if i < 0 {
		return append(dst, raw...), false
	}
	from := i + len(seqKey)
	for from < len(raw) && raw[from] == ' ' {
		from++
	}
	to := from
	for to < len(raw) && raw[to] >= '0' && raw[to] <= '9' {
		to++
	}
	if to == from {
		return append(dst, raw...), false
	}
	n := int64(0)
	for _, c := range raw[from:min(to, from+18)] {
		n = n*10 + int64(c-'0')
	}
	if n == seq && to-from <= 18 {
		return append(dst, raw...), true
	}
	dst = append(dst, raw[:from]...)
	dst = strconv.AppendInt(dst, seq, 10)
	return append(dst, raw[to:]...), true
}

// AppendTerminal appends the terminal event (response.completed or
// response.incomplete) whose data is data, rewritten for what a guard
// sent: the text of each message item of its output is that of o's item
// at the same index, o's items beyond the upstream's output are added,
// and the event is numbered seq. An event that cannot be read is
// appended as it is.
func (o *Output) AppendTerminal(dst, data []byte, seq int64) []byte {
	var p fastjson.Parser // only streams a guard changed take this path
	v, err := p.ParseBytes(data)
	typ := v.GetStringBytes("type")
	r := v.Get("response")
	if err != nil || r == nil || len(typ) == 0 {
		dst = append(dst, "data: "...)
		return append(append(dst, data...), "\n\n"...)
	}
	var a fastjson.Arena
	out := a.NewArray()
	items := r.GetArray("output")
	for i, it := range items {
		if i < o.n && !o.Items[i].Func && string(it.GetStringBytes("type")) == "message" {
			it.Set("content", textContent(&a, o.Items[i].Text))
		}
		out.SetArrayItem(i, it)
	}
	n := len(items)
	for i := n; i < o.n; i++ {
		var ip fastjson.Parser
		iv, err := ip.ParseBytes(o.Items[i].appendJSON(nil))
		if err == nil {
			out.SetArrayItem(i, iv)
		}
	}
	r.Set("output", out)
	v.Set("sequence_number", a.NewNumberInt(int(seq)))
	dst = append(dst, "event: "...)
	dst = append(dst, typ...)
	dst = append(dst, "\ndata: "...)
	dst = appendValue(dst, v)
	return append(dst, "\n\n"...)
}
