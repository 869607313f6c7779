package mockllm

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
)

// parseSSE checks the framing of an SSE body ("data: X\n\n" events only) and
// returns the payloads before [DONE] and whether [DONE] was seen last.
func parseSSE(t *testing.T, b []byte) (events []string, done bool) {
	t.Helper()
	rest := string(b)
	for rest != "" {
		ev, r, ok := strings.Cut(rest, "\n\n")
		if !ok {
			t.Fatalf("unterminated event %q", rest)
		}
		rest = r
		payload, ok := strings.CutPrefix(ev, "data: ")
		if !ok || strings.Contains(payload, "\n") || done {
			t.Fatalf("bad event %q (after [DONE]: %v)", ev, done)
		}
		if payload == "[DONE]" {
			done = true
			continue
		}
		events = append(events, payload)
	}
	return events, done
}

// jsonString encodes s with encoding/json (independently of appendString).
func jsonString(s string) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(buf.String(), "\n")
}

// splitRunes cuts text into pieces of at most size bytes without splitting a
// rune (a lone rune longer than size is its own piece).
func splitRunes(text string, size int) []string {
	var out []string
	cur := ""
	for _, r := range text {
		rs := string(r)
		if cur != "" && len(cur)+len(rs) > size {
			out = append(out, cur)
			cur = ""
		}
		cur += rs
	}
	if cur != "" {
		out = append(out, cur)
	}
	return out
}

func genPieces(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "tok" + strconv.Itoa(i) + " "
	}
	return out
}

// wantStream builds the exact event payloads an OpenAI-compatible stream has.
func wantStream(chat bool, id string, created int64, model string, pieces []string,
	finish string, includeUsage, usageChunk bool, prompt int) []string {
	head := `{"id":"` + id + `","object":"chat.completion.chunk","created":` + strconv.FormatInt(created, 10) +
		`,"model":` + jsonString(model) + `,"system_fingerprint":"fp_mock","choices":[`
	if !chat {
		head = strings.Replace(head, "chat.completion.chunk", "text_completion", 1)
	}
	tail := "]}"
	if includeUsage {
		tail = `],"usage":null}`
	}
	var out []string
	if chat {
		out = append(out, head+`{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}`+tail)
	}
	for _, p := range pieces {
		if chat {
			out = append(out, head+`{"index":0,"delta":{"content":`+jsonString(p)+`},"logprobs":null,"finish_reason":null}`+tail)
		} else {
			out = append(out, head+`{"text":`+jsonString(p)+`,"index":0,"logprobs":null,"finish_reason":null}`+tail)
		}
	}
	if chat {
		out = append(out, head+`{"index":0,"delta":{},"logprobs":null,"finish_reason":"`+finish+`"}`+tail)
	} else {
		out = append(out, head+`{"text":"","index":0,"logprobs":null,"finish_reason":"`+finish+`"}`+tail)
	}
	if usageChunk {
		n := len(pieces)
		out = append(out, head+`],"usage":{"prompt_tokens":`+strconv.Itoa(prompt)+`,"completion_tokens":`+
			strconv.Itoa(n)+`,"total_tokens":`+strconv.Itoa(prompt+n)+`}}`)
	}
	return out
}

// idCreated extracts id and created from the first event.
func idCreated(t *testing.T, events []string) (string, int64) {
	t.Helper()
	if len(events) == 0 {
		t.Fatal("no events")
	}
	var v struct {
		ID      string
		Created int64
	}
	if err := json.Unmarshal([]byte(events[0]), &v); err != nil {
		t.Fatal(err)
	}
	return v.ID, v.Created
}

const multibyte = "héllo wörld — 日本語 🎉 \"q\"\n\t\\ <end>"

