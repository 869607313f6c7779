package wasmhost

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// batchDispatcher is a fake BatchDispatcher: it records each batch as
// "<service>=<request>,..." and answers its calls as dispatcher does,
// except those of the services in skip, which it finishes with
// StatusSkipped. Calls started alone (Start) are recorded by dispatcher.
type batchDispatcher struct {
	*dispatcher
	skip map[string]bool

	bmu     sync.Mutex
	batches []string
}

func (b *batchDispatcher) StartBatch(r *Request, calls []*Call) {
	names := make([]string, len(calls))
	for i, c := range calls {
		names[i] = c.Service + "=" + string(c.Request)
	}
	b.bmu.Lock()
	b.batches = append(b.batches, strings.Join(names, ","))
	b.bmu.Unlock()
	for _, c := range calls {
		if c.Ctx == nil {
			panic("a call started without its context")
		}
		if b.skip[c.Service] {
			c.Finish(CallResult{Status: StatusSkipped})
			continue
		}
		b.answer(c)
	}
}

func (b *batchDispatcher) batchesStarted() string {
	b.bmu.Lock()
	defer b.bmu.Unlock()
	return strings.Join(b.batches, "|")
}

var _ BatchDispatcher = (*batchDispatcher)(nil)

// plugin is one plugin of a test pipeline.
type plugin struct {
	config string
	mode   FailMode
}

// pluginPipeline loads the test plugin once per config, named p0, p1, ...
func pluginPipeline(t testing.TB, plugins ...plugin) *Pipeline {
	t.Helper()
	specs := make([]Spec, len(plugins))
	for i, p := range plugins {
		specs[i] = Spec{Name: fmt.Sprintf("p%d", i), Module: testPlugin(t), Config: []byte(p.config),
			Deadline: 200 * time.Millisecond, OnError: p.mode}
	}
	pl, err := NewPipeline(context.Background(), testHost(t), specs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pl.Close)
	return pl
}

// Configs of deferring plugins: p0 and p1 defer one call each and record
// its response.
const (
	deferOne  = `{"request":["dispatch:one=a","defer"],"call_response":"record_response"}`
	deferSlow = `{"request":["dispatch:slow=a","defer"],"call_response":"record_response"}`
	deferTwo  = `{"request":["dispatch:two=b","defer"],"call_response":"record_response"}`
)

