package upstream

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/url"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/config"
)

// An Anthropic upstream gets its key as x-api-key, never as Authorization;
// anthropic-version is the caller's to write (Request.Header).
func TestAnthropicKeyHeader(t *testing.T) {
	reqs := make(chan string, 1)
	srv := newRawServer(t, func(c net.Conn, br *bufio.Reader) {
		r, err := readRequest(br)
		if err != nil {
			return
		}
		reqs <- r
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	})
	u, _ := url.Parse("http://" + srv.ln.Addr().String() + "/v1")
	c := New(&config.Upstream{Name: "claude", Provider: config.ProviderAnthropic, AnthropicVersion: "2023-06-01", URL: u,
		Timeouts: config.Timeouts{Connect: time.Second, FirstByte: 2 * time.Second, Idle: 2 * time.Second}, MaxConnections: 1, APIKey: "sk-ant"})
	t.Cleanup(c.Close)
	if !c.Anthropic() || c.Provider() != config.ProviderAnthropic || c.AnthropicVersion() != "2023-06-01" {
		t.Fatalf("provider %q anthropic %v version %q", c.Provider(), c.Anthropic(), c.AnthropicVersion())
	}
	ex, err := c.Do(context.Background(), &Request{Method: "POST", Path: "/messages", Header: []byte("anthropic-version: 2023-06-01\r\n"), Body: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	ex.Release()
	want := "POST /v1/messages HTTP/1.1\r\nHost: " + srv.ln.Addr().String() + "\r\nx-api-key: sk-ant\r\nanthropic-version: 2023-06-01\r\nContent-Length: 2\r\n\r\n{}"
	if got := <-reqs; got != want {
		t.Errorf("request on the wire:\n%q\nwant\n%q", got, want)
	}
	if o := New(&config.Upstream{Name: "o", URL: u, MaxConnections: 1}); o.Anthropic() || o.AnthropicVersion() != "" {
		t.Error("an OpenAI upstream reports Anthropic")
	}
}
