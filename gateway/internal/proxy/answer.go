package proxy

import (
	"context"
	"fmt"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/openai"
	"github.com/tollgate/tollgate/gateway/internal/proxy/stream"
	"github.com/tollgate/tollgate/gateway/internal/respcache"
	"github.com/tollgate/tollgate/gateway/internal/upstream"
	"github.com/tollgate/tollgate/sdk/wasmhost"
)

// Answers: a request-phase plugin (RESPOND) or the response cache's
// lookup may answer a request itself. The answer is served as if an
// OpenAI-compatible upstream had sent it — an upstream.Exchange read from
// memory — so the response_headers, chunk and end phases, the metering
// and the call log run on it as on any reply (sdk/ABI.md, "Answering a
// request"; docs/adr/0028-response-cache.md).

// answerable reports whether the gateway can serve an answer on ep: the
// OpenAI endpoints whose replies it reads (chat, completions, embeddings).
func answerable(ep openai.Endpoint) bool {
	return ep == openai.ChatCompletions || ep == openai.Completions || ep == openai.Embeddings
}

// openaiBinding is the binding an answer is read through: OpenAI's format,
// nothing to translate.
var openaiBinding = &binding{}

// answerExchange makes the request's answer its reply: a stream for a
// streamed request, a whole reply otherwise (converted when the answer is
// the other kind). It fails for an answer that cannot be converted.
func (x *exchange) answerExchange() (*upstream.Exchange, error) {
	a := &x.wr.Answer
	x.answeredBy = a.Source
	x.bind = openaiBinding
	streamed := x.req.Stream && x.ep != openai.Embeddings
	ok := a.Status >= 200 && a.Status < 300
	switch {
	case streamed && ok:
		events := a.Events
		if !a.IsStream() {
			var err error
			if events, err = respcache.EventsFromWhole(a.Body); err != nil {
				return nil, fmt.Errorf("the answer of %q cannot be streamed: %w", a.Source, err)
			}
		}
		b := x.answer[:0]
		for _, e := range events {
			b = append(append(append(b, "data: "...), e...), "\n\n"...)
		}
		x.answer = append(b, "data: [DONE]\n\n"...)
		return upstream.NewAnswer(a.Source, a.Status, "text/event-stream", x.answer), nil
	case a.IsStream():
		body, err := respcache.WholeFromEvents(a.Events)
		if err != nil {
			return nil, fmt.Errorf("the answer of %q cannot be made one reply: %w", a.Source, err)
		}
		return upstream.NewAnswer(a.Source, a.Status, "application/json", body), nil
	}
	// The plugins' request holds the body until the exchange ends, after
	// the reply read from it.
	return upstream.NewAnswer(a.Source, a.Status, "application/json", a.Body), nil
}

// invalidAnswer is the error a client gets for an answer the gateway
// cannot serve.
func invalidAnswer(err error) *openai.Error {
	return &openai.Error{Status: 500, Type: "server_error", Code: "invalid_answer", Message: err.Error()}
}

// capture is a reply kept for the response cache while it is served: a
// stream's events (data only, in order) in one buffer.
type capture struct {
	buf  []byte
	ends []int // each event's end in buf
	// spoiled: an event was not a reply's chunk, or the reply outgrew
	// the cap; it is not stored.
	spoiled bool
	max     int
}

// RecordEvent implements stream.Recorder.
func (c *capture) RecordEvent(data []byte, ok bool) {
	if c.spoiled {
		return
	}
	if !ok || len(c.buf)+len(data) > c.max {
		c.spoiled = true
		c.buf, c.ends = c.buf[:0], c.ends[:0]
		return
	}
	c.buf = append(c.buf, data...)
	c.ends = append(c.ends, len(c.buf))
}

func (c *capture) reset(max int) {
	c.buf, c.ends, c.spoiled, c.max = c.buf[:0], c.ends[:0], false, max
}

// events returns the captured events (aliasing the buffer).
func (c *capture) events() [][]byte {
	ev := make([][]byte, len(c.ends))
	start := 0
	for i, end := range c.ends {
		ev[i] = c.buf[start:end:end]
		start = end
	}
	return ev
}

// maxCaptureBytes bounds a reply kept for the cache; the store's own cap
// (cache.max_entry_bytes) decides what is stored.
const maxCaptureBytes = 16 << 20

// storeReply stores a completed reply the cache asked for, before the
// reply's last byte goes out (end): a client that has the whole reply and
// asks again finds it. Only a 200 that completed, that no guard stopped,
// changed or failed on, and whose events were all a reply's, is stored.
func (x *exchange) storeReply(flags uint32, status int) {
	if !x.svc.CacheWantsReply() {
		return
	}
	defer x.svc.CacheDone()
	if x.answeredBy != "" || status != 200 || flags != wasmhost.EndCompleted || x.noStore {
		return
	}
	prompt, completion, _ := x.tokens(flags)
	e := respcache.Entry{Model: string(x.req.Model), PromptTokens: prompt, CompletionTokens: completion}
	if x.req.Stream && x.ep != openai.Embeddings {
		if x.cap.spoiled || len(x.cap.ends) == 0 {
			return
		}
		e.Stream, e.Events = true, x.cap.events()
	} else {
		if len(x.resp) == 0 {
			return
		}
		e.Body = x.resp
	}
	ctx, cancel := context.WithTimeout(x.s.base, time.Second)
	defer cancel()
	x.svc.CacheStore(ctx, &e)
}

// recorder is the stream's Recorder: the capture when the response cache
// wants the reply, else none.
func (x *exchange) recorder() stream.Recorder {
	if x.answeredBy != "" || !x.svc.CacheWantsReply() {
		return nil
	}
	return &x.cap
}
