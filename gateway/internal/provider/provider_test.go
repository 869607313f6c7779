package provider

import (
	"net/url"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/gateway/internal/config"
	"github.com/tollgate/tollgate/gateway/internal/openai"
)

func TestBind(t *testing.T) {
	u, _ := url.Parse("https://api.anthropic.com/v1")
	tests := []struct {
		name    string
		up      config.Upstream
		adapter bool
		options int
		wantErr string
	}{
		{"openai", config.Upstream{Name: "o", Provider: config.ProviderOpenAI, URL: u}, false, 0, ""},
		{"anthropic", config.Upstream{Name: "a", Provider: config.ProviderAnthropic, URL: u}, true, 1, ""},
		{"not in this build", config.Upstream{Name: "x", Provider: "nope", URL: u}, false, 0, `upstream "x": provider "nope" is not supported by this build`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := Bind(&tt.up)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (b.Adapter != nil) != tt.adapter || len(b.Options) != tt.options {
				t.Errorf("binding %+v", b)
			}
		})
	}
}

func TestRegisterTwicePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("no panic")
		}
	}()
	Register(config.ProviderAnthropic, newAnthropic)
}

func TestAnthropicAdapter(t *testing.T) {
	b, err := Bind(&config.Upstream{Name: "a", Provider: config.ProviderAnthropic, AnthropicVersion: "2024-01-01"})
	if err != nil {
		t.Fatal(err)
	}
	a := b.Adapter.(*Anthropic)
	if !a.Serves(openai.ChatCompletions) || a.Serves(openai.Embeddings) || a.Serves(openai.Completions) {
		t.Error("Serves")
	}
	var out Outbound
	if err := a.Request(&out, openai.ChatCompletions, "claude-x", false, []byte(`{"model":"claude-x","messages":[{"role":"user","content":"hi"}]}`)); err != nil {
		t.Fatal(err)
	}
	if string(out.Path) != "/messages" || string(out.Header) != "anthropic-version: 2024-01-01\r\n"+jsonContentType ||
		!strings.HasPrefix(string(out.Body), `{"model":"claude-x",`) {
		t.Errorf("outbound path %q header %q body %s", out.Path, out.Header, out.Body)
	}
	out.Reset()
	err = a.Request(&out, openai.ChatCompletions, "claude-x", false, []byte(`{"model":"claude-x","n":2,"messages":[{"role":"user","content":"hi"}]}`))
	if e, ok := err.(*openai.Error); !ok || e.Status != 400 || e.Param != "n" {
		t.Errorf("refusal %v", err)
	}
	body, status, err := a.Reply(nil, 529, replyHeader{}, []byte(`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`), "claude-x", 1)
	if err != nil || status != 503 || !strings.Contains(string(body), `"message":"Overloaded"`) {
		t.Errorf("error reply %d %s %v", status, body, err)
	}
	body, status, err = a.Reply(nil, 200, replyHeader{}, []byte(`{"id":"msg_1","type":"message","role":"assistant","model":"claude-3-5-sonnet-20241022","content":[{"type":"text","text":"Hi"}],"stop_reason":"end_turn","usage":{"input_tokens":3,"output_tokens":1}}`), "claude-x", 1)
	if err != nil || status != 200 || !strings.Contains(string(body), `"model":"claude-x"`) || !strings.Contains(string(body), `"content":"Hi"`) {
		t.Errorf("reply %d %s %v", status, body, err)
	}
	for _, tc := range []struct {
		status int
		ct     string
		want   bool
	}{{200, "text/event-stream; charset=utf-8", true}, {200, "application/json", false}, {400, "text/event-stream", false}} {
		if got := a.IsStream(tc.status, []byte(tc.ct)); got != tc.want {
			t.Errorf("IsStream(%d, %q) = %v", tc.status, tc.ct, got)
		}
	}
}

// replyHeader is a reply's header fields for Translator.Reply.
type replyHeader map[string]string

func (h replyHeader) Peek(key string) []byte {
	if v, ok := h[key]; ok {
		return []byte(v)
	}
	return nil
}