func TestStreams(t *testing.T) {
	chatBody := func(extra string) string {
		return `{"model":"gpt-x","messages":[{"role":"user","content":"abcdefgh"}],"stream":true` + extra + `}`
	}
	tests := []struct {
		name         string
		cfg          Config
		hdr          map[string]string
		legacy       bool
		body         string
		pieces       []string
		finish       string
		includeUsage bool
		usageChunk   bool
	}{
		{"generated default", Config{}, nil, false, chatBody(""), genPieces(16), "stop", false, false},
		{"generated header tokens", Config{}, map[string]string{HeaderTokens: "3"}, false, chatBody(""), genPieces(3), "stop", false, false},
		{"zero tokens", Config{}, map[string]string{HeaderTokens: "0"}, false, chatBody(""), nil, "stop", false, false},
		{"text multibyte chunk 2", Config{Text: multibyte, ChunkSize: 2}, nil, false, chatBody(""), splitRunes(multibyte, 2), "stop", false, false},
		{"text header chunk 1", Config{}, map[string]string{HeaderText: url.QueryEscape(multibyte), HeaderChunkSize: "1"},
			false, chatBody(""), splitRunes(multibyte, 1), "stop", false, false},
		{"text chunk 5 emoji", Config{Text: "🎉🎉a"}, map[string]string{HeaderChunkSize: "5"}, false, chatBody(""), []string{"🎉", "🎉a"}, "stop", false, false},
		{"text default chunk", Config{Text: multibyte}, nil, false, chatBody(""), splitRunes(multibyte, 4), "stop", false, false},
		{"include_usage", Config{Tokens: 2}, nil, false, chatBody(`,"stream_options":{"include_usage":true}`), genPieces(2), "stop", true, true},
		{"include_usage false", Config{Tokens: 2}, nil, false, chatBody(`,"stream_options":{"include_usage":false}`), genPieces(2), "stop", false, false},
		{"usage forced", Config{Tokens: 2, Usage: true}, nil, false, chatBody(""), genPieces(2), "stop", false, true},
		{"usage forced and requested", Config{Tokens: 2, Usage: true}, nil, false, chatBody(`,"stream_options":{"include_usage":true}`), genPieces(2), "stop", true, true},
		{"usage header true", Config{Tokens: 2}, map[string]string{HeaderUsage: "true"}, false, chatBody(""), genPieces(2), "stop", false, true},
		{"usage header false", Config{Tokens: 2, Usage: true}, map[string]string{HeaderUsage: "false"}, false, chatBody(""), genPieces(2), "stop", false, false},
		{"max_tokens length", Config{Tokens: 5}, nil, false, chatBody(`,"max_tokens":2,"stream_options":{"include_usage":true}`), genPieces(2), "length", true, true},
		{"max_completion_tokens text", Config{Text: "abcdefghij", ChunkSize: 3}, nil, false, chatBody(`,"max_completion_tokens":3`), []string{"abc", "def", "ghi"}, "length", false, false},
		{"max_tokens equal", Config{Tokens: 4}, nil, false, chatBody(`,"max_tokens":4`), genPieces(4), "stop", false, false},
		{"legacy generated usage", Config{Tokens: 3}, nil, true,
			`{"model":"davinci","prompt":"abcdefgh","stream":true,"stream_options":{"include_usage":true}}`, genPieces(3), "stop", true, true},
		{"legacy text capped", Config{Text: multibyte, ChunkSize: 3}, nil, true,
			`{"model":"davinci","prompt":"abcdefgh","stream":true,"max_tokens":4}`, splitRunes(multibyte, 3)[:4], "length", false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, ts, c := start(t, tc.cfg)
			path := "/v1/chat/completions"
			if tc.legacy {
				path = "/v1/completions"
			}
			resp, b, err := do(t, c, "POST", ts.URL+path, tc.body, tc.hdr)
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("status %d err %v body %s", resp.StatusCode, err, b)
			}
			if resp.Header.Get("Content-Type") != "text/event-stream" || resp.Header.Get("Cache-Control") != "no-cache" {
				t.Errorf("headers %v", resp.Header)
			}
			events, done := parseSSE(t, b)
			if !done {
				t.Fatal("no [DONE]")
			}
			id, created := idCreated(t, events)
			wantID := "chatcmpl-mock-1"
			if tc.legacy {
				wantID = "cmpl-mock-1"
			}
			if id != wantID || created < time.Now().Add(-time.Minute).Unix() {
				t.Fatalf("id %q created %d", id, created)
			}
			want := wantStream(!tc.legacy, id, created, modelOf(tc.body), tc.pieces, tc.finish, tc.includeUsage, tc.usageChunk, 2)
			if len(events) != len(want) {
				t.Fatalf("%d events, want %d:\n%s", len(events), len(want), strings.Join(events, "\n"))
			}
			for i := range want {
				if events[i] != want[i] {
					t.Errorf("event %d\n got %s\nwant %s", i, events[i], want[i])
				}
			}
			// The concatenated deltas are the full text, in valid UTF-8 pieces.
			var text strings.Builder
			for _, ev := range events {
				var ch struct {
					Choices []struct {
						Text  *string
						Delta struct{ Content *string }
					}
				}
				if err := json.Unmarshal([]byte(ev), &ch); err != nil {
					t.Fatal(err)
				}
				for _, c := range ch.Choices {
					for _, s := range []*string{c.Text, c.Delta.Content} {
						if s != nil {
							if !utf8.ValidString(*s) {
								t.Errorf("invalid UTF-8 piece %q", *s)
							}
							text.WriteString(*s)
						}
					}
				}
			}
			if got := text.String(); got != strings.Join(tc.pieces, "") {
				t.Errorf("text %q, want %q", got, strings.Join(tc.pieces, ""))
			}
			if st := m.Stats(); st != (Stats{Requests: 1, Streams: 1, Completed: 1}) {
				t.Errorf("stats %+v", st)
			}
		})
	}
}

