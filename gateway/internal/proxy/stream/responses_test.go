package stream

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/gateway/internal/openai"
	"github.com/tollgate/tollgate/gateway/internal/responses"
	"github.com/tollgate/tollgate/gateway/internal/sse"
	"github.com/tollgate/tollgate/sdk/wasmhost"
)

// responsesRecording is a Responses stream as an upstream with the API
// sends it: made by the translator from chat chunks (text, a tool call,
// more text), with a comment and an event the gateway does not know.
func responsesRecording(t testing.TB, texts ...string) []byte {
	t.Helper()
	var chat strings.Builder
	for i, s := range texts {
		if s == "TOOL" {
			fmt.Fprintf(&chat, "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":%d,\"id\":\"call_%d\",\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"a\\\":\"}}]}}]}\n\n", i, i)
			fmt.Fprintf(&chat, "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":%d,\"function\":{\"arguments\":\"1}\"}}]}}]}\n\n", i)
			continue
		}
		b, _ := json.Marshal(s)
		fmt.Fprintf(&chat, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":%s}}]}\n\n", b)
	}
	chat.WriteString("data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n")
	chat.WriteString("data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":9,\"total_tokens\":12}}\n\n")
	chat.WriteString("data: [DONE]\n\n")
	r := responses.NewStreamReader(0)
	r.Reset(strings.NewReader(chat.String()), []byte("gpt-x"), []byte("resp_rec"), 1)
	out, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	// A keep-alive comment and an unknown event, where OpenAI may send them.
	i := bytes.Index(out, []byte("event: response.output_text.delta"))
	extra := ": keep-alive\n\nevent: response.output_text.annotation.added\ndata: {\"type\":\"response.output_text.annotation.added\",\"sequence_number\":0}\n\n"
	if i > 0 {
		out = append(out[:i:i], append([]byte(extra), out[i:]...)...)
	}
	return renumber(out)
}

// renumber numbers a stream's events from 0, as an upstream does.
func renumber(in []byte) []byte {
	var out []byte
	seq := int64(0)
	for _, ev := range bytes.SplitAfter(in, []byte("\n\n")) {
		var numbered bool
		if out, numbered = responses.AppendWithSeq(out, ev, seq); numbered {
			seq++
		}
	}
	return out
}

// runResponsesScript sends a Responses stream through a stream whose
// plugin verdicts come from decide, and returns what the client receives;
// it fails when the text bytes the stream counted as sent are not the
// text the client got.
func runResponsesScript(t testing.TB, rec []byte, decide decider) []byte {
	t.Helper()
	out, counted := runResponsesCounted(t, rec, decide)
	if got := checkResponsesStream(t, out); int64(len(got.text)) != counted {
		t.Fatalf("counted %d text bytes sent, the client got %d (%q)\n%s", counted, len(got.text), got.text, out)
	}
	return out
}