func TestDeferRequestPhase(t *testing.T) {
	answered := func(id int, svc, req string) string { return fmt.Sprintf("%d:200:%s:%s:t;", id, svc, req) }
	tests := []struct {
		name    string
		plugins []plugin
		plain   bool // services without BatchDispatcher
		skip    string
		wantErr string // "" for none, "reject" for p0's or p1's reject (429)
		// responses is the fact "responses": the responses each plugin
		// recorded and what the others noted with record:, in order.
		responses string
		batches   string // StartBatch calls, "|" between them
		started   string // Start calls
		cancelled int32
	}{
		{name: "two deferring plugins: one batch, answers in policy order",
			plugins:   []plugin{{config: deferSlow}, {config: deferTwo}},
			responses: answered(0, "slow", "a") + answered(1, "two", "b"), batches: "slow=a,two=b"},
		{name: "without a BatchDispatcher each call starts alone",
			plugins: []plugin{{config: deferSlow}, {config: deferTwo}}, plain: true,
			responses: answered(0, "slow", "a") + answered(1, "two", "b"), started: "slow=a,two=b"},
		{name: "later plugins run before the deferred responses",
			plugins:   []plugin{{config: deferOne}, {config: `{"request":"record:p1"}`}},
			responses: "p1;" + answered(0, "one", "a"), batches: "one=a"},
		{name: "a pause starts its calls with the deferred ones; the next plugin runs after",
			plugins: []plugin{{config: deferOne},
				{config: `{"request":["dispatch:two=b","dispatch:three=c","pause"],"call_response":["record_response","pause_until:3"]}`},
				{config: `{"request":"record:p2"}`}},
			responses: answered(0, "one", "a") + answered(1, "two", "b") + answered(2, "three", "c") + "p2;",
			batches:   "one=a,two=b,three=c"},
		{name: "deferring again after a pause makes a second batch",
			plugins: []plugin{{config: deferOne},
				{config: `{"request":["dispatch:two=b","pause"],"call_response":"record_response"}`},
				{config: `{"request":["dispatch:three=c","defer"],"call_response":"record_response"}`}},
			responses: answered(0, "one", "a") + answered(1, "two", "b") + answered(2, "three", "c"),
			batches:   "one=a,two=b|three=c"},
		{name: "a reject in the first response: the second is never delivered",
			plugins: []plugin{{config: `{"request":["dispatch:one=a","defer"],"call_response":["record_response","reject"],` +
				`"reject_status":429,"reject_message":"limited"}`}, {config: `{"request":["dispatch:slow=b","defer"],"call_response":"record_response"}`}},
			wantErr: "reject", responses: answered(0, "one", "a"), batches: "one=a,slow=b", cancelled: 1},
		{name: "a later plugin rejecting in on_request: the deferred calls never start",
			plugins: []plugin{{config: deferOne}, {config: `{"request":"reject","reject_status":429,"reject_message":"limited"}`}},
			wantErr: "reject"},
		{name: "a later plugin failing in on_request: the deferred calls never start",
			plugins: []plugin{{config: deferOne}, {config: `{"request":"fail"}`}},
			wantErr: "answered FAIL"},
		{name: "a later plugin failing open: the deferred calls are served",
			plugins:   []plugin{{config: deferOne}, {config: `{"request":"fail"}`, mode: FailOpen}},
			responses: answered(0, "one", "a"), batches: "one=a"},
		{name: "a deferring plugin failing open: the next gets its response",
			plugins:   []plugin{{config: `{"request":["dispatch:one=a","defer"],"call_response":"fail"}`, mode: FailOpen}, {config: deferTwo}},
			responses: answered(1, "two", "b"), batches: "one=a,two=b"},
		{name: "a deferring plugin pausing again starts its next round alone",
			plugins: []plugin{{config: `{"request":["dispatch:one=a","defer"],"call_response":["record_response","dispatch:more=c","pause_until:2"]}`},
				{config: deferTwo}},
			responses: answered(0, "one", "a") + answered(2, "more", "c") + answered(1, "two", "b"),
			batches:   "one=a,two=b", started: "more=c"},
		{name: "a skipped call still wanted is started again alone",
			plugins: []plugin{{config: deferOne}, {config: `{"request":["dispatch:hold=b","defer"],"call_response":"record_response"}`}},
			skip:    "hold", responses: answered(0, "one", "a") + answered(1, "hold", "b"),
			batches: "one=a,hold=b", started: "hold=b"},
		{name: "a skipped call no longer wanted is not started again",
			plugins: []plugin{{config: `{"request":["dispatch:one=a","defer"],"call_response":["record_response","reject"],` +
				`"reject_status":429,"reject_message":"limited"}`}, {config: `{"request":["dispatch:hold=b","defer"],"call_response":"record_response"}`}},
			skip: "hold", wantErr: "reject", responses: answered(0, "one", "a"), batches: "one=a,hold=b"},
		{name: "a call skipped twice answers unavailable",
			plugins: []plugin{{config: `{"request":["dispatch:skipped=b","defer"],"call_response":"record_response"}`}},
			skip:    "skipped", responses: fmt.Sprintf("0:%d::;", StatusUnavailable), batches: "skipped=b", started: "skipped=b"},
		{name: "defer without a call is a failure",
			plugins: []plugin{{config: deferOne}, {config: `{"request":"defer","call_response":"record_response"}`}},
			wantErr: "DEFER with no dispatched call outstanding"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := &dispatcher{delay: 5 * time.Millisecond,
				results: map[string]CallResult{"skipped": {Status: StatusSkipped}},
				slow:    map[string]time.Duration{"slow": 30 * time.Millisecond}}
			b := &batchDispatcher{dispatcher: d, skip: map[string]bool{tt.skip: true}}
			if strings.Contains(tt.name, "never delivered") {
				d.slow["slow"] = 10 * time.Second
			}
			pl := pluginPipeline(t, tt.plugins...)
			r := request(`{}`)
			defer ReleaseRequest(r)
			r.Services = b
			if tt.plain {
				r.Services = d
			}
			start := time.Now()
			err := pl.Request(r)
			switch tt.wantErr {
			case "":
				if err != nil {
					t.Fatalf("err %v", err)
				}
			case "reject":
				var rej *RejectError
				if !errors.As(err, &rej) || rej.Status != 429 || rej.Message != "limited" {
					t.Fatalf("err %v, want the plugin's reject", err)
				}
			default:
				var f *FailureError
				if !errors.As(err, &f) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want a failure %q", err, tt.wantErr)
				}
			}
			if got := fact(r, "responses"); got != tt.responses {
				t.Errorf("responses %q, want %q", got, tt.responses)
			}
			if got := b.batchesStarted(); got != tt.batches {
				t.Errorf("batches %q, want %q", got, tt.batches)
			}
			if got := d.startedCalls(); got != tt.started {
				t.Errorf("started alone %q, want %q", got, tt.started)
			}
			for time.Since(start) < 2*time.Second && d.cancelled.Load() < tt.cancelled {
				time.Sleep(time.Millisecond)
			}
			if got := d.cancelled.Load(); got != tt.cancelled {
				t.Errorf("cancelled %d, want %d", got, tt.cancelled)
			}
			if took := time.Since(start); took > time.Second {
				t.Errorf("took %v: an abandoned call was waited for", took)
			}
		})
	}
}

