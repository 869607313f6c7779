package e2e

import (
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/gateway/internal/testkit/mockllm"
)

// TestHoldbackReplyToolCall: the model calls a tool in the reply with the
// image URL in its arguments, which arrive in two fragments cut inside
// the URL; the same URL in the text after the call passes, another URL on
// the host is still cut.
func TestHoldbackReplyToolCall(t *testing.T) {
	t.Parallel() // checks no time (see the package doc)
	_, mockURL := startMock(t, mockllm.Config{})
	g := startHoldbackGateway(t, mockURL, hbConfig)
	const intro = "Drawing it now."
	args := `{"prompt":"cat","url":"` + hbURL + `"}`
	cut := strings.Index(args, hbMarker) + 10
	fragments := url.QueryEscape(args[:cut]) + "," + url.QueryEscape(args[cut:])
	other := "https://" + hbMarker + "/private/org-1/other.png"
	tests := []struct {
		id, text string
		stopped  bool
	}{
		{"reply-tool-call-same", intro + " Here it is: ![image](" + hbURL + ") enjoy!", false},
		{"reply-tool-call-other", intro + " Here it is: ![image](" + other + ") enjoy!", true},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			events, done, raw := hbPost(t, g, tt.id, hbBody(true), tt.text, []int{len(intro), len(intro) + 20, len(intro) + 60},
				"X-Mock-Tool-Call-At", strconv.Itoa(len(intro)), "X-Mock-Tool-Call-Args", fragments)
			calls := 0
			for _, e := range events {
				if e.ToolCalls {
					calls++
				}
			}
			if calls != 2 {
				t.Fatalf("%d tool-call events reached the client, want 2:\n%s", calls, raw)
			}
			if tt.stopped {
				checkStopped(t, g, tt.id, events, done, tt.text[:strings.Index(tt.text, hbMarker)])
				return
			}
			last := events[len(events)-1]
			if got := hbContent(events); got != tt.text || !done || last.FinishReason == nil || *last.FinishReason != "tool_calls" {
				t.Fatalf("content %q, done %v, last event %+v", got, done, last)
			}
			if sent, action, _ := g.probe(t, tt.id); sent != len(tt.text) || action != "" {
				t.Fatalf("counted %d text bytes (client got %d), guard_action %q", sent, len(tt.text), action)
			}
		})
	}
}
