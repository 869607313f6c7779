package main

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tollgate/tollgate/sdk/plugintest"
	"github.com/tollgate/tollgate/sdk/wasmhost"
)

// chat is a chat body with one user message of text.
func chat(extra, text string) string {
	return `{"model":"m-1",` + extra + `"messages":[{"role":"user","content":` + strconv.Quote(text) + `}]}`
}

// textBound is the prompt bound of a body without images, tools or
// unbounded parts: its bytes and the template tokens of its messages and
// of the reply.
func textBound(body string, messages int64) int64 {
	return int64(len(body)) + wasmhost.MessageTokens*(messages+1)
}

// What the request phase holds: the host's prompt bound and the output
// bound, and whether the hold grows with the reply.
func TestReserveBound(t *testing.T) {
	chinese := strings.Repeat("预算必须是可证明的上界。", 40)
	image := `{"model":"m-1","messages":[{"role":"user","content":[{"type":"text","text":"what is it?"},` +
		`{"type":"image_url","image_url":{"url":"data:image/png;base64,` + strings.Repeat("QUJD", 500) + `"}}]}]}`
	file := `{"model":"m-1","messages":[{"role":"user","content":[{"type":"file","file":{"file_id":"file-1"}}]}]}`
	known := wasmhost.ModelFacts{Known: true, ContextWindow: 128_000, MaxOutputTokens: 16_384, ImageTokens: 1_500}
	reasoning := wasmhost.ModelFacts{Known: true, ContextWindow: 200_000, MaxOutputTokens: 100_000, Reasoning: true}
	tests := []struct {
		name, config string
		req          plugintest.Request
		model        wasmhost.ModelFacts
		prompt       int64
		completion   int64
		grows        bool
		rejected     string // the refusal's code
	}{
		{"max_tokens", `{}`, plugintest.Request{Body: chat(`"max_tokens":50,`, chinese)}, known,
			textBound(chat(`"max_tokens":50,`, chinese), 1), 50, false, ""},
		{"n choices", `{}`, plugintest.Request{Body: chat(`"max_tokens":50,"n":3,`, "hi")}, known,
			textBound(chat(`"max_tokens":50,"n":3,`, "hi"), 1), 150, false, ""},
		{"not streamed, the model's maximum", `{}`, plugintest.Request{Body: chat("", chinese)}, known,
			textBound(chat("", chinese), 1), 16_384, false, ""},
		{"not streamed, maximum unknown", `{"default_max_tokens":777}`, plugintest.Request{Body: chat("", "hi")}, wasmhost.ModelFacts{},
			textBound(chat("", "hi"), 1), 777, false, ""},
		{"not streamed, maximum unknown, refused", `{"unbounded_output":"reject"}`, plugintest.Request{Body: chat("", "hi")}, wasmhost.ModelFacts{},
			0, 0, false, "max_tokens_required"},
		{"stream grows", `{"default_max_tokens":300}`, plugintest.Request{Body: chat(`"stream":true,`, "hi")}, known,
			textBound(chat(`"stream":true,`, "hi"), 1), 300, true, ""},
		{"stream of a reasoning model", `{}`, plugintest.Request{Body: chat(`"stream":true,`, "hi")}, reasoning,
			textBound(chat(`"stream":true,`, "hi"), 1), 100_000, false, ""},
		{"image at the model's tokens", `{}`, plugintest.Request{Body: image, MaxTokens: 10}, known,
			textBound(image, 1) - int64(len("data:image/png;base64,")+2000) + 1_500, 10, false, ""},
		{"image at the default", `{}`, plugintest.Request{Body: image, MaxTokens: 10}, wasmhost.ModelFacts{Known: true},
			textBound(image, 1) - int64(len("data:image/png;base64,")+2000) + wasmhost.DefaultImageTokens, 10, false, ""},
		{"prompt capped by the context window", `{}`, plugintest.Request{Body: chat(`"max_tokens":1,`, chinese)},
			wasmhost.ModelFacts{Known: true, ContextWindow: 100}, 100, 1, false, ""},
		{"embeddings have no output", `{"unbounded_output":"reject"}`, plugintest.Request{Endpoint: "embeddings", Body: `{"model":"m-1","input":"数据"}`}, wasmhost.ModelFacts{},
			textBound(`{"model":"m-1","input":"数据"}`, 1), 0, false, ""},
		{"a file: the context window", `{}`, plugintest.Request{Body: file, MaxTokens: 10}, known, 128_000, 10, false, ""},
		{"a file, no context window", `{"unbounded_prompt_tokens":4321}`, plugintest.Request{Body: file, MaxTokens: 10}, wasmhost.ModelFacts{},
			4321, 10, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := load(t, tt.config, "ok 1 1", nil)
			p.Services.Models = map[string]wasmhost.ModelFacts{"m-1": tt.model}
			p.Services.Handle("budget.extend", func([]byte) ([]byte, error) { return []byte("ok 1 1"), nil })
			tt.req.Tenant = acme
			streamed := strings.Contains(tt.req.Body, `"stream":true`)
			var sess *plugintest.Session
			var res plugintest.RequestResult
			if streamed {
				sess = p.Session(tt.req) // the request phase, then events
				res = sess.Request()
			} else {
				res = p.Request(tt.req)
			}
			if res.Err != nil {
				t.Fatal(res.Err)
			}
			calls := started(t, p)
			if tt.rejected != "" {
				if !res.Rejected || res.Code != tt.rejected || len(calls) != 0 {
					t.Fatalf("got %+v, calls %+v; want refused with %s before any reservation", res, calls, tt.rejected)
				}
				return
			}
			want := fmt.Sprintf("%d %d 900000", tt.prompt, tt.completion)
			if res.Rejected || len(calls) != 1 || calls[0].Request != want {
				t.Fatalf("got %+v, calls %+v; want one reservation %q", res, calls, want)
			}
			if !streamed {
				return
			}
			// A growing hold extends during the stream; another does not.
			sess.Send(plugintest.Event{Text: strings.Repeat("x", 400)})
			extended := len(started(t, p)) > 1
			if extended != tt.grows {
				t.Errorf("extended %v, want %v (calls %+v)", extended, tt.grows, started(t, p))
			}
		})
	}
}