func runResponsesCounted(t testing.TB, rec []byte, decide decider) ([]byte, int64) {
	t.Helper()
	wr := wasmhost.AcquireRequest()
	defer wasmhost.ReleaseRequest(wr)
	st := &Stream{up: &Counters{TTFT: -1}, wr: wr, id: []byte("req_test"), model: []byte("gpt-x"), cancel: func(error) {}, resp: true}
	st.rs.reset()
	rd := sse.NewReader(bytes.NewReader(rec), 0)
	for !st.finished {
		raw, err := rd.Next()
		if errors.Is(err, io.EOF) {
			st.respFlushHeld()
			st.respFlushDeferred()
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if ev, flags, run := st.readResponses(raw, true); run {
			st.applyResponses(raw, ev, decide(&st.chunk, flags))
		}
	}
	return st.out, wr.TextBytesSent
}

// respResult is a Responses stream checked against the event grammar.
type respResult struct {
	text, status, reason string // text: every delta, in order
	calls                int
	complete             bool
}

// checkResponsesStream checks out: response.created first; events
// numbered in increasing order; items added at output indexes 0, 1, ...,
// each closed before the next opens; text and arguments deltas only for
// the open item of their kind; each closing event and the terminal event
// holding the text the item's deltas carried; the terminal event last.
func checkResponsesStream(t testing.TB, out []byte) respResult {
	t.Helper()
	var r respResult
	bad := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("invalid stream: "+format+"\n%s", append(args, out)...)
	}
	seq, items, open, ended := int64(-1), 0, -1, false
	var texts []string
	var funcs []bool
	for _, raw := range bytes.SplitAfter(out, []byte("\n\n")) {
		data, ok := sse.AppendData(nil, raw)
		if !ok {
			continue
		}
		if ended {
			bad("an event after the end: %s", data)
		}
		var ev struct {
			Type        string          `json:"type"`
			Seq         *int64          `json:"sequence_number"`
			OutputIndex int             `json:"output_index"`
			Delta       string          `json:"delta"`
			Text        string          `json:"text"`
			Item        json.RawMessage `json:"item"`
			Response    struct {
				Status            string                   `json:"status"`
				IncompleteDetails *struct{ Reason string } `json:"incomplete_details"`
				Output            []struct {
					Type    string
					Content []struct{ Text string }
				}
			} `json:"response"`
		}
		if err := json.Unmarshal(data, &ev); err != nil {
			bad("%q: %v", data, err)
		}
		if name := responses.EventName(raw); string(name) != ev.Type && len(name) > 0 {
			bad("event name %q for type %q", name, ev.Type)
		}
		if ev.Seq == nil || *ev.Seq <= seq {
			bad("event %s numbered %v after %d", ev.Type, ev.Seq, seq)
		}
		seq = *ev.Seq
		if seq == 0 && ev.Type != "response.created" {
			bad("the stream starts with %s", ev.Type)
		}
		var item struct{ Type, Arguments string }
		json.Unmarshal(ev.Item, &item)
		switch ev.Type {
		case "response.output_item.added":
			if open >= 0 || ev.OutputIndex != items {
				bad("item %d added while %d is open (%d items)", ev.OutputIndex, open, items)
			}
			open, items = items, items+1
			texts, funcs = append(texts, ""), append(funcs, item.Type == "function_call")
			if item.Type == "function_call" {
				r.calls++
			}
		case "response.output_text.delta", "response.function_call_arguments.delta":
			if ev.OutputIndex != open || funcs[open] != (ev.Type == "response.function_call_arguments.delta") {
				bad("%s for item %d, open %d", ev.Type, ev.OutputIndex, open)
			}
			texts[open] += ev.Delta
			if !funcs[open] {
				r.text += ev.Delta
			}
		case "response.output_text.done":
			if ev.OutputIndex != open || ev.Text != texts[open] {
				bad("output_text.done of item %d holds %q, its deltas %q", ev.OutputIndex, ev.Text, texts[open])
			}
		case "response.output_item.done":
			if ev.OutputIndex != open {
				bad("item %d done while %d is open", ev.OutputIndex, open)
			}
			open = -1
		case "response.completed", "response.incomplete":
			if open >= 0 {
				bad("%s with item %d open", ev.Type, open)
			}
			if len(ev.Response.Output) != items {
				bad("the response holds %d items, %d were streamed", len(ev.Response.Output), items)
			}
			for i, it := range ev.Response.Output {
				got := ""
				for _, c := range it.Content {
					got += c.Text
				}
				if !funcs[i] && got != texts[i] {
					bad("the response's item %d holds %q, its deltas %q", i, got, texts[i])
				}
			}
			r.status, r.complete, ended = ev.Response.Status, true, true
			if d := ev.Response.IncompleteDetails; d != nil {
				r.reason = d.Reason
			}
		case "error":
			ended = true
		}
	}
	return r
}

func TestResponsesVerdicts(t *testing.T) {
	rec := responsesRecording(t, "Hello, ", "wor", "ld.", "TOOL", " And ", "more.")
	const all = "Hello, world. And more."
	for _, tc := range []struct {
		name   string
		decide decider
		want   respResult
	}{
		{"continue", func(*openai.Chunk, uint32) wasmhost.ChunkResult { return wasmhost.ChunkResult{} },
			respResult{text: all, status: "completed", calls: 1, complete: true}},
		{"hold everything", func(*openai.Chunk, uint32) wasmhost.ChunkResult { return wasmhost.ChunkResult{Verdict: wasmhost.Hold} },
			respResult{text: all, status: "completed", calls: 1, complete: true}},
		{"replace upper", func(c *openai.Chunk, _ uint32) wasmhost.ChunkResult {
			return wasmhost.ChunkResult{Verdict: wasmhost.Replace, Text: bytes.ToUpper(c.Text)}
		}, respResult{text: strings.ToUpper(all), status: "completed", calls: 1, complete: true}},
		{"hold the tail, release it at the boundary", holdTail(),
			respResult{text: all, status: "completed", calls: 1, complete: true}},
		{"stop at the third delta", stopAt(3, "[x]"),
			respResult{text: "Hello, wor[x]", status: "incomplete", reason: "content_filter", complete: true}},
		{"stop at the tool call", stopAtFlag(wasmhost.ChunkToolCalls, "[x]"),
			respResult{text: "Hello, world.[x]", status: "incomplete", reason: "content_filter", complete: true}},
		{"stop at the end", stopAtFlag(wasmhost.ChunkDone, "[x]"),
			respResult{text: all + "[x]", status: "incomplete", reason: "content_filter", calls: 1, complete: true}},
		{"release at the end", releaseAtEnd("!"),
			respResult{text: all + "!", status: "completed", calls: 1, complete: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := runResponsesScript(t, rec, tc.decide)
			if got := checkResponsesStream(t, out); got != tc.want {
				t.Fatalf("got %+v, want %+v\n%s", got, tc.want, out)
			}
		})
	}
}

