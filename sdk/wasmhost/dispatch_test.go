package wasmhost

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// dispatcher is a fake Dispatcher: each call is answered after delay from
// a goroutine, by results[service] (default: status 200 with the body
// "<service>:<request>" and the header X-Test: t), unless its context is
// cancelled first.
type dispatcher struct {
	delay   time.Duration
	slow    map[string]time.Duration // a delay per service, instead of delay
	refuse  map[string]error         // Check's answer per service
	results map[string]CallResult

	mu        sync.Mutex
	started   []string // "<service>=<request>", in start order
	cancelled atomic.Int32
	calls     atomic.Int32 // Services.Call (the `call` import)
}

func (d *dispatcher) Call(r *Request, name string, req []byte) ([]byte, error) {
	d.calls.Add(1)
	return []byte("sync"), nil
}

func (d *dispatcher) Check(r *Request, plugin, service string, req []byte) error {
	if plugin == "" {
		return errors.New("no plugin name")
	}
	return d.refuse[service]
}

func (d *dispatcher) Start(r *Request, c *Call) {
	d.mu.Lock()
	d.started = append(d.started, c.Service+"="+string(c.Request))
	d.mu.Unlock()
	d.answer(c)
}

// answer finishes c as Start describes.
func (d *dispatcher) answer(c *Call) {
	res, ok := d.results[c.Service]
	if !ok {
		res = CallResult{Status: 200, Body: []byte(c.Service + ":" + string(c.Request)),
			Header: []Header{{Name: []byte("X-Test"), Value: []byte("t")}}}
	}
	delay := d.delay
	if s, ok := d.slow[c.Service]; ok {
		delay = s
	}
	go func() {
		select {
		case <-time.After(delay):
			c.Finish(res)
		case <-c.Ctx.Done():
			d.cancelled.Add(1)
			c.Finish(CallResult{Status: StatusUnavailable})
		}
	}()
}

func (d *dispatcher) startedCalls() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return strings.Join(d.started, ",")
}

var _ Dispatcher = (*dispatcher)(nil)

// plainServices has no Dispatcher: dispatched calls go through Call.
type plainServices struct{}

func (plainServices) Call(r *Request, name string, req []byte) ([]byte, error) {
	switch name {
	case "ratelimit.admit":
		return []byte(`{"allowed":true,"req":` + string(req) + `}`), nil
	case "bad":
		return nil, ErrBadServiceRequest
	}
	return nil, ErrNoService
}

