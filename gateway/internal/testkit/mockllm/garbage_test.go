package mockllm

import (
	"errors"
	"io"
	"strings"
	"testing"
)

func TestGarbageAfter(t *testing.T) {
	chat := `{"model":"m","messages":[{"role":"user","content":"abcdefgh"}],"stream":true}`
	tests := []struct {
		name  string
		cfg   Config
		hdr   map[string]string
		after int  // events before the garbage
		cut   bool // the stream is cut right after it
	}{
		{"config", Config{Tokens: 5, GarbageAfter: 2}, nil, 2, false},
		{"header", Config{Tokens: 5}, map[string]string{HeaderGarbageAfter: "3"}, 3, false},
		{"header overrides config", Config{Tokens: 5, GarbageAfter: 2}, map[string]string{HeaderGarbageAfter: "1"}, 1, false},
		{"then cut", Config{Tokens: 5}, map[string]string{HeaderGarbageAfter: "2", HeaderCutAfter: "2"}, 2, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, ts, c := start(t, tc.cfg)
			resp, b, err := do(t, c, "POST", ts.URL+"/v1/chat/completions", chat, tc.hdr)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d", resp.StatusCode)
			}
			body := string(b)
			before, rest, ok := strings.Cut(body, GarbageSSE)
			if !ok || strings.Contains(rest, GarbageSSE) {
				t.Fatalf("want the garbage exactly once, got %q", body)
			}
			events, _ := parseSSE(t, []byte(before))
			if len(events) != tc.after {
				t.Fatalf("%d events before the garbage, want %d", len(events), tc.after)
			}
			if tc.cut {
				if rest != "" || !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Fatalf("want the stream cut after the garbage, got %q (%v)", rest, err)
				}
				return
			}
			// Without the garbage the stream is what it would have been.
			_, plain, _ := do(t, c, "POST", ts.URL+"/v1/chat/completions", chat, map[string]string{HeaderGarbageAfter: "0"})
			evWith, done := parseSSE(t, []byte(before+rest))
			evPlain, _ := parseSSE(t, plain)
			if err != nil || !done || len(evWith) != len(evPlain) {
				t.Fatalf("stream with garbage: %d events (done %v, err %v); without: %d", len(evWith), done, err, len(evPlain))
			}
			if st := m.Stats(); st.Completed != 2 {
				t.Errorf("stats %+v", st)
			}
		})
	}
	t.Run("bad header", func(t *testing.T) {
		_, ts, c := start(t, Config{})
		resp, b, _ := do(t, c, "POST", ts.URL+"/v1/chat/completions", chat, map[string]string{HeaderGarbageAfter: "-1"})
		if resp.StatusCode != 400 || !strings.Contains(string(b), HeaderGarbageAfter) {
			t.Fatalf("%d %s", resp.StatusCode, b)
		}
	})
	t.Run("no content text in the garbage", func(t *testing.T) {
		if strings.Contains(GarbageSSE, `"content"`) || strings.Contains(GarbageSSE, "[DONE]") {
			t.Fatal("the garbage must not carry text or an end")
		}
	})
}