func TestCutAfter(t *testing.T) {
	chat := `{"model":"m","messages":[{"role":"user","content":"abcdefgh"}],"stream":true}`
	all := wantStream(true, "chatcmpl-mock-1", 0, "m", genPieces(5), "stop", false, false, 2)
	tests := []struct {
		name    string
		cfg     Config
		hdr     map[string]string
		body    string
		nEvents int
	}{
		{"config cut 3", Config{Tokens: 5, CutAfter: 3}, nil, chat, 3},
		{"header cut 1", Config{Tokens: 5}, map[string]string{HeaderCutAfter: "1"}, chat, 1},
		{"cut beyond end", Config{Tokens: 5, CutAfter: 100}, nil, chat, len(all)},
		{"cut with inter-token", Config{Tokens: 5, CutAfter: 4, InterToken: 5 * time.Millisecond}, nil, chat, 4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, ts, c := start(t, tc.cfg)
			resp, b, err := do(t, c, "POST", ts.URL+"/v1/chat/completions", tc.body, tc.hdr)
			if resp.StatusCode != 200 || !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("status %d, read error %v (want unexpected EOF)", resp.StatusCode, err)
			}
			events, done := parseSSE(t, b)
			if done || len(events) != tc.nEvents {
				t.Fatalf("got %d events (done %v), want %d without [DONE]", len(events), done, tc.nEvents)
			}
			_, created := idCreated(t, events)
			want := wantStream(true, "chatcmpl-mock-1", created, "m", genPieces(5), "stop", false, false, 2)
			for i, ev := range events {
				if ev != want[i] {
					t.Errorf("event %d\n got %s\nwant %s", i, ev, want[i])
				}
			}
			if st := m.Stats(); st != (Stats{Requests: 1, Streams: 1}) {
				t.Errorf("stats %+v", st)
			}
		})
	}
	t.Run("non-streaming", func(t *testing.T) {
		m, ts, c := start(t, Config{CutAfter: 1})
		_, err := c.Post(ts.URL+"/v1/chat/completions", "application/json",
			strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"x"}]}`))
		if err == nil {
			t.Fatal("want a transport error")
		}
		if st := m.Stats(); st != (Stats{Requests: 1}) {
			t.Errorf("stats %+v", st)
		}
	})
}

// timedStream sends a streaming chat request and returns when the response
// headers and each event arrived, relative to sending.
func timedStream(t *testing.T, c *http.Client, url string, hdr map[string]string) (headers time.Duration, events []time.Duration) {
	t.Helper()
	req, _ := http.NewRequest("POST", url+"/v1/chat/completions",
		strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"x"}],"stream":true}`))
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	t0 := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	headers = time.Since(t0)
	br := bufio.NewReader(resp.Body)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		if strings.HasPrefix(line, "data: ") {
			events = append(events, time.Since(t0))
			if line == "data: [DONE]\n" {
				return headers, events
			}
		}
	}
}

func TestDelays(t *testing.T) {
	_, ts, c := start(t, Config{Tokens: 2})
	// Headers come before TTFT; the role chunk and first token after it.
	h, ev := timedStream(t, c, ts.URL, map[string]string{HeaderTTFT: "300ms"})
	if h >= 300*time.Millisecond || ev[0] < 300*time.Millisecond || len(ev) != 5 {
		t.Errorf("headers at %v, first event at %v (%d events); TTFT 300ms", h, ev[0], len(ev))
	}
	// FailDelay holds the headers back.
	h, _ = timedStream(t, c, ts.URL, map[string]string{HeaderFailDelay: "100ms"})
	if h < 100*time.Millisecond {
		t.Errorf("headers at %v, want >= 100ms", h)
	}
	// Inter-token delay separates content events, not role and first token.
	_, ev = timedStream(t, c, ts.URL, map[string]string{HeaderTokens: "4", HeaderInterToken: "50ms"})
	if len(ev) != 7 || ev[4]-ev[1] < 140*time.Millisecond {
		t.Errorf("events at %v, want about 150ms (3 inter-token delays) between first and last token", ev)
	}
	t0 := time.Now()
	resp, _, _ := do(t, c, "POST", ts.URL+"/v1/embeddings", `{"model":"e","input":"x"}`, map[string]string{HeaderTTFT: "80ms"})
	if d := time.Since(t0); resp.StatusCode != 200 || d < 80*time.Millisecond {
		t.Errorf("embeddings status %d after %v, want 200 after >= 80ms", resp.StatusCode, d)
	}
}