func dispatchPipeline(t *testing.T, mode FailMode, config string) *Pipeline {
	t.Helper()
	pl, err := NewPipeline(context.Background(), testHost(t), []Spec{{Name: "d", Module: testPlugin(t),
		Config: []byte(config), Deadline: 200 * time.Millisecond, OnError: mode}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pl.Close)
	return pl
}

func fact(r *Request, k string) string { v, _ := r.Fact(k); return string(v) }

func TestDispatchRequestPhase(t *testing.T) {
	tests := []struct {
		name      string
		config    string
		services  func(d *dispatcher) Services
		mode      FailMode
		wantErr   string // "" for none; "reject" for a RejectError
		responses string
		errors    string
		started   string
		cancelled int32
	}{
		{name: "one call, then continue",
			config:    `{"request":["dispatch:svc=a","pause"],"call_response":"record_response"}`,
			responses: "0:200:svc:a:t;", started: "svc=a"},
		{name: "two calls answered in dispatch order",
			config:    `{"request":["dispatch:one=a","dispatch:two=b","pause"],"call_response":["record_response","pause_until:2"]}`,
			responses: "0:200:one:a:t;1:200:two:b:t;", started: "one=a,two=b"},
		{name: "a reject on the first response cancels the second call",
			config:  `{"request":["dispatch:one=a","dispatch:slow=b","pause"],"call_response":["record_response","reject"],"reject_status":400,"reject_message":"flagged"}`,
			wantErr: "reject", responses: "0:200:one:a:t;", started: "one=a,slow=b", cancelled: 1},
		{name: "a verdict other than pause abandons the calls unstarted",
			config:  `{"request":["dispatch:svc=a","continue"],"call_response":"record_response"}`,
			started: ""},
		{name: "pause without a call is a failure",
			config:  `{"request":"pause","call_response":"record_response"}`,
			wantErr: "PAUSE with no dispatched call outstanding"},
		{name: "pause after the last response is a failure",
			config:  `{"request":["dispatch:svc=a","pause"],"call_response":["record_response","pause"]}`,
			wantErr: "PAUSE with no dispatched call outstanding", responses: "0:200:svc:a:t;", started: "svc=a"},
		{name: "fail is a plugin failure",
			config:  `{"request":"fail"}`,
			wantErr: "answered FAIL"},
		{name: "fail in on_call_response",
			config:  `{"request":["dispatch:svc=a","pause"],"call_response":"fail"}`,
			wantErr: "answered FAIL", started: "svc=a"},
		{name: "fail_open continues after FAIL",
			config: `{"request":["dispatch:svc=a","pause"],"call_response":"fail"}`, mode: FailOpen,
			started: "svc=a"},
		{name: "a call that failed reaches the guest with its status",
			config:    `{"request":["dispatch:down=a","pause"],"call_response":"record_response"}`,
			responses: "0:-5::;", started: "down=a"},
		{name: "refusals by Check",
			config: `{"request":["dispatch:denied=a","dispatch:garbled=b","dispatch:none=c","continue"]}`,
			errors: "denied:tollgate: not allowed in this phase;garbled:tollgate: invalid argument;none:tollgate: unavailable;"},
		{name: "busy past 16 outstanding calls",
			config: `{"request":["dispatch_n:17:svc","continue"]}`,
			errors: "svc:tollgate: busy;"},
		{name: "rounds are capped",
			config:  `{"request":["dispatch:svc=a","pause"],"call_response":["dispatch:svc=a","pause"]}`,
			wantErr: "more than 8 rounds", started: strings.Repeat("svc=a,", 7) + "svc=a"},
		{name: "without Dispatcher, host services answer after the guest returned",
			config:    `{"request":["dispatch:ratelimit.admit={}","dispatch:bad=x","dispatch:missing=y","pause"],"call_response":["record_response","pause_until:3"]}`,
			services:  func(*dispatcher) Services { return plainServices{} },
			responses: `0:0:{"allowed":true,"req":{}}:;1:-2::;2:-4::;`},
		{name: "defer is served: its calls are answered",
			config:    `{"request":["dispatch:one=a","dispatch:two=b","defer"],"call_response":["record_response","pause_until:2"]}`,
			responses: "0:200:one:a:t;1:200:two:b:t;", started: "one=a,two=b"},
		{name: "defer without a call is a failure",
			config:  `{"request":"defer","call_response":"record_response"}`,
			wantErr: "with no dispatched call outstanding"},
		{name: "defer from on_call_response waits as pause",
			config:  `{"request":["dispatch:svc=a","defer"],"call_response":["record_response","defer"]}`,
			wantErr: "with no dispatched call outstanding", responses: "0:200:svc:a:t;", started: "svc=a"},
		{name: "a reject after defer cancels the calls left",
			config:  `{"request":["dispatch:one=a","dispatch:slow=b","defer"],"call_response":["record_response","reject"],"reject_status":400,"reject_message":"flagged"}`,
			wantErr: "reject", responses: "0:200:one:a:t;", started: "one=a,slow=b", cancelled: 1},
		{name: "without services, dispatch is unavailable",
			config:   `{"request":["dispatch:svc=a","continue"]}`,
			services: func(*dispatcher) Services { return nil },
			errors:   "svc:tollgate: unavailable;"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := &dispatcher{delay: 5 * time.Millisecond,
				refuse:  map[string]error{"denied": ErrNotAllowed, "garbled": ErrBadServiceRequest, "none": ErrNoService},
				results: map[string]CallResult{"down": {Status: StatusTimeout}}, slow: map[string]time.Duration{"slow": 10 * time.Second}}
			pl := dispatchPipeline(t, tt.mode, tt.config)
			r := request(`{}`)
			defer ReleaseRequest(r)
			r.Services = d
			if tt.services != nil {
				r.Services = tt.services(d)
			}
			start := time.Now()
			err := pl.Request(r)
			switch {
			case tt.wantErr == "":
				if err != nil {
					t.Fatalf("err %v", err)
				}
			case tt.wantErr == "reject":
				var rej *RejectError
				if !errors.As(err, &rej) || rej.Status != 400 || rej.Message != "flagged" {
					t.Fatalf("err %v, want the plugin's reject", err)
				}
			default:
				var f *FailureError
				if !errors.As(err, &f) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want a failure %q", err, tt.wantErr)
				}
				if fail := strings.Contains(tt.wantErr, "FAIL"); errors.Is(err, ErrFailVerdict) != fail || !errors.Is(err, ErrPluginFailed) {
					t.Errorf("err %v: ErrFailVerdict %v, want %v", err, errors.Is(err, ErrFailVerdict), fail)
				}
			}
			if got := fact(r, "responses"); got != tt.responses {
				t.Errorf("responses %q, want %q", got, tt.responses)
			}
			if got := fact(r, "dispatch_errors"); got != tt.errors {
				t.Errorf("dispatch errors %q, want %q", got, tt.errors)
			}
			if got := d.startedCalls(); got != tt.started {
				t.Errorf("started %q, want %q", got, tt.started)
			}
			// Cancellation is seen by the call's goroutine: wait for it.
			for time.Since(start) < 2*time.Second && d.cancelled.Load() < tt.cancelled {
				time.Sleep(time.Millisecond)
			}
			if got := d.cancelled.Load(); got != tt.cancelled {
				t.Errorf("cancelled %d, want %d", got, tt.cancelled)
			}
			if took := time.Since(start); tt.cancelled > 0 && took > 500*time.Millisecond {
				t.Errorf("took %v: the abandoned call was waited for", took)
			}
		})
	}
}

