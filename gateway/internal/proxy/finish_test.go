package proxy

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/cancels"
)

// The end work (metrics, access log, call log, end phase) of a request
// runs once its reply is flushed, on the connection's goroutine: it must
// not wait for the client's next request or for the connection to close.
func TestEndWorkRunsWhileTheConnectionStaysOpen(t *testing.T) {
	h := &hits{}
	up := newFakeUpstream(t, "a", h, step{})
	g := startTestGateway(t, routingPolicy(upstreamYAML("a", up.url, ""), `- {models: [m], upstream: a}`))
	c, err := net.Dial("tcp", strings.TrimPrefix(g.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	send := func(id string, stream bool) *http.Response {
		t.Helper()
		if stream {
			up.set(step{stream: true})
		} else {
			up.set(step{})
		}
		body := fmt.Sprintf(`{"model":"m","stream":%v,"messages":[{"role":"user","content":"hi"}]}`, stream)
		fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-Request-Id: %s\r\nContent-Length: %d\r\n\r\n%s", id, len(body), body)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		var sb strings.Builder
		if _, err := bufio.NewReader(resp.Body).WriteTo(&sb); err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Close {
			t.Fatalf("%s: status %d, close %v: %s", id, resp.StatusCode, resp.Close, sb.String())
		}
		return resp
	}
	for i, stream := range []bool{false, true, false} {
		id := fmt.Sprintf("open-%d", i)
		send(id, stream)
		// The connection stays open and idle: the line must come anyway.
		if up, _ := g.log.served(t, id); up != "a" {
			t.Fatalf("%s: access log upstream %q", id, up)
		}
		for end := time.Now().Add(2 * time.Second); g.srv.fin.pending.Load() != 0; time.Sleep(time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("%s: %d exchanges still parked after the access log line", id, g.srv.fin.pending.Load())
			}
		}
	}
	checkMetrics(t, g.metrics(t, "tollgate_requests_total"), map[string]string{
		`tollgate_requests_total{endpoint="/v1/chat/completions",model="m",status="200",upstream="a"}`: "3",
	})
}

// Every way out of an exchange — a whole reply, an upstream error, a
// stream to its end or cut short, an upstream that cannot be reached —
// goes through the one teardown: once the end work ran, the request is
// no longer counted in flight nor known to the cancel registry.
func TestEveryExitLeavesTheBooks(t *testing.T) {
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close() // a port nothing listens on
	tests := []struct {
		name       string
		step       step
		stream     bool
		unreached  bool
		wantStatus int
	}{
		{"whole reply", step{}, false, false, 200},
		{"upstream error", step{status: 400}, false, false, 400},
		{"stream", step{stream: true}, true, false, 200},
		{"stream cut", step{stream: true, cut: true}, true, false, 200},
		{"unreachable", step{}, false, true, 502},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := newFakeUpstream(t, "a", &hits{}, tt.step)
			url := up.url
			if tt.unreached {
				url = dead.URL
			}
			g := startTestGateway(t, routingPolicy(upstreamYAML("a", url, ""), `- {models: [m], upstream: a}`))
			r := g.chat(t, "m", tt.stream)
			if r.status != tt.wantStatus {
				t.Fatalf("status %d, want %d: %s", r.status, tt.wantStatus, r.body)
			}
			g.log.served(t, r.id) // the end work ran
			for end := time.Now().Add(2 * time.Second); g.srv.fin.pending.Load() != 0 || g.srv.InFlight() != 0; time.Sleep(time.Millisecond) {
				if time.Now().After(end) {
					t.Fatalf("after the end work: %d parked, %d in flight", g.srv.fin.pending.Load(), g.srv.InFlight())
				}
			}
			found, err := g.srv.cancels.Cancel(context.Background(), r.id, cancels.AnyTenant)
			if err != nil || found {
				t.Errorf("the ended request is still in the cancel registry (found %v, err %v)", found, err)
			}
		})
	}
}
