package observe

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/accounting"
	"github.com/tollgate/tollgate/gateway/internal/calllog"
	"github.com/tollgate/tollgate/gateway/internal/cancels"
	"github.com/tollgate/tollgate/gateway/internal/hostsvc"
	"github.com/tollgate/tollgate/gateway/internal/openai"
	"github.com/tollgate/tollgate/gateway/internal/upstream"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// newTestMetrics is a Metrics whose scrape-time sources are all zero.
func newTestMetrics(t *testing.T) (*Metrics, *atomic.Int64) {
	t.Helper()
	o := NewMetrics(nil, nil, 100)
	src := zeroSources()
	o.SetSources(src)
	return o, src.Inflight
}

// zeroSources are scrape-time sources that are all zero.
func zeroSources() Sources {
	var inflight, reloads atomic.Int64
	return Sources{Inflight: &inflight, Reloads: &reloads, Panics: new([2]atomic.Int64), Accounting: &accounting.Accounting{},
		Cancels: &cancels.Registry{}, Services: &hostsvc.Counts{}}
}

// scrape returns the exposition lines of the tollgate_ metrics.
func scrape(t *testing.T, o *Metrics) []string {
	t.Helper()
	rec := httptest.NewRecorder()
	o.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	var lines []string
	for _, l := range strings.Split(rec.Body.String(), "\n") {
		if strings.Contains(l, "tollgate_") {
			lines = append(lines, l)
		}
	}
	return lines
}

func finished() Finished {
	return Finished{
		Row: calllog.Row{RequestID: "r-1", Model: "gpt-x", Upstream: "a", Status: 200, TenantID: "t1", KeyID: "k1",
			FirstByte: 20 * time.Millisecond, Total: 50 * time.Millisecond, PromptTokens: 7, CompletionTokens: 3,
			CostMicros: 12, Attempts: 2, ReplyBytes: 11, GuardAction: "holdback:stopped"},
		Start: time.Unix(1700000000, 0), Endpoint: "/v1/chat/completions", ModelLabel: "gpt-*", Streamed: true,
		UpSent: 5 * time.Millisecond, TTFT: 30 * time.Millisecond, Events: 4, Fallback: "gpt-y", AccessLog: true,
	}
}

// The help and type lines of every tollgate_ metric, once one request was
// recorded, are those of testdata/metrics_help.golden (docs and
// dashboards depend on them byte for byte).
func TestMetricsHelpGolden(t *testing.T) {
	o, _ := newTestMetrics(t)
	f := finished()
	o.Record(&f, nil, slog.New(slog.DiscardHandler))
	var got []string
	for _, l := range scrape(t, o) {
		if strings.HasPrefix(l, "# ") {
			got = append(got, l)
		}
	}
	sort.Strings(got)
	text := strings.Join(got, "\n") + "\n"
	path := filepath.Join("testdata", "metrics_help.golden")
	if *update {
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if text != string(want) {
		t.Errorf("help lines differ from %s (rerun with -update if the change is meant):\n%s", path, text)
	}
}

// Record observes a finished request under the policy's model label, the
// upstream and the status, with its tokens, cost and guard action.
func TestRecordMetrics(t *testing.T) {
	o, inflight := newTestMetrics(t)
	inflight.Store(3)
	f := finished()
	o.Record(&f, nil, slog.New(slog.DiscardHandler))
	f.Row.Status, f.Row.GuardAction, f.Row.TenantID = 502, "", ""
	o.Record(&f, nil, slog.New(slog.DiscardHandler))
	have := map[string]bool{}
	for _, l := range scrape(t, o) {
		have[l] = true
	}
	for _, want := range []string{
		`tollgate_requests_total{endpoint="/v1/chat/completions",model="gpt-*",status="200",upstream="a"} 1`,
		`tollgate_requests_total{endpoint="/v1/chat/completions",model="gpt-*",status="502",upstream="a"} 1`,
		`tollgate_tokens_total{tenant="t1",type="prompt"} 7`,
		`tollgate_tokens_total{tenant="t1",type="completion"} 3`,
		`tollgate_cost_usd_micros_total{tenant="t1"} 12`,
		`tollgate_guard_actions_total{action="holdback:stopped"} 1`,
		`tollgate_request_tokens_count{model="gpt-*",type="prompt"} 1`, // the 502 is not counted
		`tollgate_phase_duration_seconds_count{phase="stream",upstream="a"} 2`,
		`tollgate_phase_duration_seconds_sum{phase="admission",upstream="a"} 0.01`,
		`tollgate_time_to_first_token_seconds_count{endpoint="/v1/chat/completions",model="gpt-*",upstream="a"} 2`,
		`tollgate_inflight_requests 3`,
	} {
		if !have[want] {
			t.Errorf("missing %s", want)
		}
	}
	for l := range have {
		if strings.Contains(l, `model="gpt-x"`) {
			t.Errorf("the client's model became a label: %s", l)
		}
	}
}

// The access log line has the row's fields and the timings in ms, and no
// trace id without a trace.
func TestAccessLog(t *testing.T) {
	tests := []struct {
		name      string
		accessLog bool
		ttft      time.Duration
		wantTTFT  float64
	}{
		{"stream", true, 30 * time.Millisecond, 30},
		{"no first token", true, -1, -1},
		{"off", false, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, _ := newTestMetrics(t)
			var buf bytes.Buffer
			f := finished()
			f.AccessLog, f.TTFT = tt.accessLog, tt.ttft
			o.Record(&f, nil, slog.New(slog.NewJSONHandler(&buf, nil)))
			if !tt.accessLog {
				if buf.Len() != 0 {
					t.Fatalf("a line without access_log: %s", buf.String())
				}
				return
			}
			var m map[string]any
			if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
				t.Fatalf("%v: %s", err, buf.String())
			}
			want := map[string]any{"msg": "request", "request_id": "r-1", "tenant": "t1", "key_id": "k1",
				"endpoint": "/v1/chat/completions", "model": "gpt-x", "upstream": "a", "status": 200.0, "stream": true,
				"first_byte_ms": 20.0, "ttft_ms": tt.wantTTFT, "total_ms": 50.0, "prompt_tokens": 7.0,
				"completion_tokens": 3.0, "cost_micros": 12.0, "reply_bytes": 11.0, "guard_action": "holdback:stopped",
				"attempts": 2.0, "fallback_model": "gpt-y"}
			for k, v := range want {
				if m[k] != v {
					t.Errorf("%s = %v, want %v", k, m[k], v)
				}
			}
			if _, ok := m["trace_id"]; ok {
				t.Errorf("trace_id without a trace: %v", m["trace_id"])
			}
		})
	}
}

func TestErrorType(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{fmt.Errorf("attempt: %w", upstream.ErrTimeout), "timeout"},
		{upstream.ErrCanceled, "cancelled"},
		{context.Canceled, "cancelled"},
		{&openai.Error{Code: "upstream_saturated"}, "upstream_saturated"},
		{&openai.Error{}, "unreachable"},
		{errors.New("connection refused"), "unreachable"},
	}
	for _, tt := range tests {
		if got := errorType(tt.err); got != tt.want {
			t.Errorf("errorType(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}