// A growing stream counts every byte as a token, plus one per event: it
// holds ahead of that count, and when the budget stops covering more, what
// was streamed is still within the hold.
func TestStreamHoldsBytes(t *testing.T) {
	deltas := make([]string, 0, 200)
	for i := range 200 {
		switch i % 4 {
		case 0:
			deltas = append(deltas, "预算是上界") // 15 bytes, 5 runes
		case 1:
			deltas = append(deltas, "deadbeef0123456789abcdef")
		case 2:
			deltas = append(deltas, "🎉🎉")
		default:
			deltas = append(deltas, "func f() { return }\n")
		}
	}
	for _, budget := range []int{0, 1, 3, 10, 1000} { // extensions the counter admits
		t.Run(fmt.Sprint(budget), func(t *testing.T) {
			p := load(t, `{"default_max_tokens":300,"extend_tokens":100}`, "ok 1 1", nil)
			p.Services.Models = map[string]wasmhost.ModelFacts{"m-1": {Known: true}}
			var held int64 = 300
			admitted := 0
			p.Services.Handle("budget.extend", func(req []byte) ([]byte, error) {
				if admitted == budget {
					return []byte("insufficient 100 0"), nil
				}
				admitted++
				more, _ := strconv.ParseInt(strings.Fields(string(req))[0], 10, 64)
				held += more
				return []byte("ok 100 1"), nil
			})
			sess := p.Session(plugintest.Request{Body: chat(`"stream":true,`, "hi"), Tenant: acme})
			if res := sess.Request(); res.Rejected || res.Err != nil {
				t.Fatalf("%+v", res)
			}
			var used int64
			var streamed strings.Builder
			for _, d := range deltas {
				st := sess.Send(plugintest.Event{Text: d, ToolCalls: []plugintest.ToolCallDelta{{Arguments: `{"a":1}`}}})
				if st.Err != nil {
					t.Fatal(st.Err)
				}
				if st.Verdict == wasmhost.Stop {
					break
				}
				// What the upstream sent is billed: text, arguments
				// and one token for the event.
				used += int64(len(d)+len(`{"a":1}`)) + 1
				streamed.WriteString(d)
				if used > held {
					t.Fatalf("%d tokens streamed, more than the %d held", used, held)
				}
			}
			cut := budget < 1000
			if sess.Stopped() != cut {
				t.Fatalf("stopped %v, want %v", sess.Stopped(), cut)
			}
			if !cut && streamed.Len() != 200*len(strings.Join(deltas[:4], ""))/4 {
				t.Fatalf("streamed %d bytes, want all", streamed.Len())
			}
			if !utf8.ValidString(streamed.String()) {
				t.Errorf("the reply was cut inside a character")
			}
		})
	}
}
