package plugintest

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tollgate/tollgate/sdk/wasmhost"
)

// Dispatched calls (sdk/ABI.md, "Dispatched calls"). Services answers
// them as the gateway would, from what the test registered: AnswerHTTP per
// URL prefix for the `http` service (an http call under no registered
// prefix is refused as one outside the plugin's grant), AnswerService per
// service, and the handlers of Handle (status 0, their result as the
// body) for any other. Dispatched lists the calls made.

// Answer is the response a test gives a dispatched call.
type Answer struct {
	// Status is the HTTP status for `http` (0 means 200) and 0 for other
	// services, or a failure: Timeout, Unavailable, TooLarge, Busy.
	Status int
	Body   string
	Header map[string]string
	// Delay holds the answer back, as a slow service would; a call
	// cancelled meanwhile (the plugin decided on an earlier response)
	// answers Unavailable.
	Delay time.Duration
}

// Failed statuses of a dispatched call.
const (
	Unavailable = wasmhost.StatusUnavailable // connection refused, DNS, TLS, service down
	Timeout     = wasmhost.StatusTimeout     // the grant's timeout passed
	TooLarge    = wasmhost.StatusTooLarge    // the response was over the grant's cap
	Busy        = wasmhost.StatusBusy        // the plugin's in-flight cap was reached
)

// Dispatched is one call a plugin dispatched and the host started.
type Dispatched struct {
	Service string
	Request string // the request bytes as the plugin wrote them
	// For `http`, the request parsed.
	HTTP *HTTPCall
	// Answer is what the test's handler answered.
	Answer Answer
}

// HTTPCall is an `http` call's request.
type HTTPCall struct {
	Method, URL string
	Header      map[string]string // as the plugin set them (the last of a repeated name)
	Body        string
	CacheKey    string        // "" without a :cache line
	CacheTTL    time.Duration // with CacheKey
}

type httpAnswer struct {
	prefix string
	f      func(c *HTTPCall) Answer
}

type dispatchState struct {
	mu         sync.Mutex
	http       []httpAnswer
	services   map[string]func(req []byte) Answer
	dispatched []Dispatched
}

// AnswerHTTP answers the `http` calls whose URL starts with prefix with
// f; the longest matching prefix wins. f runs on the test's goroutine.
func (s *Services) AnswerHTTP(prefix string, f func(c *HTTPCall) Answer) {
	s.d.mu.Lock()
	defer s.d.mu.Unlock()
	s.d.http = append(s.d.http, httpAnswer{prefix, f})
}

// AnswerService answers the dispatched calls of service with f.
func (s *Services) AnswerService(service string, f func(req []byte) Answer) {
	s.d.mu.Lock()
	defer s.d.mu.Unlock()
	if s.d.services == nil {
		s.d.services = map[string]func([]byte) Answer{}
	}
	s.d.services[service] = f
}

// Dispatched returns the calls started so far, in order. A call the plugin
// dispatched and then abandoned (its callback answered anything but PAUSE
// or DEFER) is never started, so not listed.
func (s *Services) Dispatched() []Dispatched {
	s.d.mu.Lock()
	defer s.d.mu.Unlock()
	return append([]Dispatched(nil), s.d.dispatched...)
}

var _ wasmhost.Dispatcher = (*Services)(nil)

// Check implements wasmhost.Dispatcher: what the gateway would refuse at
// once.
func (s *Services) Check(_ *wasmhost.Request, _, service string, req []byte) error {
	if service == "http" {
		c, err := parseHTTPCall(req)
		if err != nil {
			return err
		}
		if s.httpAnswer(c.URL) == nil {
			return wasmhost.ErrNotAllowed
		}
		return nil
	}
	s.d.mu.Lock()
	f := s.d.services[service]
	s.d.mu.Unlock()
	s.mu.Lock()
	h := s.handlers[service]
	s.mu.Unlock()
	if f == nil && h == nil {
		return wasmhost.ErrNoService
	}
	return nil
}

