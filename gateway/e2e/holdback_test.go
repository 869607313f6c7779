package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/config"
	"github.com/tollgate/tollgate/gateway/internal/proxy"
	"github.com/tollgate/tollgate/gateway/internal/testkit/mockllm"
	"github.com/tollgate/tollgate/gateway/internal/testkit/syncbuf"
	"github.com/tollgate/tollgate/sdk/wasmbuild"
)

// The holdback guard (plugins/holdback) between a client and the mock
// model: replies whose URLs carry a marker that no tool produced are cut.

const (
	hbMarker     = "oaidalleapiprodscus.blob.core.windows.net"
	hbURL        = "https://" + hbMarker + "/private/org-1/user-2/img-3.png?st=2025-01-01T00%3A00%3A00Z&sp=r&sig=AbC%2Bd%3D"
	hbCorrection = "[link withheld]"
	hbText       = "Here is your image: " + hbURL + " enjoy!"
)

// hbGateway is a gateway whose policy runs the holdback plugin with config
// (YAML flow mapping) and then the usage probe, which logs what the
// gateway counted as sent; logs collects the gateway's log.
type hbGateway struct {
	srv  *proxy.Server
	url  string
	logs *lockedBuffer
}

// lockedBuffer collects output that goroutines write at once.
type lockedBuffer = syncbuf.Buffer

