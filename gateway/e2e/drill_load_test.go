package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The drills' load: workers that send chat requests (mostly streams) with
// their own X-Request-Id, read every reply to its end and sort it into one
// of a few outcomes. The drills then hold the outcomes against what the
// gateway promised for the fault, and against the ledger.

// drillTokens is the length of every drill reply: the mock's stream is
// tok0 … tok19, each a content event (see drillMockConfig).
const drillTokens = 20

// drillText is the whole text of a drill reply.
var drillText = func() string {
	var b strings.Builder
	for i := 0; i < drillTokens; i++ {
		fmt.Fprintf(&b, "tok%d ", i)
	}
	return b.String()
}()

// drillReq is one request of a drill's load.
type drillReq struct {
	stream bool
	fault  string   // what the drill does to this request; "" for nothing
	hdr    []string // extra request headers: name, value, ...
	// hangUpAfter > 0: the client closes the connection after that many
	// content events; hangUpWait > 0: it gives up waiting for the reply
	// after that long.
	hangUpAfter int
	hangUpWait  time.Duration
}

// outcomeKind is what a client got.
type outcomeKind int

const (
	// served: status 200 and the whole text (a stream: and [DONE]).
	served outcomeKind = iota
	// refused: an error status with an OpenAI-style error body.
	refused
	// ended: a stream that ended with a final OpenAI-style error event.
	ended
	// cut: a reply that stopped without [DONE] or an error event, or
	// whose text was wrong. Only a drill that kills a gateway may cause it.
	cut
	// noReply: no response at all (connection refused or reset first).
	noReply
	// hungUp: the client went away on purpose (drillReq.hangUp*).
	hungUp
)

func (k outcomeKind) String() string {
	return [...]string{"served", "refused", "ended", "cut", "no reply", "hung up"}[k]
}

// drillOutcome is what one request of the load got.
type drillOutcome struct {
	id     string
	fault  string
	target string // the gateway's base URL
	kind   outcomeKind
	status int
	code   string // the error's code, else its type, of a refusal or final error event
	gen    string // the X-Drill-Gen response header
	events int    // content events received
	detail string // why a reply counts as cut
	// started: the request was sent; ended: the reply was read to its end.
	started, ended time.Time
}

// label is the outcome for counting: "served", "refused 503 budget_unavailable", ...
func (o *drillOutcome) label() string {
	switch o.kind {
	case refused:
		return fmt.Sprintf("refused %d %s", o.status, o.code)
	case ended:
		return "ended " + o.code
	}
	return o.kind.String()
}

// drillLoad runs workers sending requests until stopped.
type drillLoad struct {
	t       *testing.T
	prefix  string // request ids are PREFIX-N
	key     string
	workers int
	// next chooses request n's shape.
	next func(n int) drillReq
	// target returns the gateway to send to; not is one that just
	// refused the connection ("" at first).
	target func(not string) string
	// retry: a request that got no reply is sent again (new id) to
	// another gateway, as a load balancer retries a refused connection.
	retry  bool
	client *http.Client

	seq  atomic.Int64
	mu   sync.Mutex
	outs []drillOutcome
	stop chan struct{}
	wg   sync.WaitGroup
	from time.Time
	took time.Duration
}

// newDrillLoad returns a load of workers clients of gateway url (each
// with its own keep-alive connection) with key, shaped by next.
func newDrillLoad(t *testing.T, prefix, url, key string, workers int, next func(int) drillReq) *drillLoad {
	return &drillLoad{t: t, prefix: prefix, key: key, workers: workers, next: next,
		target: func(string) string { return url },
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: workers}}}
}

// healthyStreams is a mix of streams with one non-streamed request in ten.
func healthyStreams(n int) drillReq { return drillReq{stream: n%10 != 0} }

// run sends n requests from the workers and returns when all are done.
func (l *drillLoad) run(n int) {
	jobs := make(chan struct{})
	var wg sync.WaitGroup
	for range l.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range jobs {
				l.one()
			}
		}()
	}
	for range n {
		jobs <- struct{}{}
	}
	close(jobs)
	wg.Wait()
}

// start runs the workers until stopLoad.
func (l *drillLoad) start() {
	l.stop = make(chan struct{})
	l.from = time.Now()
	for range l.workers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for {
				select {
				case <-l.stop:
					return
				default:
				}
				l.one()
			}
		}()
	}
	l.t.Cleanup(l.stopLoad) // also on t.Fatal
}

