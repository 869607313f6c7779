package stream

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/gateway/internal/anthropic"
	"github.com/tollgate/tollgate/gateway/internal/gemini"
	"github.com/tollgate/tollgate/gateway/internal/openai"
	"github.com/tollgate/tollgate/gateway/internal/sse"
	"github.com/tollgate/tollgate/sdk/wasmhost"
)

// decider plays a chunk plugin: the verdict for one event a plugin reads.
type decider func(c *openai.Chunk, flags uint32) wasmhost.ChunkResult

// runNativeScript sends a recorded Messages API stream through a native
// stream whose plugin verdicts come from decide, and returns what the
// client would receive.
func runNativeScript(t *testing.T, rec []byte, decide decider) []byte {
	t.Helper()
	st := &Stream{up: &Counters{TTFT: -1}, id: []byte("req_test"), model: []byte("claude-x"), cancel: func(error) {}}
	st.nat.reset()
	rd := sse.NewReader(bytes.NewReader(rec), 0)
	for !st.finished {
		raw, err := rd.Next()
		if errors.Is(err, io.EOF) {
			st.flushHeld()
			st.flushDeferred()
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if ev, flags, run := st.readNative(raw, true); run {
			st.applyNative(raw, ev, st.chunk.Text, decide(&st.chunk, flags))
		}
	}
	return st.out
}

// nativeResult is a Messages API stream checked against the event
// grammar: message_start first; content blocks at indexes 0, 1, ... each
// started, given deltas of its own type only, and stopped before the next;
// one message_delta once every block is stopped; message_stop last; or an
// error event ending it. Pings, comments and unknown events go anywhere.
type nativeResult struct {
	text, stopReason string
	tools            int
	complete, failed bool
}

func checkNativeStream(t *testing.T, out []byte) nativeResult {
	t.Helper()
	var r nativeResult
	started, open, next, ended, openType := false, -1, 0, false, ""
	bad := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("invalid stream: "+format+"\n%s", append(args, out)...)
	}
	for _, raw := range strings.SplitAfter(string(out), "\n\n") {
		data, ok := sse.AppendData(nil, []byte(raw))
		if !ok {
			continue
		}
		var ev struct {
			Type         string `json:"type"`
			Index        int    `json:"index"`
			ContentBlock struct {
				Type, Text string
			} `json:"content_block"`
			Delta struct {
				Type       string  `json:"type"`
				Text       string  `json:"text"`
				StopReason *string `json:"stop_reason"`
			} `json:"delta"`
		}
		if err := json.Unmarshal(data, &ev); err != nil {
			bad("%q: %v", data, err)
		}
		if name := anthropic.EventName([]byte(raw)); string(name) != ev.Type {
			bad("event name %q for type %q", name, ev.Type)
		}
		if r.complete || r.failed {
			bad("%s after the end", ev.Type)
		}
		switch ev.Type {
		case "message_start":
			if started {
				bad("a second message_start")
			}
			started = true
		case "content_block_start":
			if !started || open >= 0 || ended || ev.Index != next {
				bad("content_block_start %d (open %d, next %d)", ev.Index, open, next)
			}
			open, openType, next = ev.Index, ev.ContentBlock.Type, next+1
			if openType == "tool_use" {
				r.tools++
			}
			r.text += ev.ContentBlock.Text
		case "content_block_delta":
			if ev.Index != open || (ev.Delta.Type == "text_delta") != (openType == "text") {
				bad("%s for block %d, open %d (%s)", ev.Delta.Type, ev.Index, open, openType)
			}
			r.text += ev.Delta.Text
		case "content_block_stop":
			if ev.Index != open {
				bad("stop of block %d, open %d", ev.Index, open)
			}
			open = -1
		case "message_delta":
			if !started || open >= 0 || ended {
				bad("message_delta (open %d, twice %v)", open, ended)
			}
			ended = true
			if ev.Delta.StopReason != nil {
				r.stopReason = *ev.Delta.StopReason
			}
		case "message_stop":
			if !ended {
				bad("message_stop without message_delta")
			}
			r.complete = true
		case "error":
			r.failed = true
		}
	}
	return r
}