// holdTail plays holdback: each text delta's last 2 bytes are held and
// released, with the next text, by a Replace; a boundary releases them.
func holdTail() decider {
	var held []byte
	return func(c *openai.Chunk, flags uint32) wasmhost.ChunkResult {
		if flags&(wasmhost.ChunkToolCalls|wasmhost.ChunkDone) != 0 {
			out := held
			held = nil
			return wasmhost.ChunkResult{Verdict: wasmhost.Replace, Text: out}
		}
		if len(c.Text) == 0 {
			return wasmhost.ChunkResult{}
		}
		all := append(append([]byte(nil), held...), c.Text...)
		k := max(len(all)-2, 0)
		held = append([]byte(nil), all[k:]...)
		return wasmhost.ChunkResult{Verdict: wasmhost.Replace, Text: all[:k]}
	}
}

func stopAt(n int, text string) decider {
	seen := 0
	return func(c *openai.Chunk, _ uint32) wasmhost.ChunkResult {
		if len(c.Text) > 0 {
			if seen++; seen == n {
				return wasmhost.ChunkResult{Verdict: wasmhost.Stop, Text: []byte(text)}
			}
		}
		return wasmhost.ChunkResult{}
	}
}

func stopAtFlag(f uint32, text string) decider {
	return func(_ *openai.Chunk, flags uint32) wasmhost.ChunkResult {
		if flags&f != 0 {
			return wasmhost.ChunkResult{Verdict: wasmhost.Stop, Text: []byte(text)}
		}
		return wasmhost.ChunkResult{}
	}
}

func releaseAtEnd(text string) decider {
	return func(_ *openai.Chunk, flags uint32) wasmhost.ChunkResult {
		if flags&wasmhost.ChunkDone != 0 {
			return wasmhost.ChunkResult{Verdict: wasmhost.Replace, Text: []byte(text)}
		}
		return wasmhost.ChunkResult{}
	}
}

// FuzzResponsesVerdicts: whatever verdicts a plugin gives, event by
// event, the client gets a well-formed Responses stream (the grammar
// checkResponsesStream checks) that ends with the terminal event.
func FuzzResponsesVerdicts(f *testing.F) {
	f.Add([]byte{0, 1, 2, 0, 3}, uint8(0))
	f.Add([]byte{1, 1, 1, 1, 0, 2, 2}, uint8(1))
	f.Add([]byte{2, 0, 0, 0, 0, 0, 0, 0, 3}, uint8(2))
	recs := [][]byte{
		responsesRecording(f, "Hello, ", "wor", "ld.", "TOOL", " And ", "more."),
		responsesRecording(f, "TOOL", "TOOL"),
		responsesRecording(f, "a", "b", "TOOL"),
	}
	f.Fuzz(func(t *testing.T, verdicts []byte, which uint8) {
		rec := recs[int(which)%len(recs)]
		i := 0
		out := runResponsesScript(t, rec, func(c *openai.Chunk, _ uint32) wasmhost.ChunkResult {
			v := byte(0)
			if i < len(verdicts) {
				v = verdicts[i]
			}
			i++
			text := []byte(fmt.Sprintf("<%d>", i))
			switch v % 4 {
			case 1:
				return wasmhost.ChunkResult{Verdict: wasmhost.Hold}
			case 2:
				return wasmhost.ChunkResult{Verdict: wasmhost.Replace, Text: text}
			case 3:
				return wasmhost.ChunkResult{Verdict: wasmhost.Stop, Text: text}
			}
			return wasmhost.ChunkResult{}
		})
		if r := checkResponsesStream(t, out); !r.complete {
			t.Fatalf("the stream did not end with a response:\n%s", out)
		}
	})
}

// TestResponsesStopKeepsUsage: a stop at the terminal event ends the
// response with the usage the upstream reported; a stop before it, with
// none.
func TestResponsesStopKeepsUsage(t *testing.T) {
	rec := responsesRecording(t, "Hello")
	end := string(runResponsesScript(t, rec, stopAtFlag(wasmhost.ChunkDone, "!")))
	if !strings.Contains(end, `"usage":{"input_tokens":3,"input_tokens_details":{"cached_tokens":0},"output_tokens":9`) {
		t.Errorf("a stop at the end lost the usage:\n%s", end)
	}
	early := string(runResponsesScript(t, rec, stopAt(1, "!")))
	if !strings.Contains(early, `"usage":null`) {
		t.Errorf("a stop before the end reported a usage:\n%s", early)
	}
}
