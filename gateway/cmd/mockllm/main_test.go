package main

import (
	"io"
	"maps"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/gateway/internal/testkit/mockllm"
)

// The mock serves through rawListener exactly as through a plain one: a
// reply, a stream to its end, and an error reply on a connection the
// server closes.
func TestRawListener(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mockllm.New(mockllm.Config{Tokens: 3})}
	go srv.Serve(rawListener{ln})
	t.Cleanup(func() { srv.Close() })
	url := "http://" + ln.Addr().String() + "/v1/chat/completions"
	post := func(body string, hdr ...string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("POST", url, strings.NewReader(body))
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		if err != nil {
			t.Fatal(err)
		}
		return res.StatusCode, string(b)
	}
	msg := `{"model":"mock-1","messages":[{"role":"user","content":"hi"}]`
	for range 3 { // the same keep-alive connection
		if code, body := post(msg + `}`); code != 200 || !strings.Contains(body, `"finish_reason":"stop"`) {
			t.Fatalf("reply: %d %s", code, body)
		}
	}
	if code, body := post(msg + `,"stream":true}`); code != 200 || !strings.HasSuffix(body, "data: [DONE]\n\n") {
		t.Fatalf("stream: %d %q", code, body)
	}
	if code, body := post(`{bad`, "Connection", "close"); code != 400 || !strings.Contains(body, "invalid_request_error") {
		t.Fatalf("bad JSON: %d %s", code, body)
	}
}

func TestParseAWSKeys(t *testing.T) {
	tests := []struct {
		in      string
		want    map[string]string
		wantErr bool
	}{
		{in: "", want: nil},
		{in: "  ", want: nil},
		{in: "AKIDTEST=secret", want: map[string]string{"AKIDTEST": "secret"}},
		{in: "A=s/+x=, B=t", want: map[string]string{"A": "s/+x=", "B": "t"}},
		{in: "AKIDTEST", wantErr: true},
		{in: "=secret", wantErr: true},
		{in: "A=s,", wantErr: true},
	}
	for _, tt := range tests {
		got, err := parseAWSKeys(tt.in)
		if (err != nil) != tt.wantErr {
			t.Fatalf("parseAWSKeys(%q) error %v, want error %v", tt.in, err, tt.wantErr)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("parseAWSKeys(%q) error names the secret: %v", tt.in, err)
		}
		if !maps.Equal(got, tt.want) {
			t.Errorf("parseAWSKeys(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}
