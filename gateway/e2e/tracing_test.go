package e2e

import (
	"compress/gzip"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/tollgate/tollgate/gateway/internal/config"
	"github.com/tollgate/tollgate/gateway/internal/proxy"
	"github.com/tollgate/tollgate/gateway/internal/testkit/mockllm"
)

// otlpReceiver is an OTLP/HTTP trace receiver: it decodes the protobuf
// export requests the gateway posts to /v1/traces.
type otlpReceiver struct {
	URL string

	mu        sync.Mutex
	spans     []*tracepb.Span
	resources []map[string]string
	bad       []string
}

func startOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	rcv := &otlpReceiver{}
	ts := httptest.NewServer(http.HandlerFunc(rcv.serve))
	t.Cleanup(ts.Close)
	rcv.URL = ts.URL
	return rcv
}

func (rcv *otlpReceiver) serve(w http.ResponseWriter, r *http.Request) {
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		body = zr
	}
	b, err := io.ReadAll(body)
	var req coltracepb.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(b, &req)
	}
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	if r.Method != "POST" || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" || err != nil {
		rcv.bad = append(rcv.bad, fmt.Sprintf("%s %s %s: %v", r.Method, r.URL.Path, r.Header.Get("Content-Type"), err))
		http.Error(w, "bad export", 400)
		return
	}
	for _, rs := range req.GetResourceSpans() {
		rcv.resources = append(rcv.resources, attrMap(rs.GetResource().GetAttributes()))
		for _, ss := range rs.GetScopeSpans() {
			rcv.spans = append(rcv.spans, ss.GetSpans()...)
		}
	}
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out)
}

// trace returns the spans of the trace with id tid (hex).
func (rcv *otlpReceiver) trace(tid string) []*tracepb.Span {
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	var out []*tracepb.Span
	for _, s := range rcv.spans {
		if hex.EncodeToString(s.GetTraceId()) == tid {
			out = append(out, s)
		}
	}
	return out
}

func attrMap(kvs []*commonpb.KeyValue) map[string]string {
	m := map[string]string{}
	for _, kv := range kvs {
		switch v := kv.GetValue().GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			m[kv.GetKey()] = v.StringValue
		case *commonpb.AnyValue_IntValue:
			m[kv.GetKey()] = fmt.Sprint(v.IntValue)
		case *commonpb.AnyValue_DoubleValue:
			m[kv.GetKey()] = fmt.Sprint(v.DoubleValue)
		case *commonpb.AnyValue_BoolValue:
			m[kv.GetKey()] = fmt.Sprint(v.BoolValue)
		default:
			m[kv.GetKey()] = fmt.Sprint(v)
		}
	}
	return m
}

// headerRecorder is an upstream that records the traceparent headers of
// each request and answers as the mock model.
type headerRecorder struct {
	mu   sync.Mutex
	seen [][]string
}

func (h *headerRecorder) start(t *testing.T, cfg mockllm.Config) string {
	mock := mockllm.New(cfg)
	return startUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.seen = append(h.seen, r.Header.Values("Traceparent"))
		h.mu.Unlock()
		mock.ServeHTTP(w, r)
	})
}

func (h *headerRecorder) last() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.seen) == 0 {
		return nil
	}
	return h.seen[len(h.seen)-1]
}

// tracedGateway runs pol in-process; stop shuts it down, which exports the
// spans still queued.
func tracedGateway(t *testing.T, pol string) (gw string, stop func()) {
	t.Helper()
	p, err := config.Parse([]byte(pol), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatalf("policy: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := proxy.New(p, slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { srv.Serve(ln); close(done) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			if err := srv.Shutdown(0, 2*time.Second); err != nil {
				t.Errorf("shutdown: %v", err)
			}
			<-done
		})
	}
	t.Cleanup(stop)
	return "http://" + ln.Addr().String(), stop
}

