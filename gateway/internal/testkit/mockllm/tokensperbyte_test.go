package mockllm

import (
	"encoding/json"
	"strings"
	"testing"
)

// With tokens per byte, usage counts the bytes of the prompt's text (plus
// 4 per message) and of the reply's text, streamed or not, and max_tokens
// caps the reply's bytes.
func TestTokensPerByte(t *testing.T) {
	_, ts, c := start(t, Config{Usage: true})
	tests := []struct {
		name, path, body string
		hdr              map[string]string
		prompt           int
		completion       int
	}{
		{"chat, chinese", "/v1/chat/completions",
			`{"model":"m","messages":[{"role":"system","content":"预算"},{"role":"user","content":[{"type":"text","text":"deadbeef"},{"type":"image_url","image_url":{"url":"x"}}]}]}`,
			map[string]string{HeaderTokensPerByte: "true", HeaderText: "h%C3%A9llo"}, 6 + 4 + 8 + 4, 6},
		{"chat stream", "/v1/chat/completions",
			`{"model":"m","stream":true,"messages":[{"role":"user","content":"🎉"}]}`,
			map[string]string{HeaderTokensPerByte: "true", HeaderText: "%E4%B8%AD%E6%96%87", HeaderChunkSize: "3"}, 4 + 4, 6},
		{"generated tokens", "/v1/chat/completions",
			`{"model":"m","messages":[{"role":"user","content":"x"}]}`,
			map[string]string{HeaderTokensPerByte: "true", HeaderTokens: "12"}, 1 + 4, 10*len("tok0 ") + 2*len("tok10 ")},
		{"max_tokens caps the bytes", "/v1/chat/completions",
			`{"model":"m","max_tokens":7,"messages":[{"role":"user","content":"x"}]}`,
			map[string]string{HeaderTokensPerByte: "true", HeaderText: "abcdefghij", HeaderChunkSize: "3"}, 1 + 4, 6},
		{"completions", "/v1/completions", `{"model":"m","prompt":"abcdef"}`,
			map[string]string{HeaderTokensPerByte: "true", HeaderText: "ab"}, 6 + 4, 2},
		{"off", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"预算预算"}]}`,
			map[string]string{HeaderText: "abcdefgh", HeaderChunkSize: "4"}, 1, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body, err := do(t, c, "POST", ts.URL+tt.path, tt.body, tt.hdr)
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("%v %v: %s", resp, err, body)
			}
			data := string(body)
			if strings.Contains(tt.body, `"stream":true`) {
				i := strings.LastIndex(data, `"usage":{`)
				if i < 0 {
					t.Fatalf("no usage in %s", body)
				}
				data = "{" + data[i:strings.Index(data[i:], "}")+i+1] + "}"
			}
			var u struct {
				Usage struct {
					Prompt     int `json:"prompt_tokens"`
					Completion int `json:"completion_tokens"`
				} `json:"usage"`
			}
			if err := json.Unmarshal([]byte(data), &u); err != nil {
				t.Fatalf("%v: %s", err, data)
			}
			if u.Usage.Prompt != tt.prompt || u.Usage.Completion != tt.completion {
				t.Fatalf("usage %+v, want prompt %d, completion %d", u.Usage, tt.prompt, tt.completion)
			}
		})
	}
}