func (s *Services) httpAnswer(url string) func(*HTTPCall) Answer {
	s.d.mu.Lock()
	defer s.d.mu.Unlock()
	var best *httpAnswer
	for i, a := range s.d.http {
		if strings.HasPrefix(url, a.prefix) && (best == nil || len(a.prefix) > len(best.prefix)) {
			best = &s.d.http[i]
		}
	}
	if best == nil {
		return nil
	}
	return best.f
}

// Start implements wasmhost.Dispatcher.
func (s *Services) Start(_ *wasmhost.Request, c *wasmhost.Call) {
	d := Dispatched{Service: c.Service, Request: string(c.Request)}
	switch f := s.serviceAnswer(c.Service); {
	case c.Service == "http":
		d.HTTP, _ = parseHTTPCall(c.Request) // Check parsed it
		d.Answer = s.httpAnswer(d.HTTP.URL)(d.HTTP)
		if d.Answer.Status == 0 {
			d.Answer.Status = 200
		}
	case f != nil:
		d.Answer = f(c.Request)
	default:
		s.mu.Lock()
		h := s.handlers[c.Service] // Check found it
		s.mu.Unlock()
		res, err := h(c.Request)
		switch {
		case errors.Is(err, wasmhost.ErrBadServiceRequest):
			d.Answer.Status = wasmhost.StatusInvalid
		case err != nil:
			d.Answer.Status = Unavailable
		default:
			d.Answer.Body = string(res)
		}
	}
	s.d.mu.Lock()
	s.d.dispatched = append(s.d.dispatched, d)
	s.d.mu.Unlock()
	res := d.Answer.result()
	if d.Answer.Delay <= 0 {
		c.Finish(res)
		return
	}
	go func() {
		t := time.NewTimer(d.Answer.Delay)
		defer t.Stop()
		select {
		case <-t.C:
			c.Finish(res)
		case <-c.Ctx.Done():
			c.Finish(wasmhost.CallResult{Status: Unavailable})
		}
	}()
}

func (s *Services) serviceAnswer(service string) func([]byte) Answer {
	s.d.mu.Lock()
	defer s.d.mu.Unlock()
	return s.d.services[service]
}

func (a Answer) result() wasmhost.CallResult {
	res := wasmhost.CallResult{Status: a.Status}
	if a.Status < 0 {
		return res
	}
	res.Body = []byte(a.Body)
	for k, v := range a.Header {
		res.Header = append(res.Header, wasmhost.Header{Name: []byte(k), Value: []byte(v)})
	}
	return res
}

// parseHTTPCall reads the `http` service's request bytes:
//
//	METHOD SP URL LF
//	(NAME ": " VALUE LF)*
//	[":cache " TTL_MS SP KEY LF]
//	LF
//	BODY
func parseHTTPCall(req []byte) (*HTTPCall, error) {
	line, rest, ok := bytes.Cut(req, []byte{'\n'})
	method, url, ok2 := strings.Cut(string(line), " ")
	if !ok || !ok2 || method == "" || url == "" || strings.ContainsAny(url, " \r") {
		return nil, wasmhost.ErrBadServiceRequest
	}
	c := &HTTPCall{Method: method, URL: url, Header: map[string]string{}}
	for {
		line, rest, ok = bytes.Cut(rest, []byte{'\n'})
		if !ok {
			return nil, wasmhost.ErrBadServiceRequest
		}
		if len(line) == 0 {
			break
		}
		if key, found := bytes.CutPrefix(line, []byte(":cache ")); found {
			ttl, k, ok := strings.Cut(string(key), " ")
			ms, err := strconv.ParseInt(ttl, 10, 64)
			if !ok || err != nil || ms <= 0 || ms > 3_600_000 || k == "" || c.CacheKey != "" {
				return nil, wasmhost.ErrBadServiceRequest
			}
			c.CacheKey, c.CacheTTL = k, time.Duration(ms)*time.Millisecond
			continue
		}
		name, value, ok := strings.Cut(string(line), ": ")
		if !ok || name == "" || strings.ContainsAny(name, " \t\r:") || strings.ContainsRune(value, '\r') {
			return nil, wasmhost.ErrBadServiceRequest
		}
		c.Header[name] = value
	}
	c.Body = string(rest)
	return c, nil
}