// The wait for dispatched calls holds no instance and does not count
// against the deadline: with a pool of one instance and a 50 ms deadline,
// two requests whose calls take 300 ms each both finish in about 300 ms,
// though the second could not wait 100 ms for an instance.
func TestDispatchReleasesTheInstance(t *testing.T) {
	pl, err := NewPipeline(context.Background(), testHost(t), []Spec{{Name: "d", Module: testPlugin(t),
		Config:   []byte(`{"request":["dispatch:svc=a","pause"],"call_response":"record_response"}`),
		Deadline: 50 * time.Millisecond, Instances: 1, PoolWait: 100 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	defer pl.Close()
	const delay = 300 * time.Millisecond
	d := &dispatcher{delay: delay}
	start := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, 2)
	got := make([]string, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := request(`{}`)
			defer ReleaseRequest(r)
			r.Services = d
			errs[i] = pl.Request(r)
			got[i] = fact(r, "responses")
		}()
	}
	wg.Wait()
	took := time.Since(start)
	for i := range 2 {
		if errs[i] != nil || got[i] != "0:200:svc:a:t;" {
			t.Fatalf("request %d: %v, responses %q", i, errs[i], got[i])
		}
	}
	if took >= 2*delay {
		t.Errorf("two requests took %v: their waits did not overlap", took)
	}
	if st := pl.Plugins()[0].Stats(); st.Timeouts.Load() != 0 || st.InstancesCreated.Load() != 1 {
		t.Errorf("timeouts %d, instances created %d; want 0 and 1", st.Timeouts.Load(), st.InstancesCreated.Load())
	}
}

// Chunk: the response handler runs in the chunk phase's view (chunk_text,
// emit) and its verdict is the event's; emitted text adds to the
// dispatching callback's.
func TestDispatchChunkPhase(t *testing.T) {
	pl := dispatchPipeline(t, FailClosed, `{"chunk":["emit:<","dispatch:svc=a","pause"],"call_response":["record_response","replace_upper"]}`)
	r := request(`{}`)
	defer ReleaseRequest(r)
	d := &dispatcher{}
	r.Services = d
	res, err := pl.Chunk(r, []byte("abc"), ChunkText)
	if err != nil || res.Verdict != Replace || string(res.Text) != "<ABC" {
		t.Fatalf("got %v %q %v", res.Verdict, res.Text, err)
	}
	if got := fact(r, "responses"); got != "0:200:svc:a:t;" {
		t.Fatalf("responses %q", got)
	}
}

// Response headers: the response handler has the phase's imports
// (set_response_header, reject) and its verdict is the phase's.
func TestDispatchResponseHeadersPhase(t *testing.T) {
	pl := dispatchPipeline(t, FailClosed, `{"response_headers":["dispatch:svc=a","pause"],`+
		`"call_response":["record_response","set_response_header:X-Checked=1","reject"],"reject_status":502,"reject_message":"bad answer"}`)
	r := request(`{}`)
	defer ReleaseRequest(r)
	r.Services = &dispatcher{}
	r.UpstreamHeader, r.Status = Headers{}, 200
	err := pl.ResponseHeaders(r, 200)
	var rej *RejectError
	if !errors.As(err, &rej) || rej.Status != 502 || rej.Message != "bad answer" {
		t.Fatalf("err %v", err)
	}
	if got := headers(r.SetClientHeaders); got != "X-Checked=1" {
		t.Errorf("client headers %q", got)
	}
	if got := fact(r, "responses"); got != "0:200:svc:a:t;" {
		t.Errorf("responses %q", got)
	}
}

// End: verdicts are ignored, but the SDK's PAUSE for a handler that
// dispatched makes the calls, and their responses reach the guest.
func TestDispatchEndPhase(t *testing.T) {
	pl := dispatchPipeline(t, FailClosed, `{"end":"dispatch:audit=done","call_response":"record_response"}`)
	r := request(`{}`)
	defer ReleaseRequest(r)
	d := &dispatcher{}
	r.Services = d
	pl.End(r, EndCompleted)
	if got := d.startedCalls(); got != "audit=done" {
		t.Fatalf("started %q", got)
	}
	if got := fact(r, "responses"); got != "0:200:audit:done:t;" {
		t.Fatalf("responses %q", got)
	}
}

// In end, PAUSE after the last response is no failure: a plugin without a
// response handler (the SDK then answers PAUSE) gets its calls made.
func TestDispatchEndWithoutHandler(t *testing.T) {
	pl, err := NewPipeline(context.Background(), testHost(t), []Spec{{Name: "endpause", Module: testPlugin(t),
		Config: []byte(`{"end":"dispatch_n:2:audit"}`)}})
	if err != nil {
		t.Fatal(err)
	}
	defer pl.Close()
	r := request(`{}`)
	defer ReleaseRequest(r)
	d := &dispatcher{}
	r.Services = d
	pl.End(r, EndCompleted)
	if got := d.startedCalls(); got != "audit=0,audit=1" {
		t.Fatalf("started %q", got)
	}
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "plugin=endpause") && strings.Contains(line, "failed") {
			t.Fatalf("logged a failure: %s", line)
		}
	}
	// on_end, then on_call_response for each call.
	if n := pl.Plugins()[0].Stats().Calls.Load(); n != 3 {
		t.Errorf("%d callbacks, want 3", n)
	}
}

