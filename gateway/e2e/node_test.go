package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/testkit/mockllm"
)

// TestOpenAINodeSDKStreams streams a chat completion through the gateway
// with the official OpenAI Node SDK (npm "openai"), installed by
// `make test-deps`.
func TestOpenAINodeSDKStreams(t *testing.T) {
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