func TestOnClose(t *testing.T) {
	type closed struct {
		id string
		at time.Time
	}
	tests := []struct {
		name   string
		body   string
		hdr    map[string]string
		events int // events to read before cancelling
	}{
		{"mid-stream", `{"model":"m","messages":[{"role":"user","content":"x"}],"stream":true}`,
			map[string]string{HeaderTokens: "1000", HeaderInterToken: "20ms"}, 3},
		{"during TTFT", `{"model":"m","messages":[{"role":"user","content":"x"}],"stream":true}`,
			map[string]string{HeaderTTFT: "10s"}, 0},
		{"non-streaming TTFT", `{"model":"m","messages":[{"role":"user","content":"x"}]}`,
			map[string]string{HeaderTTFT: "10s"}, -1},
		{"fail delay", `{"model":"m","messages":[{"role":"user","content":"x"}]}`,
			map[string]string{HeaderFailDelay: "10s", HeaderFailStatus: "500"}, -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, ts, c := start(t, Config{})
			got := make(chan closed, 1)
			m.SetOnClose(func(id string, at time.Time) { got <- closed{id, at} })
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, "POST", ts.URL+"/v1/chat/completions", strings.NewReader(tc.body))
			req.Header.Set("X-Request-Id", "req-42")
			for k, v := range tc.hdr {
				req.Header.Set(k, v)
			}
			var cancelAt time.Time
			if tc.events < 0 {
				at := make(chan time.Time, 1)
				go func() {
					time.Sleep(100 * time.Millisecond)
					at <- time.Now()
					cancel()
				}()
				if _, err := c.Do(req); err == nil {
					t.Fatal("want cancellation error")
				}
				cancelAt = <-at
			} else {
				resp, err := c.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				br := bufio.NewReader(resp.Body)
				for n := 0; n < tc.events; {
					line, err := br.ReadString('\n')
					if err != nil {
						t.Fatal(err)
					}
					if strings.HasPrefix(line, "data: ") {
						n++
					}
				}
				cancelAt = time.Now()
				cancel()
				resp.Body.Close()
			}
			select {
			case cl := <-got:
				if gap := cl.at.Sub(cancelAt); gap > 50*time.Millisecond || gap < -time.Millisecond {
					t.Errorf("OnClose %v after cancel, want within 50ms", gap)
				}
				if cl.id != "req-42" {
					t.Errorf("request id %q", cl.id)
				}
			case <-time.After(2 * time.Second):
				t.Fatal("OnClose not called")
			}
			if st := m.Stats(); st.ClientClosed != 1 || st.Completed != 0 || st.Requests != 1 {
				t.Errorf("stats %+v", st)
			}
		})
	}
}

func TestConcurrentStreams(t *testing.T) {
	m, ts, c := start(t, Config{})
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Go(func() {
			req, _ := http.NewRequest("POST", ts.URL+"/v1/chat/completions",
				strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"x"}],"stream":true}`))
			want := genPieces(i)
			req.Header.Set(HeaderTokens, strconv.Itoa(i))
			if i%2 == 1 {
				want = splitRunes(multibyte, 1+i%7)
				req.Header.Set(HeaderText, url.QueryEscape(multibyte))
				req.Header.Set(HeaderChunkSize, strconv.Itoa(1+i%7))
			}
			resp, err := c.Do(req)
			if err != nil {
				t.Errorf("stream %d: %v", i, err)
				return
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != 200 {
				t.Errorf("stream %d: status %d err %v", i, resp.StatusCode, err)
				return
			}
			var text strings.Builder
			events := 0
			for _, ev := range strings.Split(strings.TrimSuffix(string(b), "\n\n"), "\n\n") {
				events++
				var ch struct {
					Choices []struct{ Delta struct{ Content string } }
				}
				if ev != "data: [DONE]" && json.Unmarshal([]byte(strings.TrimPrefix(ev, "data: ")), &ch) == nil && len(ch.Choices) == 1 {
					text.WriteString(ch.Choices[0].Delta.Content)
				}
			}
			if events != len(want)+3 || text.String() != strings.Join(want, "") {
				t.Errorf("stream %d: %d events text %q, want %d events text %q", i, events, text.String(), len(want)+3, strings.Join(want, ""))
			}
		})
	}
	wg.Wait()
	if st := m.Stats(); st != (Stats{Requests: 32, Streams: 32, Completed: 32}) {
		t.Errorf("stats %+v", st)
	}
}

// BenchmarkStream measures a 64-token stream served in-process.
func BenchmarkStream(b *testing.B) {
	m := New(Config{Tokens: 64})
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"hello"}],"stream":true,"stream_options":{"include_usage":true}}`)
	b.ReportAllocs()
	for b.Loop() {
		req := httptest.NewRequest("POST", "/v1/chat/completions", bytes.NewReader(body))
		w := httptest.NewRecorder()
		m.ServeHTTP(w, req)
		if w.Code != 200 {
			b.Fatal(w.Code)
		}
	}
}
