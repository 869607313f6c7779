package plugintest_test

import (
	"strings"
	"testing"

	"github.com/tollgate/tollgate/sdk/plugintest"
)

const testPlugin = "../wasmhost/testdata/testplugin"

func TestHarness(t *testing.T) {
	wasm := plugintest.Build(t, testPlugin)
	tests := []struct {
		name   string
		config string
		deltas []string
		want   plugintest.StreamResult
	}{
		{"pass", `{"chunk":"continue"}`, []string{"ab", "cd"}, plugintest.StreamResult{Text: "abcd"}},
		{"replace", `{"chunk":"replace_upper"}`, []string{"ab", "cd"}, plugintest.StreamResult{Text: "ABCD"}},
		{"hold until the end", `{"chunk":"hold"}`, []string{"ab", "cd"}, plugintest.StreamResult{Text: "abcd"}},
		{"stop", `{"chunk":"stop:no"}`, []string{"ab", "cd"}, plugintest.StreamResult{Text: "no", Stopped: true, FinishReason: "content_filter"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := plugintest.Load(t, wasm, tt.config)
			if got := p.Stream(plugintest.Request{}, tt.deltas); got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}

	p := plugintest.Load(t, wasm, `{"request":["set_header:X-A=1","reject"],"reject_status":429,"reject_message":"slow"}`)
	res := p.Request(plugintest.Request{Body: `{}`})
	if !res.Rejected || res.Status != 429 || res.Message != "slow" || res.UpstreamHeaders["X-A"] != "1" {
		t.Errorf("request: %+v", res)
	}

	p = plugintest.Load(t, wasm, `{"request":"call:quota.check"}`)
	p.Services.Handle("quota.check", func(req []byte) ([]byte, error) { return []byte(`{"ok":true}`), nil })
	res = p.Request(plugintest.Request{Body: `{}`})
	if got := res.ClientHeaders["X-Call-Result"]; got != `{"ok":true}` || len(p.Services.Calls()) != 1 {
		t.Errorf("service call: header %q, calls %v", got, p.Services.Calls())
	}

	if _, err := plugintest.LoadErr(t, wasm, `{"configure":"fail","fail_message":"bad"}`); err == nil || !strings.Contains(err.Error(), "bad") {
		t.Errorf("refused config: %v", err)
	}
}