// The request's Context ending ends the wait: the call is cancelled and
// answers UNAVAILABLE.
func TestDispatchRequestContext(t *testing.T) {
	pl := dispatchPipeline(t, FailClosed, `{"request":["dispatch:svc=a","pause"],"call_response":"record_response"}`)
	r := request(`{}`)
	defer ReleaseRequest(r)
	d := &dispatcher{delay: 10 * time.Second}
	r.Services = d
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	r.Context = ctx
	start := time.Now()
	if err := pl.Request(r); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("took %v", took)
	}
	if got := fact(r, "responses"); got != fmt.Sprintf("0:%d::;", StatusUnavailable) {
		t.Fatalf("responses %q", got)
	}
}

// DEFER is a request-phase verdict: elsewhere, from the phase callback or
// from on_call_response, it is a plugin failure, and its calls are never
// made or are cancelled.
func TestDeferOutsideRequestPhase(t *testing.T) {
	const notAllowed = "verdict 8 (defer) is not allowed in phase "
	tests := []struct {
		name, config string
		run          func(pl *Pipeline, r *Request) error
		want         string
		started      string
	}{
		{name: "response_headers", config: `{"response_headers":["dispatch:svc=a","defer"]}`,
			run: func(pl *Pipeline, r *Request) error { return pl.ResponseHeaders(r, 200) }, want: notAllowed + "response_headers"},
		{name: "chunk", config: `{"chunk":["dispatch:svc=a","defer"]}`,
			run: func(pl *Pipeline, r *Request) error { _, err := pl.Chunk(r, []byte("x"), ChunkText); return err }, want: notAllowed + "chunk"},
		{name: "on_call_response in chunk", config: `{"chunk":["dispatch:svc=a","pause"],"call_response":["record_response","defer"]}`,
			run:  func(pl *Pipeline, r *Request) error { _, err := pl.Chunk(r, []byte("x"), ChunkText); return err },
			want: notAllowed + "chunk", started: "svc=a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pl := dispatchPipeline(t, FailClosed, tt.config)
			r := request(`{}`)
			defer ReleaseRequest(r)
			d := &dispatcher{}
			r.Services = d
			r.UpstreamHeader, r.Status = Headers{}, 200
			err := tt.run(pl, r)
			var f *FailureError
			if !errors.As(err, &f) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err %v, want a failure %q", err, tt.want)
			}
			if got := d.startedCalls(); got != tt.started {
				t.Errorf("started %q, want %q", got, tt.started)
			}
		})
	}
}

// dispatch is refused while configuring.
func TestDispatchInConfigure(t *testing.T) {
	_, err := NewPipeline(context.Background(), testHost(t), []Spec{{Name: "x", Module: testPlugin(t),
		Config: []byte(`{"configure":"dispatch"}`)}})
	if err == nil || !strings.Contains(err.Error(), "dispatch: tollgate: not allowed in this phase") {
		t.Fatalf("got %v", err)
	}
	if v := Pause.String() + "," + Fail.String(); v != "pause,fail" {
		t.Fatalf("verdict names %q", v)
	}
}