// recordedText is the text a recording's text blocks carry.
func recordedText(t *testing.T, rec []byte) string {
	t.Helper()
	var v anthropic.ChunkView
	v.Reset()
	var c openai.Chunk
	text := ""
	rd := sse.NewReader(bytes.NewReader(rec), 0)
	for {
		raw, err := rd.Next()
		if err != nil {
			return text
		}
		if d, ok := sse.AppendData(nil, raw); ok {
			if _, err := v.Parse(d, anthropic.EventName(raw), &c); err == nil {
				text += string(c.Text)
			}
		}
	}
}

// sameText compares texts as runes: re-encoded text has U+FFFD where the
// upstream sent invalid UTF-8.
func sameText(a, b string) bool { return string([]rune(a)) == string([]rune(b)) }

func TestNativeStreamVerdicts(t *testing.T) {
	files, _ := filepath.Glob("../../anthropic/testdata/*.sse")
	if len(files) < 6 {
		t.Fatalf("%d recordings", len(files))
	}
	cont := wasmhost.ChunkResult{Verdict: wasmhost.Continue}
	stop := func(text string) wasmhost.ChunkResult {
		return wasmhost.ChunkResult{Verdict: wasmhost.Stop, Text: []byte(text), FinishReason: []byte("content_filter")}
	}
	for _, file := range files {
		rec, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimSuffix(filepath.Base(file), ".sse")
		failing := strings.HasPrefix(name, "error")
		text := recordedText(t, rec)
		hasTool := bytes.Contains(rec, []byte(`"tool_use"`))
		t.Run(name, func(t *testing.T) {
			t.Run("continue: the upstream's bytes", func(t *testing.T) {
				if out := runNativeScript(t, rec, func(*openai.Chunk, uint32) wasmhost.ChunkResult { return cont }); !bytes.Equal(out, rec) {
					t.Errorf("got\n%s", out)
				}
			})
			t.Run("hold text, release it at boundaries", func(t *testing.T) {
				// What the holdback guard does: every text delta is kept
				// back and released with the next tool call, finish or end.
				var held []byte
				out := runNativeScript(t, rec, func(c *openai.Chunk, flags uint32) wasmhost.ChunkResult {
					switch {
					case flags&wasmhost.ChunkText != 0:
						held = append(held, c.Text...)
						return wasmhost.ChunkResult{Verdict: wasmhost.Replace, Text: []byte{}}
					case flags&(wasmhost.ChunkToolCalls|wasmhost.ChunkFinish|wasmhost.ChunkDone) != 0 && len(held) > 0:
						r := wasmhost.ChunkResult{Verdict: wasmhost.Replace, Text: held}
						held = nil
						return r
					}
					return cont
				})
				r := checkNativeStream(t, out)
				if !failing && (!sameText(r.text, text) || !r.complete) {
					t.Errorf("text %q, want %q (complete %v)\n%s", r.text, text, r.complete, out)
				}
			})
			t.Run("release everything at the end", func(t *testing.T) {
				var held []byte
				out := runNativeScript(t, rec, func(c *openai.Chunk, flags uint32) wasmhost.ChunkResult {
					held = append(held, c.Text...)
					if flags&wasmhost.ChunkDone != 0 {
						return wasmhost.ChunkResult{Verdict: wasmhost.Replace, Text: held}
					}
					if len(c.Text) > 0 {
						return wasmhost.ChunkResult{Verdict: wasmhost.Replace, Text: []byte{}}
					}
					return cont
				})
				if r := checkNativeStream(t, out); !failing && (!sameText(r.text, text) || !r.complete) {
					t.Errorf("text %q, want %q\n%s", r.text, text, out)
				}
			})
			t.Run("hold everything, stop at the finish", func(t *testing.T) {
				out := runNativeScript(t, rec, func(c *openai.Chunk, flags uint32) wasmhost.ChunkResult {
					if flags&wasmhost.ChunkFinish != 0 {
						return stop("[stopped]")
					}
					return wasmhost.ChunkResult{Verdict: wasmhost.Hold}
				})
				if r := checkNativeStream(t, out); !failing && (r.text != "[stopped]" || r.stopReason != "refusal" || !r.complete) {
					t.Errorf("%+v\n%s", r, out)
				}
			})
			t.Run("stop at the first event", func(t *testing.T) {
				out := runNativeScript(t, rec, func(*openai.Chunk, uint32) wasmhost.ChunkResult { return stop("[no]") })
				if r := checkNativeStream(t, out); r.text != "[no]" || r.stopReason != "refusal" || !r.complete {
					t.Errorf("%+v\n%s", r, out)
				}
			})
			for _, k := range []int{1, 2, 3} {
				t.Run(fmt.Sprintf("stop at tool-call event %d", k), func(t *testing.T) {
					if !hasTool {
						return
					}
					seen, before := 0, ""
					out := runNativeScript(t, rec, func(c *openai.Chunk, flags uint32) wasmhost.ChunkResult {
						if flags&wasmhost.ChunkToolCalls != 0 {
							if seen++; seen == k {
								return stop("[tool stopped]")
							}
						}
						before += string(c.Text)
						return cont
					})
					r := checkNativeStream(t, out)
					if seen >= k && (r.text != before+"[tool stopped]" || r.stopReason != "refusal" || !r.complete) {
						t.Errorf("%+v\n%s", r, out)
					}
				})
			}
		})
	}
}

