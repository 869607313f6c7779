package proxy

import (
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/pkoukk/tiktoken-go"
	loader "github.com/pkoukk/tiktoken-go-loader"

	"github.com/tollgate/tollgate/gateway/internal/openai"
	"github.com/tollgate/tollgate/sdk/wasmhost"
)

// The prompt bound against real tokenizers: OpenAI's cl100k_base and
// o200k_base (byte-level BPE tables shipped with tiktoken-go-loader, so the
// test runs offline). What a provider tokenizes is overestimated by
// tokenizing every string and key of the body on its own (merges across
// strings are lost, keys are not sent) but image data URLs, counting every
// number as a token,
// adding 3 tokens per message and 3 for the reply (OpenAI's template), 350
// for a tool-use system prompt when tools are declared (Anthropic's), and
// each image at the model's ImageTokens. The bound must not be below that.

// boundCorpus are bodies whose text is far from four bytes a token.
func boundCorpus() []struct {
	name string
	ep   openai.Endpoint
	body string
} {
	rng := rand.New(rand.NewPCG(25, 1))
	randomRunes := func(n int, lo, hi rune) string {
		var b strings.Builder
		for b.Len() < n {
			r := lo + rng.Int32N(hi-lo)
			if utf8.ValidRune(r) {
				b.WriteRune(r)
			}
		}
		return b.String()
	}
	hex := func(n int) string {
		const digits = "0123456789abcdef"
		b := make([]byte, n)
		for i := range b {
			b[i] = digits[rng.IntN(16)]
		}
		return string(b)
	}
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	chat := func(msgs ...string) string {
		parts := make([]string, len(msgs))
		for i, m := range msgs {
			role := "user"
			if i%2 == 1 {
				role = "assistant"
			}
			parts[i] = `{"role":"` + role + `","content":` + q(m) + `}`
		}
		return `{"model":"m","messages":[` + strings.Join(parts, ",") + `]}`
	}
	code := strings.Repeat("func (s *Server) handle(w http.ResponseWriter, r *http.Request) {\n\tif err := s.check(r); err != nil {\n\t\thttp.Error(w, err.Error(), 400)\n\t}\n}\n", 30)
	chinese := strings.Repeat("预算必须是可以证明的上界，否则并发请求会花掉比预算更多的钱。", 60)
	emoji := strings.Repeat("👩‍👩‍👧‍👦🏳️‍🌈🎉🧑🏽‍💻", 80)
	tools := `{"model":"m","messages":[{"role":"user","content":"weather?"}],"tools":[` +
		`{"type":"function","function":{"name":"get_weather","description":"天气 for a city","parameters":{"type":"object","properties":{"city":{"type":"string","enum":["巴黎","東京","القاهرة","Zürich","a","b","c","d"]},"unit":{"type":"string","enum":["c","f"]}},"required":["city"]}}},` +
		`{"type":"function","function":{"name":"run","parameters":{"type":"object","properties":{"cmd":{"type":"string","description":` + q(hex(300)) + `}}}}}]}`
	image := `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":` + q(chinese[:300]) + `},` +
		`{"type":"image_url","image_url":{"url":"data:image/png;base64,` + strings.Repeat("iVBORw0KGgo", 300) + `","detail":"high"}}]}]}`
	return []struct {
		name string
		ep   openai.Endpoint
		body string
	}{
		{"english", openai.ChatCompletions, chat("What is the capital of France? Answer in one word.")},
		{"chinese", openai.ChatCompletions, chat(chinese, "好的。", chinese)},
		{"hex", openai.ChatCompletions, chat(hex(20_000))},
		{"code", openai.ChatCompletions, chat(code)},
		{"emoji", openai.ChatCompletions, chat(emoji)},
		{"escaped emoji", openai.ChatCompletions, `{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat(`\ud83c\udf89\u4e2d`, 500) + `"}]}`},
		{"plane 2 ideographs", openai.ChatCompletions, chat(randomRunes(12_000, 0x20000, 0x2A6DF))},
		{"random code points", openai.ChatCompletions, chat(randomRunes(12_000, 0x80, 0x10FFFF))},
		{"combining marks", openai.ChatCompletions, chat(strings.Repeat("a\u0301\u0302\u0303\u0304", 1000))},
		{"whitespace and digits", openai.ChatCompletions, chat(strings.Repeat(" \t\n", 1000) + strings.Repeat("9", 5000))},
		{"many tiny messages", openai.ChatCompletions, chat(strings.Split(strings.Repeat("x", 200), "")...)},
		{"tools", openai.ChatCompletions, tools},
		{"image", openai.ChatCompletions, image},
		{"completions token arrays", openai.Completions, `{"model":"m","prompt":[[1,2,3],[100000,99999,4]]}`},
		{"embeddings strings", openai.Embeddings, `{"model":"m","input":[` + q(hex(999)) + `,` + q(chinese) + `]}`},
		{"messages api", endpointMessages, `{"model":"m","max_tokens":5,"system":` + q(code) + `,"messages":[{"role":"user","content":[{"type":"text","text":` + q(emoji) + `},{"type":"tool_result","tool_use_id":"t","content":` + q(hex(3000)) + `}]}],"tools":[{"name":"f","input_schema":{"type":"object"}}]}`},
	}
}

// tokenizedCount overestimates what a provider counts for body with enc.
func tokenizedCount(t *testing.T, enc *tiktoken.Tiktoken, body []byte, f wasmhost.RequestFacts, imageTokens int64) int64 {
	t.Helper()
	var n int64
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			if strings.HasPrefix(v, "data:image/") {
				return // an image's payload: counted as an image
			}
			n += int64(len(enc.Encode(v, nil, nil)))
		case json.Number:
			n++
		case map[string]any:
			for k, e := range v {
				n += int64(len(enc.Encode(k, nil, nil)))
				walk(e)
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	walk(v)
	n += 3*f.Messages + 3 + f.Bound.Images*imageTokens
	if f.Bound.Tools > 0 {
		n += 350
	}
	return n
}

func TestPromptBoundAboveTokenizers(t *testing.T) {
	tiktoken.SetBpeLoader(loader.NewOfflineLoader())
	const imageTokens = 1_500
	for _, name := range []string{"cl100k_base", "o200k_base"} {
		enc, err := tiktoken.GetEncoding(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range boundCorpus() {
			t.Run(name+"/"+c.name, func(t *testing.T) {
				f, ok := gatewayFacts([]byte(c.body), c.ep)
				if !ok {
					t.Fatal("the gateway refuses the body")
				}
				bound, ok := wasmhost.PromptTokensBound(f.Bound, f.Messages, wasmhost.ModelFacts{ImageTokens: imageTokens})
				if !ok {
					t.Fatal("no bound")
				}
				tokens := tokenizedCount(t, enc, []byte(c.body), f, imageTokens)
				if bound < tokens {
					t.Fatalf("bound %d < %d tokens", bound, tokens)
				}
				if est := f.PromptTokens; est < tokens {
					t.Logf("bound %d ≥ %d tokens (%.1f×); the chars/4 estimate %d is below", bound, tokens, float64(bound)/float64(tokens), est)
				}
			})
		}
	}
}

// boundFactsCases are bodies with images, files, tools and choices, and
// their bound facts.
var boundFactsCases = []struct {
	name string
	ep   openai.Endpoint
	body string
	want wasmhost.BoundFacts // PromptBytes relative to the body: see below
	// payload is how many bytes of the body are image payloads.
	payload int64
}{
	{"chat image url and data", openai.ChatCompletions,
		`{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https:\/\/x\/a.png"}},{"type":"image_url","image_url":"data:` + strings.Repeat("A", 100) + `"}]}]}`,
		wasmhost.BoundFacts{Images: 2, Choices: 1}, 15 + 105}, // unescaped: https://x/a.png
	{"chat file, audio by id, web search", openai.ChatCompletions,
		`{"model":"m","web_search_options":{},"messages":[{"role":"user","content":[{"type":"file","file":{"file_id":"f"}}]},{"role":"assistant","audio":{"id":"a"}}]}`,
		wasmhost.BoundFacts{Unbounded: 3, Choices: 1}, 0},
	{"chat tools and n", openai.ChatCompletions,
		`{"model":"m","n":4,"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"a"}},{"type":"custom","custom":{"name":"b"}}],"functions":[{"name":"c"}]}`,
		wasmhost.BoundFacts{Tools: 3, Choices: 4}, 0},
	{"repeated content counts every occurrence", openai.ChatCompletions,
		`{"model":"m","messages":[{"role":"user","content":"x","content":[{"type":"image_url","image_url":{"url":"u"}}]}]}`,
		wasmhost.BoundFacts{Images: 1, Choices: 1}, 1},
	{"completions best_of", openai.Completions, `{"model":"m","prompt":"x","n":2,"best_of":5}`,
		wasmhost.BoundFacts{Choices: 5}, 0},
	{"messages images, documents, tools", endpointMessages,
		`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[` +
			`{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` + strings.Repeat("A", 50) + `"}},` +
			`{"type":"tool_result","tool_use_id":"t","content":[{"type":"image","source":{"type":"url","url":"https://x/y.png"}}]},` +
			`{"type":"document","source":{"type":"text","media_type":"text/plain","data":"plain"}},` +
			`{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBE"}}]}],` +
			`"tools":[{"name":"f","input_schema":{}},{"type":"bash_20250124","name":"bash"},{"type":"web_search_20250305","name":"web_search"}]}`,
		wasmhost.BoundFacts{Images: 2, Unbounded: 2, Tools: 3, BuiltinTools: 1, Choices: 1}, 50 + 15},
}

// The bound facts of boundFactsCases, as the gateway and
// wasmhost.ReadRequestFacts read them.
func TestBoundFacts(t *testing.T) {
	for _, tt := range boundFactsCases {
		t.Run(tt.name, func(t *testing.T) {
			want := tt.want
			want.PromptBytes = int64(len(tt.body)) - tt.payload
			gw, ok := gatewayFacts([]byte(tt.body), tt.ep)
			if !ok {
				t.Fatal("the gateway refuses the body")
			}
			if gw.Bound != want {
				t.Errorf("gateway: %+v, want %+v", gw.Bound, want)
			}
			got, _ := wasmhost.ReadRequestFacts([]byte(tt.body), string(endpointNames[tt.ep]))
			if got.Bound != want {
				t.Errorf("ReadRequestFacts: %+v, want %+v", got.Bound, want)
			}
		})
	}
}

// The bound grows with what the body does not hold and is capped by the
// context window.
func TestPromptTokensBound(t *testing.T) {
	tests := []struct {
		b        wasmhost.BoundFacts
		messages int64
		m        wasmhost.ModelFacts
		want     int64
		ok       bool
	}{
		{wasmhost.BoundFacts{PromptBytes: 100}, 2, wasmhost.ModelFacts{}, 100 + 3*wasmhost.MessageTokens, true},
		{wasmhost.BoundFacts{PromptBytes: 100, Tools: 2, BuiltinTools: 1}, 0, wasmhost.ModelFacts{},
			100 + wasmhost.MessageTokens + wasmhost.ToolUseTokens + wasmhost.BuiltinToolTokens, true},
		{wasmhost.BoundFacts{PromptBytes: 10, Images: 3}, 0, wasmhost.ModelFacts{}, 10 + wasmhost.MessageTokens + 3*wasmhost.DefaultImageTokens, true},
		{wasmhost.BoundFacts{PromptBytes: 10, Images: 3}, 0, wasmhost.ModelFacts{ImageTokens: 100}, 10 + wasmhost.MessageTokens + 300, true},
		{wasmhost.BoundFacts{PromptBytes: 1 << 20}, 0, wasmhost.ModelFacts{ContextWindow: 4096}, 4096, true},
		{wasmhost.BoundFacts{PromptBytes: 10, Unbounded: 1}, 0, wasmhost.ModelFacts{ContextWindow: 4096}, 4096, true},
		{wasmhost.BoundFacts{PromptBytes: 10, Unbounded: 1}, 0, wasmhost.ModelFacts{}, 0, false},
		{wasmhost.BoundFacts{PromptBytes: 10, Images: 1 << 62}, 0, wasmhost.ModelFacts{ImageTokens: 1 << 62}, 0, false},
	}
	for i, tt := range tests {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			got, ok := wasmhost.PromptTokensBound(tt.b, tt.messages, tt.m)
			if got != tt.want || ok != tt.ok {
				t.Fatalf("PromptTokensBound(%+v, %d, %+v) = %d, %v; want %d, %v", tt.b, tt.messages, tt.m, got, ok, tt.want, tt.ok)
			}
		})
	}
}
