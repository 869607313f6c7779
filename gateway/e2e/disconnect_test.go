package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/testkit/mockllm"
)

// TestClientDisconnectCancelsUpstream closes the client's connection while
// the gateway waits on the upstream and measures when the upstream (the
// mock) sees its own connection close. Budget: 100 ms.
func TestClientDisconnectCancelsUpstream(t *testing.T) {
	tests := []struct {
		name      string
		hdr       string
		readFirst int // bytes of the reply to read before closing
		stream    bool
	}{
		{"waiting for the first token", "X-Mock-TTFT: 5s\r\n", 0, true},
		{"mid-stream between tokens", "X-Mock-Inter-Token: 2s\r\nX-Mock-Tokens: 5\r\n", 1, true},
		{"non-streaming request", "X-Mock-TTFT: 5s\r\n", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mock, mockURL := startMock(t, mockllm.Config{})
			closed := make(chan time.Time, 1)
			mock.SetOnClose(func(_ string, at time.Time) { closed <- at })
			srv, gw := startGateway(t, policy(mockURL, ""), nil)

			c, err := net.Dial("tcp", strings.TrimPrefix(gw, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			body := fmt.Sprintf(`{"model":"mock-1","stream":%v,"messages":[{"role":"user","content":"hi"}]}`, tt.stream)
			fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n%sContent-Length: %d\r\n\r\n%s", tt.hdr, len(body), body)
			if tt.readFirst > 0 {
				br := bufio.NewReader(c)
				// Read up to the first content event, so the upstream is mid-stream.
				for {
					line, err := br.ReadString('\n')
					if err != nil {
						t.Fatalf("reading reply: %v", err)
					}
					if strings.Contains(line, `"content":"tok0`) {
						break
					}
				}
			} else {
				waitFor(t, func() bool { return srv.InFlight() == 1 })
			}
			time.Sleep(50 * time.Millisecond) // let the upstream settle into its wait
			closeAndWaitUpstream(t, c, closed, 100*time.Millisecond, 2*time.Second)
			waitFor(t, func() bool { return srv.InFlight() == 0 })
		})
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(2 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatal("condition not met within 3s")
}

// TestKeepAliveReuse checks that a client connection and the upstream pool
// carry many requests, streamed and not, with nothing left in flight.
func TestKeepAliveReuse(t *testing.T) {
	mock, mockURL := startMock(t, mockllm.Config{Tokens: 3})
	srv, gw := startGateway(t, policy(mockURL, ""), nil)
	c, err := net.Dial("tcp", strings.TrimPrefix(gw, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	for i := 0; i < 20; i++ {
		body := fmt.Sprintf(`{"model":"mock-1","stream":%v,"messages":[{"role":"user","content":"hi"}]}`, i%2 == 0)
		fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		resp, err := readResponse(br)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if !strings.Contains(resp, "tok2") {
			t.Fatalf("request %d: reply lacks the text: %q", i, resp)
		}
	}
	if n := srv.InFlight(); n != 0 {
		t.Errorf("in flight after all replies: %d", n)
	}
	if st := mock.Stats(); st.Requests != 20 || st.ClientClosed != 0 {
		t.Errorf("mock stats %+v: want 20 requests, none closed early", st)
	}
}

// closeAndWaitUpstream closes the client's connection c and waits for the
// upstream to see its request closed (closed receives when): an error if
// that takes longer than bound, fatal if it does not happen within limit.
func closeAndWaitUpstream(t *testing.T, c io.Closer, closed <-chan time.Time, bound, limit time.Duration) {
	t.Helper()
	t0 := time.Now()
	c.Close()
	select {
	case at := <-closed:
		gap := at.Sub(t0)
		t.Logf("upstream saw the close %v after the client closed", gap)
		if gap > bound {
			t.Errorf("upstream saw the close after %v, want < %v", gap, bound)
		}
	case <-time.After(limit):
		t.Fatalf("upstream did not see the close within %v of the client's", limit)
	}
}