// stopLoad stops the workers and waits for their last replies.
func (l *drillLoad) stopLoad() {
	if l.stop == nil {
		return
	}
	select {
	case <-l.stop:
		return
	default:
	}
	close(l.stop)
	l.wg.Wait()
	l.took = time.Since(l.from)
}

// outcomes returns a copy of the outcomes so far.
func (l *drillLoad) outcomes() []drillOutcome {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]drillOutcome(nil), l.outs...)
}

// one sends one request (and its retries).
func (l *drillLoad) one() {
	n := int(l.seq.Add(1))
	req := l.next(n)
	not := ""
	for attempt := 0; attempt < 5; attempt++ {
		id := l.prefix + "-" + strconv.Itoa(n)
		if attempt > 0 {
			id += "-retry" + strconv.Itoa(attempt)
		}
		o := l.send(id, l.target(not), req)
		o.ended = time.Now()
		l.mu.Lock()
		l.outs = append(l.outs, o)
		l.mu.Unlock()
		if o.kind == refused {
			// A client pauses after an error reply before its next
			// request (the OpenAI SDKs back off longer), rather than
			// filling a drill with refusals sent as fast as they come.
			time.Sleep(25 * time.Millisecond)
		}
		if o.kind != noReply || !l.retry {
			return
		}
		not = o.target
		time.Sleep(5 * time.Millisecond)
	}
}

// drillBody is a chat request for the whole drill reply.
func drillBody(stream bool) string {
	return fmt.Sprintf(`{"model":"mock-1","stream":%v,"max_tokens":%d,"messages":[{"role":"user","content":"drill"}]}`, stream, drillTokens)
}

// send sends one request to the gateway at url and reads its reply.
func (l *drillLoad) send(id, url string, r drillReq) drillOutcome {
	o := drillOutcome{id: id, fault: r.fault, target: url, started: time.Now()}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	hangUp := ctx
	if r.hangUpWait > 0 {
		var stop context.CancelFunc
		hangUp, stop = context.WithTimeout(ctx, r.hangUpWait)
		defer stop()
	}
	req, err := http.NewRequestWithContext(hangUp, "POST", url+"/v1/chat/completions", strings.NewReader(drillBody(r.stream)))
	if err != nil { // a worker goroutine: no Fatal
		l.t.Error(err)
		o.kind, o.detail = noReply, err.Error()
		return o
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+l.key)
	req.Header.Set("X-Request-Id", id)
	for i := 0; i+1 < len(r.hdr); i += 2 {
		req.Header.Set(r.hdr[i], r.hdr[i+1])
	}
	resp, err := l.client.Do(req)
	switch {
	case err != nil && r.hangUpWait > 0 && errors.Is(hangUp.Err(), context.DeadlineExceeded) && ctx.Err() == nil:
		o.kind = hungUp
		return o
	case err != nil:
		o.kind, o.detail = noReply, err.Error()
		return o
	}
	defer resp.Body.Close()
	o.status, o.gen = resp.StatusCode, resp.Header.Get("X-Drill-Gen")
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		o.kind, o.code = refused, errorCode(b)
		if o.code == "" {
			o.kind, o.detail = cut, fmt.Sprintf("status %d without an OpenAI-style error: %q", resp.StatusCode, tail(string(b), 200))
		}
		return o
	}
	if !r.stream {
		b, err := io.ReadAll(resp.Body)
		var reply struct {
			Choices []struct {
				Message struct{ Content string } `json:"message"`
			} `json:"choices"`
		}
		if jerr := json.Unmarshal(b, &reply); err != nil || jerr != nil || len(reply.Choices) != 1 || reply.Choices[0].Message.Content != drillText {
			o.kind, o.detail = cut, fmt.Sprintf("reply %q (read error %v)", tail(string(b), 200), err)
		} else {
			o.kind, o.events = served, drillTokens
		}
	} else {
		l.readStream(&o, resp.Body, r.hangUpAfter)
	}
	if r.hangUpWait > 0 && o.kind != served && errors.Is(hangUp.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
		o.kind = hungUp // the reply started in time, and the client left during it
	}
	return o
}