// inputExchange records what a stream tells its exchange.
type inputExchange struct{ inputs []int64 }

func (x *inputExchange) StreamClosed(uint32, openai.Usage) {}
func (x *inputExchange) InputKnown(n int64)                { x.inputs = append(x.inputs, n) }

// message_start's input count (cache reads and writes included) reaches
// the exchange once, before any text, on a native stream and on one
// translated into chat chunks; so does Gemini's promptTokenCount.
func TestInputKnownAtMessageStart(t *testing.T) {
	rec := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-x\",\"content\":[],\"usage\":{\"input_tokens\":120,\"cache_read_input_tokens\":30,\"cache_creation_input_tokens\":5,\"output_tokens\":1}}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"hi\"}}\n\n" +
		"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"input_tokens\":120,\"output_tokens\":7}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	t.Run("native", func(t *testing.T) {
		x := &inputExchange{}
		st := &Stream{x: x, up: &Counters{TTFT: -1}, id: []byte("req_test"), model: []byte("claude-x"), cancel: func(error) {}}
		st.nat.reset()
		rd := sse.NewReader(strings.NewReader(rec), 0)
		for {
			raw, err := rd.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			st.readNative(raw, false)
			if st.up.Text > 0 && len(x.inputs) == 0 {
				t.Fatal("text came before the input count")
			}
		}
		if len(x.inputs) != 1 || x.inputs[0] != 155 {
			t.Fatalf("inputs %v, want [155]", x.inputs)
		}
	})
	t.Run("gemini", func(t *testing.T) {
		x := &inputExchange{}
		tr := gemini.NewStreamReader(0)
		tr.Reset(strings.NewReader("data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"hi\"}],\"role\":\"model\"}}],\"usageMetadata\":{\"promptTokenCount\":155,\"cachedContentTokenCount\":100,\"candidatesTokenCount\":1}}\r\n\r\n"+
			"data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\" there\"}],\"role\":\"model\"},\"finishReason\":\"STOP\"}],\"usageMetadata\":{\"promptTokenCount\":155,\"candidatesTokenCount\":2}}\r\n\r\n"),
			"gemini-x", "", 0, true)
		st := &Stream{x: x, tr: tr}
		rd := sse.NewReader(tr, 0)
		for {
			if _, err := rd.Next(); err != nil {
				break
			}
			st.reportInput()
		}
		if len(x.inputs) != 1 || x.inputs[0] != 155 {
			t.Fatalf("inputs %v, want [155]", x.inputs)
		}
	})
	t.Run("translated", func(t *testing.T) {
		x := &inputExchange{}
		tr := anthropic.NewStreamReader(0)
		tr.Reset(strings.NewReader(rec), "claude-x", "", 0, true)
		st := &Stream{x: x, tr: tr}
		rd := sse.NewReader(tr, 0)
		for {
			if _, err := rd.Next(); err != nil {
				break
			}
			st.reportInput()
		}
		if len(x.inputs) != 1 || x.inputs[0] != 155 {
			t.Fatalf("inputs %v, want [155]", x.inputs)
		}
	})
}