// tracingPolicy is preflight, ratelimit and holdback in front of upstream
// url, which is also sent the client's traceparent (the gateway must send
// its own instead), with tracing to the receiver at otlp.
func tracingPolicy(t *testing.T, url, otlp string, ratio float64) string {
	pol := limitedPolicy(t, url, "", 1000, 0, `{}`) + fmt.Sprintf(`  - name: holdback
    path: %s
    config: %s
tracing: {otlp_endpoint: %q, sample_ratio: %g}
`, pluginPath(t, "holdback"), hbConfig, otlp, ratio)
	return strings.Replace(pol, `forward_headers: ["x-mock-*"]`, `forward_headers: ["x-mock-*", "traceparent", "tracestate"]`, 1)
}

// TestTracingSpanTree: a traced stream is one server span continuing the
// client's trace, with a span per plugin phase, the upstream and the
// stream; the upstream is sent a traceparent naming the upstream span;
// nothing of the key or the prompt is exported.
func TestTracingSpanTree(t *testing.T) {
	rcv := startOTLPReceiver(t)
	var up headerRecorder
	url := up.start(t, mockllm.Config{Tokens: 4})
	gw, stop := tracedGateway(t, tracingPolicy(t, url, rcv.URL, 1))

	const (
		tid    = "4bf92f3577b34da6a3ce929d0e0e4736"
		parent = "00f067aa0ba902b7"
		secret = "the-prompt-text-must-not-be-exported"
	)
	body := `{"model":"mock-1","stream":true,"max_tokens":50,"messages":[{"role":"user","content":"` + secret + `"}]}`
	status, hdr, reply := post(t, gw+"/v1/chat/completions", body, "Authorization", "Bearer tg_rl_1",
		"Traceparent", "00-"+tid+"-"+parent+"-01", "Tracestate", "vendor=1")
	if status != 200 {
		t.Fatalf("%d %s", status, reply)
	}
	events := sseDataEvents(reply)
	sent := up.last()
	// A request without a traceparent starts a trace of its own.
	if status, _, b := post(t, gw+"/v1/chat/completions", chatOnce, "Authorization", "Bearer tg_rl_1"); status != 200 {
		t.Fatalf("%d %s", status, b)
	}
	second := up.last()
	stop()

	rcv.mu.Lock()
	bad, resources := rcv.bad, rcv.resources
	rcv.mu.Unlock()
	if len(bad) > 0 || len(resources) == 0 || resources[0]["service.name"] != "tollgate" {
		t.Fatalf("bad exports %v, resources %v", bad, resources)
	}
	spans := rcv.trace(tid)
	byName := map[string]*tracepb.Span{}
	var root *tracepb.Span
	var ratelimit []*tracepb.Span // its on_request (an admission needs no on_call_response)
	for _, s := range spans {
		if s.GetName() == "plugin ratelimit request" {
			ratelimit = append(ratelimit, s)
		} else if byName[s.GetName()] != nil {
			t.Errorf("two spans named %q", s.GetName())
		}
		byName[s.GetName()] = s
		if s.GetName() == "chat mock-1" {
			root = s
		}
	}
	if root == nil {
		t.Fatalf("no root span in %d spans of the trace: %v", len(spans), names(spans))
	}
	if hex.EncodeToString(root.GetParentSpanId()) != parent || root.GetKind() != tracepb.Span_SPAN_KIND_SERVER {
		t.Errorf("root parent %x kind %v, want %s SERVER", root.GetParentSpanId(), root.GetKind(), parent)
	}
	ra := attrMap(root.GetAttributes())
	for k, want := range map[string]string{
		"gen_ai.operation.name": "chat", "gen_ai.request.model": "mock-1", "gen_ai.request.max_tokens": "50",
		"gen_ai.usage.output_tokens": "4", "http.response.status_code": "200", "http.route": "/v1/chat/completions",
		"tollgate.tenant.id": "acme", "tollgate.upstream": "up", "tollgate.request_id": hdr.Get("X-Request-Id"),
	} {
		if ra[k] != want {
			t.Errorf("root %s = %q, want %q", k, ra[k], want)
		}
	}
	if ra["gen_ai.usage.input_tokens"] == "" || ra["gen_ai.usage.input_tokens"] == "0" || ra["tollgate.time_to_first_token_ms"] == "" {
		t.Errorf("root attributes %v", ra)
	}
	want := []string{"plugin preflight request", "plugin ratelimit request", "upstream up", "stream", "plugin holdback chunk"}
	// ratelimit dispatches its admission: the call's client span; the
	// answer "allowed" is expected, so no second callback.
	if len(spans) != len(want)+2 || len(ratelimit) != 1 {
		t.Errorf("spans %v, want the root, %v and ratelimit's call", names(spans), want)
	}
	if c := byName["call ratelimit.admit"]; c == nil || c.GetKind() != tracepb.Span_SPAN_KIND_CLIENT ||
		c.GetStartTimeUnixNano() < root.GetStartTimeUnixNano() || c.GetEndTimeUnixNano() > root.GetEndTimeUnixNano() ||
		!slices.ContainsFunc(append(ratelimit, root), func(p *tracepb.Span) bool { return string(p.GetSpanId()) == string(c.GetParentSpanId()) }) {
		t.Errorf("the admission's call span %v: want a client span under the root or a ratelimit callback", c)
	}
	for _, n := range want {
		s := byName[n]
		if s == nil {
			t.Errorf("no span %q in %v", n, names(spans))
			continue
		}
		if string(s.GetParentSpanId()) != string(root.GetSpanId()) {
			t.Errorf("span %q is not the root's child", n)
		}
		if s.GetStartTimeUnixNano() < root.GetStartTimeUnixNano() || s.GetEndTimeUnixNano() > root.GetEndTimeUnixNano() ||
			s.GetEndTimeUnixNano() < s.GetStartTimeUnixNano() {
			t.Errorf("span %q [%d, %d] outside the root [%d, %d]", n, s.GetStartTimeUnixNano(), s.GetEndTimeUnixNano(),
				root.GetStartTimeUnixNano(), root.GetEndTimeUnixNano())
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	upSpan, stream, chunk := byName["upstream up"], byName["stream"], byName["plugin holdback chunk"]
	if upSpan.GetKind() != tracepb.Span_SPAN_KIND_CLIENT || ratelimit[0].GetEndTimeUnixNano() > upSpan.GetStartTimeUnixNano() ||
		byName["call ratelimit.admit"].GetEndTimeUnixNano() > upSpan.GetStartTimeUnixNano() ||
		stream.GetStartTimeUnixNano() < upSpan.GetEndTimeUnixNano() {
		t.Errorf("upstream span %v, plugin spans before it, stream after it", upSpan)
	}
	ua := attrMap(upSpan.GetAttributes())
	if ua["http.response.status_code"] != "200" || ua["tollgate.upstream"] != "up" || ua["tollgate.attempts"] != "1" {
		t.Errorf("upstream span attributes %v", ua)
	}
	if ca := attrMap(chunk.GetAttributes()); ca["tollgate.calls"] != fmt.Sprint(events) || ca["tollgate.plugin"] != "holdback" {
		t.Errorf("chunk span attributes %v, want %d calls", ca, events)
	}
	if pa := attrMap(byName["plugin preflight request"].GetAttributes()); pa["tollgate.verdict"] != "continue" || pa["tollgate.phase"] != "request" {
		t.Errorf("preflight span attributes %v", pa)
	}
	// The upstream got one traceparent: the gateway's, naming the upstream
	// span, sampled; the client's was not passed on.
	wantTP := "00-" + tid + "-" + hex.EncodeToString(upSpan.GetSpanId()) + "-01"
	if len(sent) != 1 || sent[0] != wantTP {
		t.Errorf("upstream traceparent %q, want [%s]", sent, wantTP)
	}
	if len(second) != 1 || strings.Contains(second[0], tid) || !strings.HasSuffix(second[0], "-01") {
		t.Errorf("second request's traceparent %q: want a new sampled trace", second)
	}
	rcv.mu.Lock()
	for _, s := range rcv.spans {
		for k, v := range attrMap(s.GetAttributes()) {
			if strings.Contains(v, secret) || strings.Contains(v, "tg_rl_1") {
				t.Errorf("span %q attribute %s holds the prompt or the key", s.GetName(), k)
			}
		}
	}
	rcv.mu.Unlock()
}

// TestTracingSampling: at sample_ratio 0 a new trace is not recorded but
// still propagated upstream (not sampled), while a caller's sampled trace
// is followed.
func TestTracingSampling(t *testing.T) {
	rcv := startOTLPReceiver(t)
	var up headerRecorder
	url := up.start(t, mockllm.Config{Tokens: 2})
	gw, stop := tracedGateway(t, tracingPolicy(t, url, rcv.URL, 0))
	if status, _, b := post(t, gw+"/v1/chat/completions", chatOnce, "Authorization", "Bearer tg_rl_1"); status != 200 {
		t.Fatalf("%d %s", status, b)
	}
	unsampled := up.last()
	const tid = "0af7651916cd43dd8448eb211c80319c"
	if status, _, b := post(t, gw+"/v1/chat/completions", chatOnce, "Authorization", "Bearer tg_rl_1",
		"Traceparent", "00-"+tid+"-b7ad6b7169203331-01"); status != 200 {
		t.Fatalf("%d %s", status, b)
	}
	followed := up.last()
	stop()
	if len(unsampled) != 1 || !strings.HasPrefix(unsampled[0], "00-") || !strings.HasSuffix(unsampled[0], "-00") {
		t.Errorf("unsampled request's upstream traceparent %q, want flags 00", unsampled)
	}
	if len(followed) != 1 || !strings.HasPrefix(followed[0], "00-"+tid+"-") || !strings.HasSuffix(followed[0], "-01") {
		t.Errorf("sampled caller's upstream traceparent %q", followed)
	}
	rcv.mu.Lock()
	n := len(rcv.spans)
	rcv.mu.Unlock()
	// The root, preflight, ratelimit (its on_request and its dispatched
	// admission, whose expected answer needs no second callback),
	// holdback (the whole reply's chunk phase) and the upstream.
	if got := len(rcv.trace(tid)); got != n || got != 6 {
		t.Errorf("exported %d spans, %d of the caller's trace; want only its 6", n, got)
	}
}

// TestTracingOff: without tracing the gateway adds no traceparent, and a
// client's passes only as forward_headers allow.
func TestTracingOff(t *testing.T) {
	var up headerRecorder
	url := up.start(t, mockllm.Config{Tokens: 2})
	pol := strings.Replace(tracingPolicy(t, url, "http://127.0.0.1:1", 1), "tracing: {", "not_tracing: {", 1)
	pol = pol[:strings.Index(pol, "not_tracing:")]
	_, gw := startGateway(t, pol, nil)
	if status, _, b := post(t, gw+"/v1/chat/completions", chatOnce, "Authorization", "Bearer tg_rl_1"); status != 200 {
		t.Fatalf("%d %s", status, b)
	}
	if got := up.last(); len(got) != 0 {
		t.Errorf("upstream traceparent %q without tracing", got)
	}
	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	if status, _, b := post(t, gw+"/v1/chat/completions", chatOnce, "Authorization", "Bearer tg_rl_1", "Traceparent", tp); status != 200 {
		t.Fatalf("%d %s", status, b)
	}
	if got := up.last(); len(got) != 1 || got[0] != tp {
		t.Errorf("upstream traceparent %q, want the client's (forward_headers lists it)", got)
	}
}

func names(spans []*tracepb.Span) []string {
	var n []string
	for _, s := range spans {
		n = append(n, s.GetName())
	}
	return n
}