func startHoldbackGateway(t *testing.T, mockURL, holdbackConfig string) *hbGateway {
	t.Helper()
	root := repoRoot(t)
	guard, err := wasmbuild.Cached(root + "/plugins/holdback")
	if err != nil {
		t.Fatal(err)
	}
	probe, err := wasmbuild.Cached(root + "/plugins/holdback/testdata/usageprobe")
	if err != nil {
		t.Fatal(err)
	}
	pol := policy(mockURL, "")
	if holdbackConfig != "" {
		pol += fmt.Sprintf("plugins:\n  - name: holdback\n    path: %s\n    on_error: fail_closed\n    config: %s\n  - name: probe\n    path: %s\n",
			guard, holdbackConfig, probe)
	}
	p, err := config.Parse([]byte(pol), nil)
	if err != nil {
		t.Fatalf("policy: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	logs := &lockedBuffer{}
	srv, err := proxy.New(p, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { srv.Serve(ln); close(done) }()
	t.Cleanup(func() {
		srv.Shutdown(0, 2*time.Second)
		<-done
	})
	return &hbGateway{srv: srv, url: "http://" + ln.Addr().String(), logs: logs}
}

var probeLine = regexp.MustCompile(`usageprobe: request (\S+) text_bytes_sent=(\d+) guard_action=(\S*) end_flags=(\d+)`)

// probe waits for the usage probe's line about request id and returns
// the text bytes the gateway counted as sent and the guard_action fact.
func (g *hbGateway) probe(t *testing.T, id string) (sent int, action string, flags int) {
	t.Helper()
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		for _, m := range probeLine.FindAllStringSubmatch(g.logs.String(), -1) {
			if m[1] == id {
				sent, _ = strconv.Atoi(m[2])
				flags, _ = strconv.Atoi(m[4])
				return sent, m[3], flags
			}
		}
	}
	t.Fatalf("no end-phase line for request %s; log:\n%s", id, g.logs.String())
	return 0, "", 0
}

const hbConfig = `{markers: ["` + hbMarker + `"], correction: "` + hbCorrection + `"}`

// hbEvent is one data event of a reply as the client parsed it.
type hbEvent struct {
	Content      *string
	ToolCalls    bool
	FinishReason *string
	Error        string
}

// hbStream reads an SSE body: its data events and whether [DONE] ended it.
func hbStream(t *testing.T, body []byte) (events []hbEvent, done bool) {
	t.Helper()
	for _, ev := range strings.SplitAfter(string(body), "\n\n") {
		if ev == "" {
			continue
		}
		data, ok := strings.CutPrefix(ev, "data: ")
		if !ok || !strings.HasSuffix(data, "\n\n") || done {
			t.Fatalf("bad event %q in %q", ev, body)
		}
		data = strings.TrimSuffix(data, "\n\n")
		if data == "[DONE]" {
			done = true
			continue
		}
		var v struct {
			Choices []struct {
				Delta struct {
					Content   *string           `json:"content"`
					ToolCalls []json.RawMessage `json:"tool_calls"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
			Error *struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(data), &v); err != nil {
			t.Fatalf("event %q: %v", data, err)
		}
		var e hbEvent
		if v.Error != nil {
			e.Error = v.Error.Code
		}
		if len(v.Choices) > 0 {
			c := v.Choices[0]
			e.Content, e.ToolCalls, e.FinishReason = c.Delta.Content, len(c.Delta.ToolCalls) > 0, c.FinishReason
		}
		events = append(events, e)
	}
	return events, done
}

func hbContent(events []hbEvent) string {
	var b strings.Builder
	for _, e := range events {
		if e.Content != nil {
			b.WriteString(*e.Content)
		}
	}
	return b.String()
}

func hbBody(stream bool, messages ...string) string {
	if len(messages) == 0 {
		messages = []string{`{"role":"user","content":"draw a cat"}`}
	}
	return fmt.Sprintf(`{"model":"mock-1","stream":%v,"messages":[%s]}`, stream, strings.Join(messages, ","))
}

// hbToolMessage is a tool result carrying the image URL, as JSON.
var hbToolMessage = `{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"draw","arguments":"{\"prompt\":\"cat\"}"}}]},` +
	`{"role":"tool","tool_call_id":"c1","content":"{\"url\":\"` + hbURL + `\"}"}`

func hbSplit(cuts ...int) string {
	s := make([]string, len(cuts))
	for i, c := range cuts {
		s[i] = strconv.Itoa(c)
	}
	return strings.Join(s, ",")
}

// hbPost streams text cut at cuts through g and returns the events.
func hbPost(t *testing.T, g *hbGateway, id, body, text string, cuts []int, hdr ...string) ([]hbEvent, bool, []byte) {
	t.Helper()
	hdr = append([]string{"X-Request-Id", id, "X-Mock-Text", url.QueryEscape(text), "X-Mock-Split", hbSplit(cuts...)}, hdr...)
	status, _, raw := post(t, g.url+"/v1/chat/completions", body, hdr...)
	if status != 200 {
		t.Fatalf("status %d: %s", status, raw)
	}
	events, done := hbStream(t, raw)
	return events, done, raw
}

// checkStopped checks a stopped reply: the text before the marker, then
// the correction in a final delta with finish_reason content_filter, then
// [DONE]; and that the gateway counted exactly what the client got.
func checkStopped(t *testing.T, g *hbGateway, id string, events []hbEvent, done bool, before string) {
	t.Helper()
	last := events[len(events)-1]
	if got := hbContent(events); got != before+hbCorrection || !done || last.FinishReason == nil || *last.FinishReason != "content_filter" ||
		last.Content == nil || !strings.HasSuffix(*last.Content, hbCorrection) {
		t.Fatalf("%s: content %q, done %v, last event %+v", id, got, done, last)
	}
	if sent, action, _ := g.probe(t, id); sent != len(before+hbCorrection) || action != "holdback:stopped" {
		t.Fatalf("%s: the gateway counted %d text bytes (client got %d), guard_action %q", id, sent, len(before+hbCorrection), action)
	}
}

// TestHoldbackSplits cuts the reply at every offset from the URL's start
// to the marker's end (inside "https://", at the marker's first and last
// byte), and across three and more events.
func TestHoldbackSplits(t *testing.T) {
	_, mockURL := startMock(t, mockllm.Config{})
	g := startHoldbackGateway(t, mockURL, hbConfig)
	urlAt, markerAt := strings.Index(hbText, "https://"), strings.Index(hbText, hbMarker)
	markerEnd := markerAt + len(hbMarker)
	before := hbText[:markerAt]
	for cut := urlAt; cut <= markerEnd; cut++ {
		id := fmt.Sprintf("split-%d", cut)
		events, done, _ := hbPost(t, g, id, hbBody(true), hbText, []int{cut})
		checkStopped(t, g, id, events, done, before)

		events, done, _ = hbPost(t, g, id+"-evidence", hbBody(true, `{"role":"user","content":"draw"}`, hbToolMessage), hbText, []int{cut})
		if got := hbContent(events); got != hbText || !done || *events[len(events)-1].FinishReason != "stop" {
			t.Fatalf("%s with evidence: %q done %v", id, got, done)
		}
		if sent, action, _ := g.probe(t, id+"-evidence"); sent != len(hbText) || action != "" {
			t.Fatalf("%s with evidence: counted %d bytes, guard_action %q", id, sent, action)
		}
	}
	for i, cuts := range [][]int{
		{markerAt + 1, markerAt + 2},
		{urlAt + 3, markerAt + 10, markerAt + 30},
		{markerAt, markerAt + 20, markerEnd - 1},
		{markerAt + 5, markerAt + 6, markerAt + 7, markerAt + 8, markerEnd - 1, markerEnd},
	} {
		id := fmt.Sprintf("multi-%d", i)
		events, done, _ := hbPost(t, g, id, hbBody(true), hbText, cuts)
		checkStopped(t, g, id, events, done, before)
	}
	// One byte per event.
	events, done, _ := hbPost(t, g, "bytewise", hbBody(true), hbText, nil, "X-Mock-Split", "", "X-Mock-Chunk-Size", "1")
	checkStopped(t, g, "bytewise", events, done, before)
}

// TestHoldbackEvidence: a reply that repeats the URL a tool produced, in
// this turn or an earlier one, passes unchanged; evidence for another URL
// does not count.
func TestHoldbackEvidence(t *testing.T) {
	_, mockURL := startMock(t, mockllm.Config{})
	g := startHoldbackGateway(t, mockURL, hbConfig)
	text := "Here it is: ![image](" + hbURL + ")\n\nAnd again: " + hbURL + "."
	cuts := []int{15, 30, 31, 70, len(text) - 2}
	tests := []struct {
		name string
		body string
		want string
	}{
		{"this turn's tool result", hbBody(true, `{"role":"user","content":"draw a cat"}`, hbToolMessage), text},
		{"try again: the tool result is an earlier turn's", hbBody(true,
			`{"role":"user","content":"draw a cat"}`, hbToolMessage,
			`{"role":"assistant","content":"Here: `+hbURL+`"}`,
			`{"role":"user","content":"that did not load, try again"}`), text},
		{"the URL only in the user's message", hbBody(true, `{"role":"user","content":"show `+hbURL+`"}`),
			"Here it is: ![image](https://" + hbCorrection},
		{"another URL on the host", hbBody(true, `{"role":"tool","tool_call_id":"c","content":"https://`+hbMarker+`/private/other.png"}`),
			"Here it is: ![image](https://" + hbCorrection},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := fmt.Sprintf("evidence-%d", i)
			events, done, _ := hbPost(t, g, id, tt.body, text, cuts)
			if got := hbContent(events); got != tt.want || !done {
				t.Fatalf("content %q done %v, want %q", got, done, tt.want)
			}
			if sent, _, _ := g.probe(t, id); sent != len(tt.want) {
				t.Fatalf("counted %d text bytes, the client got %d", sent, len(tt.want))
			}
		})
	}
}

// TestHoldbackStopCancelsUpstream: the upstream is still streaming when
// the marker completes; the client gets the text before it and the
// correction, and the mock sees its connection closed.
func TestHoldbackStopCancelsUpstream(t *testing.T) {
	mock, mockURL := startMock(t, mockllm.Config{})
	closed := make(chan string, 4)
	mock.SetOnClose(func(id string, _ time.Time) { closed <- id })
	g := startHoldbackGateway(t, mockURL, hbConfig)
	text := hbText + strings.Repeat(" and more words", 20)
	markerAt := strings.Index(text, hbMarker)
	var cuts []int
	for c := 10; c < len(text); c += 10 {
		cuts = append(cuts, c)
	}
	start := time.Now()
	events, done, _ := hbPost(t, g, "cancel", hbBody(true), text, cuts, "X-Mock-Inter-Token", "20ms")
	checkStopped(t, g, "cancel", events, done, text[:markerAt])
	select {
	case id := <-closed:
		if id != "cancel" {
			t.Errorf("the mock saw request %q close", id)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the upstream was not canceled")
	}
	// The whole reply would take len(cuts) × 20 ms.
	if el := time.Since(start); el > time.Duration(len(cuts))*20*time.Millisecond/2 {
		t.Errorf("the reply took %v", el)
	}
	if st := mock.Stats(); st.Completed != 0 {
		t.Errorf("mock stats %+v: the stream completed", st)
	}
}

// TestHoldbackToolCallOrdering: text held back when a tool-call event
// arrives goes out in that event, before its tool call.
func TestHoldbackToolCallOrdering(t *testing.T) {
	_, mockURL := startMock(t, mockllm.Config{})
	g := startHoldbackGateway(t, mockURL, hbConfig)
	text := "Let me draw it: oaidalle"
	events, done, _ := hbPost(t, g, "toolcall", hbBody(true), text, []int{10}, "X-Mock-Tool-Call-At", strconv.Itoa(len(text)))
	if !done || hbContent(events) != text {
		t.Fatalf("content %q done %v", hbContent(events), done)
	}
	var order []string
	for _, e := range events {
		switch {
		case e.ToolCalls:
			order = append(order, "tool_call+"+*e.Content)
		case e.Content != nil && *e.Content != "":
			order = append(order, *e.Content)
		case e.FinishReason != nil:
			order = append(order, "finish:"+*e.FinishReason)
		}
	}
	if want := []string{"Let me dra", "w it: ", "tool_call+oaidalle", "finish:tool_calls"}; strings.Join(order, "|") != strings.Join(want, "|") {
		t.Fatalf("events %q, want %q", order, want)
	}
}

// TestHoldbackUpstreamError: a stream the upstream breaks off reaches the
// client as it does without the guard (the text, then the error event),
// except a held tail, which is never released unchecked.
func TestHoldbackUpstreamError(t *testing.T) {
	_, mockURL := startMock(t, mockllm.Config{})
	guarded := startHoldbackGateway(t, mockURL, hbConfig)
	plain := startHoldbackGateway(t, mockURL, "")
	const text = "one two three four five six seven"
	hdr := []string{"X-Mock-Cut-After", "4"} // the role event and three pieces
	var bodies []string
	for _, g := range []*hbGateway{guarded, plain} {
		events, done, raw := hbPost(t, g, "cut", hbBody(true), text, []int{4, 8, 14, 19}, hdr...)
		if done || events[len(events)-1].Error != "upstream_stream_error" || hbContent(events) != "one two three " {
			t.Fatalf("content %q done %v events %+v", hbContent(events), done, events)
		}
		bodies = append(bodies, regexp.MustCompile(`"id":"[^"]*","object":"chat.completion.chunk","created":\d+`).ReplaceAllString(string(raw), ""))
	}
	if bodies[0] != bodies[1] {
		t.Fatalf("with the guard:\n%s\nwithout:\n%s", bodies[0], bodies[1])
	}
	events, _, _ := hbPost(t, guarded, "cut-held", hbBody(true), "one https://oaidalle", []int{4, 12}, "X-Mock-Cut-After", "3")
	if got := hbContent(events); got != "one https://" || events[len(events)-1].Error != "upstream_stream_error" {
		t.Fatalf("held tail: content %q, events %+v", got, events)
	}
	if sent, _, _ := guarded.probe(t, "cut-held"); sent != len("one https://") {
		t.Fatalf("held tail: counted %d text bytes", sent)
	}
}

// TestHoldbackClientCancel: a client that goes away mid-stream cancels the
// upstream as it does without the guard.
func TestHoldbackClientCancel(t *testing.T) {
	mock, mockURL := startMock(t, mockllm.Config{})
	closed := make(chan time.Time, 1)
	mock.SetOnClose(func(_ string, at time.Time) { closed <- at })
	g := startHoldbackGateway(t, mockURL, hbConfig)
	c, err := net.Dial("tcp", strings.TrimPrefix(g.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	body := hbBody(true)
	text := "first words, then https://oaidalle and more"
	fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-Request-Id: gone\r\nX-Mock-Text: %s\r\nX-Mock-Split: 12,30\r\nX-Mock-Inter-Token: 2s\r\nContent-Length: %d\r\n\r\n%s",
		url.QueryEscape(text), len(body), body)
	br := bufio.NewReader(c)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the reply: %v", err)
		}
		if strings.Contains(line, `"content":"first words,"`) {
			break
		}
	}
	time.Sleep(50 * time.Millisecond)
	t0 := time.Now()
	c.Close()
	select {
	case at := <-closed:
		if gap := at.Sub(t0); gap > 100*time.Millisecond {
			t.Errorf("the upstream saw the close after %v", gap)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the upstream never saw the close")
	}
	waitFor(t, func() bool { return g.srv.InFlight() == 0 })
	if sent, action, flags := g.probe(t, "gone"); sent != len("first words,") || action != "" || flags&2 == 0 {
		t.Fatalf("counted %d text bytes, guard_action %q, end flags %d", sent, action, flags)
	}
}

// TestHoldbackNonStreaming: a reply that is not streamed is checked whole
// and its content replaced by the correction.
func TestHoldbackNonStreaming(t *testing.T) {
	_, mockURL := startMock(t, mockllm.Config{})
	g := startHoldbackGateway(t, mockURL, hbConfig)
	for _, tt := range []struct {
		id, body, want, action string
	}{
		{"whole-stop", hbBody(false), hbCorrection, "holdback:replaced"},
		{"whole-evidence", hbBody(false, `{"role":"user","content":"draw"}`, hbToolMessage), hbText, ""},
	} {
		status, _, raw := post(t, g.url+"/v1/chat/completions", tt.body, "X-Request-Id", tt.id, "X-Mock-Text", url.QueryEscape(hbText))
		var v struct {
			Choices []struct {
				Message      struct{ Content string } `json:"message"`
				FinishReason string                   `json:"finish_reason"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(raw, &v); err != nil || status != 200 || len(v.Choices) != 1 || v.Choices[0].Message.Content != tt.want {
			t.Fatalf("%s: %d %s (%v)", tt.id, status, raw, err)
		}
		if sent, action, _ := g.probe(t, tt.id); sent != len(tt.want) || action != tt.action {
			t.Fatalf("%s: counted %d text bytes, guard_action %q", tt.id, sent, action)
		}
	}
}

// TestHoldbackBufferMode: the comparison mode sends nothing before the
// reply is complete, then all of it.
func TestHoldbackBufferMode(t *testing.T) {
	_, mockURL := startMock(t, mockllm.Config{})
	g := startHoldbackGateway(t, mockURL, `{markers: ["`+hbMarker+`"], correction: "`+hbCorrection+`", mode: buffer}`)
	events, done, _ := hbPost(t, g, "buffer-evidence", hbBody(true, `{"role":"user","content":"draw"}`, hbToolMessage), hbText, []int{30, 60})
	if hbContent(events) != hbText || !done {
		t.Fatalf("content %q", hbContent(events))
	}
	events, done, _ = hbPost(t, g, "buffer-stop", hbBody(true), hbText, []int{30, 60})
	checkStopped(t, g, "buffer-stop", events, done, "")
}
