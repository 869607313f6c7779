package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// chunk frames one HTTP/1.1 chunk.
func chunk(s string) string { return fmt.Sprintf("%x\r\n%s\r\n", len(s), s) }

// TestStreamEventsThatArriveTogetherLeaveTogether: an upstream that frames
// every SSE event in its own HTTP chunk (as servers that flush per event
// do) sends two events in one write, then, 100 ms later, the rest. The
// client gets the first two in one chunk, that is one write of the
// gateway, not one per event; the bytes are the upstream's.
func TestStreamEventsThatArriveTogetherLeaveTogether(t *testing.T) {
	const (
		role  = "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"mock-1\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}]}\n\n"
		hello = "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"mock-1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hello\"},\"finish_reason\":null}]}\n\n"
		world = "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"mock-1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\" world\"},\"finish_reason\":\"stop\"}]}\n\n"
		done  = "data: [DONE]\n\n"
	)
	chunks := streamThrough(t, []string{role, hello}, []string{world, done})
	if got := strings.Join(chunks, ""); got != role+hello+world+done {
		t.Fatalf("the stream the client got differs from the upstream's:\n%q", got)
	}
	if chunks[0] != role+hello {
		t.Fatalf("the two events that arrived together left in separate writes: first chunk %q (%d chunks)", chunks[0], len(chunks))
	}
}

// TestStreamBatchLeavesAsOneChunk: events that arrive together leave as
// one chunk however many bytes they make — here 40 events, ~7 KB, past the
// 4 KB a body stream's read takes at a time — so one write.
func TestStreamBatchLeavesAsOneChunk(t *testing.T) {
	var first []string
	for i := range 40 {
		first = append(first, fmt.Sprintf("data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"mock-1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"word %03d of the batch \"},\"finish_reason\":null}]}\n\n", i))
	}
	done := "data: [DONE]\n\n"
	chunks := streamThrough(t, first, []string{done})
	batch := strings.Join(first, "")
	if got := strings.Join(chunks, ""); got != batch+done {
		t.Fatalf("the stream the client got differs from the upstream's:\n%q", got)
	}
	if len(batch) <= 4096 || len(batch) > 8000 {
		t.Fatalf("the batch is %d bytes: the test wants one past 4 KB that fits the gateway's 8 KB write buffer", len(batch))
	}
	if chunks[0] != batch {
		t.Fatalf("%d bytes of events that arrived together left in %d chunks (first %d bytes), want one", len(batch), len(chunks)-1, len(chunks[0]))
	}
}

// chunkedUpstream starts an upstream that reads each request and answers
// it with a chunked event stream's status and headers, then hands the
// connection to events, which writes the body; it returns its address.
func chunkedUpstream(t *testing.T, events func(c net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				req, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					return
				}
				io.Copy(io.Discard, req.Body)
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
				events(c)
			}()
		}
	}()
	return ln.Addr().String()
}

// streamThrough runs a stream through a gateway from an upstream that
// frames every event in its own HTTP chunk: the events of first in one
// write, then, 100 ms later, those of rest and the end. It returns the
// chunks the client got, in order, without the last (empty) one.
func streamThrough(t *testing.T, first, rest []string) []string {
	t.Helper()
	frame := func(events []string) string {
		var b strings.Builder
		for _, e := range events {
			b.WriteString(chunk(e))
		}
		return b.String()
	}
	addr := chunkedUpstream(t, func(c net.Conn) {
		time.Sleep(20 * time.Millisecond)
		io.WriteString(c, frame(first)) // one write, a chunk per event
		time.Sleep(100 * time.Millisecond)
		io.WriteString(c, frame(rest)+"0\r\n\r\n")
	})
	_, gw := startGateway(t, policy("http://"+addr, ""), nil)

	br, _ := postStream(t, gw, `{"model":"mock-1","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if line == "\r\n" {
			break
		}
		if strings.HasPrefix(strings.ToLower(line), "transfer-encoding:") && !strings.Contains(line, "chunked") {
			t.Fatalf("not chunked: %q", line)
		}
	}
	var chunks []string
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		n, err := strconv.ParseInt(strings.TrimSpace(line), 16, 64)
		if err != nil {
			t.Fatalf("chunk size %q", line)
		}
		data := make([]byte, n+2)
		if _, err := io.ReadFull(br, data); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		chunks = append(chunks, string(data[:n]))
	}
	return chunks
}

// postStream sends body to the gateway's chat completions on a connection
// of its own and reads the status line, which must say 200; it returns the
// reader positioned after it and how long the status line took to come.
func postStream(t *testing.T, gw, body string) (*bufio.Reader, time.Duration) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(gw, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	start := time.Now()
	fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	status, err := br.ReadString('\n')
	if err != nil || !strings.Contains(status, " 200 ") {
		t.Fatalf("status %q %v", status, err)
	}
	return br, time.Since(start)
}

// TestStreamHeadersGoOutAtOnce: a stream's status and headers reach the
// client as soon as the upstream's do, not with the first event, when the
// events are slow to come (here 600 ms after the headers).
func TestStreamHeadersGoOutAtOnce(t *testing.T) {
	const event = "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"mock-1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"late\"},\"finish_reason\":\"stop\"}]}\n\n"
	const wait = 600 * time.Millisecond
	addr := chunkedUpstream(t, func(c net.Conn) {
		time.Sleep(wait)
		io.WriteString(c, chunk(event)+chunk("data: [DONE]\n\n")+"0\r\n\r\n")
	})
	_, gw := startGateway(t, policy("http://"+addr, ""), nil)
	br, took := postStream(t, gw, `{"model":"mock-1","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	if took > wait/2 {
		t.Fatalf("the status line came %v after the request, with the first event; want it at once", took)
	}
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("the event never came: %v", err)
		}
		if strings.Contains(line, "late") {
			return
		}
	}
}
