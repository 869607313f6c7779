package alerts

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/budget"
)

var testSecret = []byte("whsec-test-0123456789")

// verify checks a delivery's signature as a receiver would: the HMAC of
// "<t>.<body>" under the secret, compared in constant time, with t within
// tolerance of now. It shares no code with Sign.
func verify(secret []byte, header string, body []byte, now time.Time, tolerance time.Duration) error {
	var ts, sig string
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(part, "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			sig = v
		}
	}
	t, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("bad timestamp %q", ts)
	}
	if d := now.Sub(time.Unix(t, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("timestamp %d is %v from now", t, d)
	}
	got, err := hex.DecodeString(sig)
	if err != nil {
		return fmt.Errorf("bad signature %q", sig)
	}
	m := hmac.New(sha256.New, secret)
	fmt.Fprintf(m, "%d.", t)
	m.Write(body)
	if !hmac.Equal(got, m.Sum(nil)) {
		return fmt.Errorf("signature mismatch")
	}
	return nil
}

// receiver is a webhook on loopback that verifies every delivery and
// answers each with respond(attempt number at this receiver for the id).
type receiver struct {
	t       testing.TB
	srv     *httptest.Server
	respond func(id string, n int) int // status; 0 means hang past the timeout

	mu        sync.Mutex
	attempts  map[string]int
	delivered map[string]int // 2xx answers by id
	bodies    map[string]Payload
	bad       []string
}

func newReceiver(t testing.TB, respond func(id string, n int) int) *receiver {
	r := &receiver{t: t, respond: respond, attempts: map[string]int{}, delivered: map[string]int{}, bodies: map[string]Payload{}}
	if r.respond == nil {
		r.respond = func(string, int) int { return http.StatusOK }
	}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	var p Payload
	err := verify(testSecret, req.Header.Get(SignatureHeader), body, time.Now(), 5*time.Minute)
	if err == nil {
		err = json.Unmarshal(body, &p)
	}
	if err == nil && (p.ID != req.Header.Get(IDHeader) || p.Type != EventType || req.Method != http.MethodPost) {
		err = fmt.Errorf("id %q header %q type %q method %s", p.ID, req.Header.Get(IDHeader), p.Type, req.Method)
	}
	r.mu.Lock()
	if err != nil {
		r.bad = append(r.bad, err.Error())
		r.mu.Unlock()
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	r.attempts[p.ID]++
	n := r.attempts[p.ID]
	r.mu.Unlock()
	status := r.respond(p.ID, n)
	if status == 0 {
		<-req.Context().Done() // the gateway's timeout
		return
	}
	if status/100 == 2 {
		r.mu.Lock()
		r.delivered[p.ID]++
		r.bodies[p.ID] = p
		r.mu.Unlock()
	}
	w.WriteHeader(status)
}

// snapshot returns copies of what the receiver saw.
func (r *receiver) snapshot() (attempts, delivered map[string]int, bad []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	attempts, delivered = map[string]int{}, map[string]int{}
	for k, v := range r.attempts {
		attempts[k] = v
	}
	for k, v := range r.delivered {
		delivered[k] = v
	}
	return attempts, delivered, append([]string(nil), r.bad...)
}

// waitDelivered waits until the receiver has accepted n distinct alerts.
func (r *receiver) waitDelivered(n int, within time.Duration) map[string]int {
	r.t.Helper()
	deadline := time.Now().Add(within)
	for {
		_, delivered, bad := r.snapshot()
		if len(bad) > 0 {
			r.t.Fatalf("receiver refused deliveries: %v", bad)
		}
		if len(delivered) >= n {
			return delivered
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("%d alerts delivered within %v, want %d", len(delivered), within, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// testOptions are fast options for tests, delivering to r.
func testOptions(t testing.TB, r *receiver, ob Outbox) Options {
	return Options{
		URL: r.srv.URL + "/hook?token=url-secret", Secret: testSecret, Outbox: ob,
		Timeout: 300 * time.Millisecond, Poll: 20 * time.Millisecond,
		RetryMin: 10 * time.Millisecond, RetryMax: 40 * time.Millisecond,
		Logger: testLogger(t),
	}
}

// testLogger logs to the test, and fails it if a line carries the
// webhook's secret or the URL's token.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(&secretWatch{t: t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type secretWatch struct{ t testing.TB }

func (w *secretWatch) Write(p []byte) (int, error) {
	if bytes.Contains(p, testSecret) || bytes.Contains(p, []byte("url-secret")) {
		w.t.Errorf("a log line carries a secret: %s", p)
	}
	w.t.Logf("%s", bytes.TrimSpace(p))
	return len(p), nil
}

// newDispatcher starts a dispatcher closed at the test's end.
func newDispatcher(t testing.TB, o Options) *Dispatcher {
	t.Helper()
	d, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := d.Close(ctx); err != nil {
			t.Errorf("closing: %v", err)
		}
	})
	return d
}

// crossings is a fake crossing source: n crossings, one per tenant, of
// the tenant's monthly budget at threshold.
func crossings(n, threshold int, at time.Time) []budget.Crossing {
	out := make([]budget.Crossing, n)
	for i := range out {
		s := budget.Scope{Kind: budget.ScopeTenant, Window: budget.Month, Period: budget.Month.Period(at),
			Limit: 100_000_000, Alerts: []int{80, 100}}
		out[i] = budget.Crossing{Tenant: fmt.Sprintf("t%03d", i), Scope: s, Threshold: threshold,
			Before: int64(threshold-1) * 1_000_000, After: int64(threshold) * 1_000_000, At: at}
	}
	return out
}
