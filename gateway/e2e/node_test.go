package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/testkit/mockllm"
	"github.com/tollgate/tollgate/sdk/wasmbuild"
)

// TestOpenAINodeSDKStreams streams a chat completion through the gateway
// with the official OpenAI Node SDK (npm "openai"), installed by
// `make test-deps`.
func TestOpenAINodeSDKStreams(t *testing.T) {
	t.Parallel() // checks no time (see the package doc)
	dir, node := nodeWith(t, "openai")
	const text = "Héllo from the mock — the whole text, in small pieces, through the gateway."
	_, mockURL := startMock(t, mockllm.Config{Text: text, ChunkSize: 3, InterToken: time.Millisecond})
	_, gw := startGateway(t, policy(mockURL, "", "mock-1", "mock-2"), nil)

	cmd := exec.Command(node, "stream.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GATEWAY_URL="+gw)
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("node: %v\n%s", err, stderr)
	}
	var got struct {
		Text         string   `json:"text"`
		Chunks       int      `json:"chunks"`
		FinishReason string   `json:"finish_reason"`
		Models       []string `json:"models"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("node output %q: %v", out, err)
	}
	if got.Text != text {
		t.Errorf("SDK text %q, want %q", got.Text, text)
	}
	if got.FinishReason != "stop" || got.Chunks < 10 {
		t.Errorf("SDK saw %d chunks, finish %q", got.Chunks, got.FinishReason)
	}
	if len(got.Models) != 2 || got.Models[0] != "mock-1" {
		t.Errorf("SDK models %v", got.Models)
	}
}

// nodeWith returns the directory of the Node end-to-end scripts and the
// node binary, failing the test when node or the npm package pkg (both
// installed by `make test-deps`) is missing.
func nodeWith(t *testing.T, pkg string) (dir, node string) {
	t.Helper()
	dir = filepath.Join(repoRoot(t), "gateway/e2e/testdata/node")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", pkg)); err != nil {
		t.Fatalf("the %s npm package is not installed: run `make test-deps` (or npm ci in %s)", pkg, dir)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is not installed: run `make test-deps`")
	}
	return dir, node
}

// TestOpenAINodeSDKResponses streams Responses API replies through the
// gateway, with the holdback guard on, to an upstream with the Responses
// API and to one translated from chat (Anthropic), with the official
// OpenAI Node SDK's responses.stream helper: the events are numbered as
// the SDK expects, its accumulated final Response has the text the deltas
// carried, and a guard's stop ends the stream with response.incomplete
// (content_filter) that the SDK accepts.
func TestOpenAINodeSDKResponses(t *testing.T) {
	t.Parallel() // checks no time (see the package doc)
	dir, node := nodeWith(t, "openai")
	guard, err := wasmbuild.Cached(repoRoot(t) + "/plugins/holdback")
	if err != nil {
		t.Fatal(err)
	}
	_, anthURL := startAnthropicMock(t, mockllm.Config{})
	_, openaiURL := startMock(t, mockllm.Config{})
	pol := anthropicPolicy(anthURL, openaiURL, "", "") + fmt.Sprintf("plugins:\n  - name: holdback\n    path: %s\n    on_error: fail_closed\n    config: %s\n", guard, hbConfig)
	gw, _ := startLoggingGateway(t, pol, anthropicVars)
	clean := strings.ReplaceAll(hbText, hbMarker, "example.com")
	stopped := hbText[:strings.Index(hbText, hbMarker)] + hbCorrection
	for _, model := range []string{"mock-1", "claude-x"} {
		for _, tc := range []struct{ name, text, want, last, reason string }{
			{"clean", clean, clean, "response.completed", ""},
			{"marker", hbText, stopped, "response.incomplete", "content_filter"},
		} {
			t.Run(model+" "+tc.name, func(t *testing.T) {
				cmd := exec.Command(node, "responses.mjs")
				cmd.Dir = dir
				cmd.Env = append(os.Environ(), "GATEWAY_URL="+gw, "MODEL="+model, "TEXT="+tc.text)
				out, err := cmd.Output()
				if err != nil {
					var stderr []byte
					if ee, ok := err.(*exec.ExitError); ok {
						stderr = ee.Stderr
					}
					t.Fatalf("node: %v\n%s", err, stderr)
				}
				var got struct {
					Deltas    string   `json:"deltas"`
					FinalText string   `json:"final_text"`
					Types     []string `json:"types"`
					Last      string   `json:"last"`
					Reason    string   `json:"reason"`
					SeqOK     bool     `json:"seq_ok"`
				}
				if err := json.Unmarshal(out, &got); err != nil {
					t.Fatalf("node output %q: %v", out, err)
				}
				if got.Deltas != tc.want || got.FinalText != tc.want {
					t.Errorf("deltas %q, SDK's final text %q, want %q", got.Deltas, got.FinalText, tc.want)
				}
				if !got.SeqOK || len(got.Types) == 0 || got.Types[0] != "response.created" || got.Last != tc.last || got.Reason != tc.reason {
					t.Errorf("events %v (numbered in order: %v), last %s reason %q; want last %s reason %q", got.Types, got.SeqOK, got.Last, got.Reason, tc.last, tc.reason)
				}
			})
		}
	}
}