// readStream reads an SSE reply and sorts it.
func (l *drillLoad) readStream(o *drillOutcome, body io.Reader, hangUpAfter int) {
	br := bufio.NewReaderSize(body, 4096)
	var text strings.Builder
	done, lastErr := false, ""
	var readErr error
	for {
		line, err := br.ReadString('\n')
		if data, ok := strings.CutPrefix(strings.TrimRight(line, "\n"), "data: "); ok && err == nil {
			if data == "[DONE]" {
				done = true
				continue
			}
			var ev struct {
				Choices []struct {
					Delta struct {
						Content *string `json:"content"`
					} `json:"delta"`
				} `json:"choices"`
			}
			if code := errorCode([]byte(data)); code != "" {
				lastErr = code
				continue
			}
			if json.Unmarshal([]byte(data), &ev) == nil && len(ev.Choices) == 1 && ev.Choices[0].Delta.Content != nil && *ev.Choices[0].Delta.Content != "" {
				text.WriteString(*ev.Choices[0].Delta.Content)
				o.events++
				lastErr = ""
				if hangUpAfter > 0 && o.events == hangUpAfter {
					o.kind = hungUp
					return // the deferred Close hangs up
				}
			}
		}
		if err != nil {
			if err != io.EOF {
				readErr = err
			}
			break
		}
	}
	switch {
	case done && text.String() == drillText && readErr == nil:
		o.kind = served
	case !done && lastErr != "":
		o.kind, o.code = ended, lastErr
	default:
		o.kind = cut
		o.detail = fmt.Sprintf("done=%v read error=%v after %d events, text %q", done, readErr, o.events, tail(text.String(), 60))
	}
}

// errorCode returns the code (else the type) of an OpenAI-style error
// body, "" if b is not one.
func errorCode(b []byte) string {
	var e struct {
		Error *struct {
			Type    string  `json:"type"`
			Code    *string `json:"code"`
			Message string  `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &e) != nil || e.Error == nil || e.Error.Message == "" {
		return ""
	}
	if e.Error.Code != nil && *e.Error.Code != "" {
		return *e.Error.Code
	}
	if e.Error.Type == "" {
		return "untyped_error"
	}
	return e.Error.Type
}

// tally counts outcomes by label, with the fault's name in front of a
// faulted request's label ("5xx: refused 500 server_error").
func tally(outs []drillOutcome) map[string]int {
	m := map[string]int{}
	for i := range outs {
		k := outs[i].label()
		if outs[i].fault != "" {
			k = outs[i].fault + ": " + k
		}
		m[k]++
	}
	return m
}

// tallyString renders a tally in a stable order: "served 412, refused 503 budget_unavailable 37".
func tallyString(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

// expectOutcomes fails the test for every outcome that allowed does not
// accept (at most a few messages), and returns how many failed.
func expectOutcomes(t *testing.T, outs []drillOutcome, allowed func(o *drillOutcome) bool) int {
	t.Helper()
	bad := 0
	for i := range outs {
		o := &outs[i]
		if allowed(o) {
			continue
		}
		bad++
		if bad <= 5 {
			t.Errorf("request %s (fault %q, %s): %s %s", o.id, o.fault, o.target, o.label(), o.detail)
		}
	}
	if bad > 5 {
		t.Errorf("... %d outcomes not allowed in all; tally: %s", bad, tallyString(tally(outs)))
	}
	return bad
}

// openAt counts the streams open at time at: sent before it, read to the
// end after it.
func openAt(outs []drillOutcome, at time.Time) int {
	n := 0
	for i := range outs {
		if outs[i].started.Before(at) && outs[i].ended.After(at) {
			n++
		}
	}
	return n
}

// latency renders the median and the longest time, from sending to the
// end of the reply, of the outcomes f accepts: "median 280 ms, longest 1.9 s".
func latency(outs []drillOutcome, f func(o *drillOutcome) bool) string {
	var ds []time.Duration
	for i := range outs {
		if f(&outs[i]) {
			ds = append(ds, outs[i].ended.Sub(outs[i].started))
		}
	}
	if len(ds) == 0 {
		return "none"
	}
	slices.Sort(ds)
	return "median " + dur(ds[len(ds)/2]) + ", longest " + dur(ds[len(ds)-1])
}

// healthyServed accepts the requests the drill did nothing to that were served whole.
func healthyServed(o *drillOutcome) bool { return o.fault == "" && o.kind == served }