// The calls a batch answers at once (host text services run inline) are
// delivered as well as those answered later, and a request reused from
// the pool starts with nothing deferred.
func TestDeferInlineBatchAndReuse(t *testing.T) {
	pl := pluginPipeline(t, plugin{config: deferOne}, plugin{config: deferTwo})
	d := &dispatcher{}
	b := &inlineBatch{}
	for round := range 3 {
		r := request(`{}`)
		r.Services = &struct {
			*dispatcher
			*inlineBatch
		}{d, b}
		if err := pl.Request(r); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if got, want := fact(r, "responses"), "0:0:one=a:;1:0:two=b:;"; got != want {
			t.Fatalf("round %d: responses %q, want %q", round, got, want)
		}
		if n := len(r.calls.deferred.calls) + len(r.calls.deferred.plugins) + r.calls.outstanding(); n != 0 {
			t.Fatalf("round %d: %d calls or plugins left after the phase", round, n)
		}
		ReleaseRequest(r)
	}
	if b.batches != 3 {
		t.Errorf("%d batches, want 3", b.batches)
	}
}

// inlineBatch answers each call of a batch before StartBatch returns,
// with "<service>=<request>".
type inlineBatch struct{ batches int }

func (b *inlineBatch) StartBatch(r *Request, calls []*Call) {
	b.batches++
	for _, c := range calls {
		c.Finish(CallResult{Body: []byte(c.Service + "=" + string(c.Request))})
	}
}

// deferTracer records callbacks ("<plugin>:<verdict>") and dispatched
// calls ("<plugin>><service>:<status>") in order.
type deferTracer struct{ events []string }

func (t *deferTracer) PluginCall(plugin string, slot int, ph Phase, start time.Time, d time.Duration, v Verdict, err error) {
	t.events = append(t.events, plugin+":"+v.String())
}

func (t *deferTracer) DispatchedCall(plugin string, slot int, ph Phase, service string, start time.Time, d time.Duration, res CallResult) {
	if start.IsZero() || d < 0 {
		t.events = append(t.events, "no start time")
	}
	t.events = append(t.events, fmt.Sprintf("%s>%s:%d", plugin, service, res.Status))
}

// A request's tracer sees deferred callbacks and calls as for PAUSE: each
// callback, and each call under the plugin whose response it was, in the
// order they ran; a skipped call's trace is its restart's.
func TestDeferTraced(t *testing.T) {
	pl := pluginPipeline(t, plugin{config: deferOne}, plugin{config: `{"request":["dispatch:hold=b","defer"],"call_response":"record_response"}`},
		plugin{config: `{"request":"continue"}`})
	r := request(`{}`)
	defer ReleaseRequest(r)
	tr := &deferTracer{}
	r.Tracer = tr
	r.Services = &batchDispatcher{dispatcher: &dispatcher{}, skip: map[string]bool{"hold": true}}
	if err := pl.Request(r); err != nil {
		t.Fatal(err)
	}
	want := "p0:defer p1:defer p2:continue p0>one:200 p0:continue p1>hold:200 p1:continue"
	if got := strings.Join(tr.events, " "); got != want {
		t.Fatalf("traced %q, want %q", got, want)
	}
}
