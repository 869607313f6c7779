package mockllm

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/tollgate/tollgate/gateway/internal/bedrock"
	"github.com/tollgate/tollgate/gateway/internal/sigv4"
	"github.com/tollgate/tollgate/gateway/internal/upstream"
)

// TestBedrockGatewayPieces drives the mock with what the gateway sends a
// Bedrock upstream, built by its own pieces (bedrock.AppendRequest and
// AppendPath, the sigv4 authorizer), and reads the replies with
// bedrock.AppendResponse and bedrock.StreamReader: the mock verifies the
// signature, the translation reads what the mock sends.
func TestBedrockGatewayPieces(t *testing.T) {
	srv := httptest.NewServer(New(Config{AWSSecretKeys: map[string]string{testAWSKeyID: testAWSSecret}}))
	defer srv.Close()
	auth := sigv4.New(sigv4.Options{Upstream: "mock", Region: "us-west-2",
		Credentials: credentials.NewStaticCredentialsProvider(testAWSKeyID, testAWSSecret, "")})
	chat := []byte(`{"model":"claude","messages":[{"role":"user","content":"Weather?"}],"tools":[{"type":"function","function":{"name":"mock_tool"}}]}`)
	for _, stream := range []bool{false, true} {
		body, err := bedrock.AppendRequest(nil, chat)
		if err != nil {
			t.Fatal(err)
		}
		path := bedrock.AppendPath(nil, testModelID, stream)
		host := strings.TrimPrefix(srv.URL, "http://")
		lines, err := auth.AppendAuth(nil, &upstream.AuthRequest{Method: "POST", Host: host, Path: path, Body: body, Now: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest("POST", srv.URL+string(path), bytes.NewReader(body))
		for _, l := range strings.Split(strings.TrimSpace(string(lines)), "\r\n") {
			k, v, _ := strings.Cut(l, ": ")
			req.Header.Set(k, v)
		}
		for k, v := range toolHeaders {
			req.Header.Set(k, v)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("stream %v: %d %s", stream, resp.StatusCode, raw)
		}
		var got []byte
		if stream {
			r := bedrock.NewStreamReader(0)
			r.Reset(bytes.NewReader(raw), "claude", "chatcmpl-1", 1, true)
			if got, err = io.ReadAll(r); err != nil {
				t.Fatal(err)
			}
		} else if got, err = bedrock.AppendResponse(nil, raw, "claude", "chatcmpl-1", 1); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{`"Let m`, `"name":"mock_tool"`, `"finish_reason":"tool_calls"`, `"prompt_tokens":2,"completion_tokens":4,"total_tokens":6`} {
			if !bytes.Contains(got, []byte(want)) {
				t.Errorf("stream %v: %s lacks %s", stream, got, want)
			}
		}
	}
}
