package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/gateway/internal/alerts"
	"github.com/tollgate/tollgate/gateway/internal/tenant"
	"github.com/tollgate/tollgate/gateway/internal/testkit/mockllm"
)

// alertHook is a webhook on loopback that checks each delivery's signature
// (the gateway's secret came from its environment), fails the first
// attempt of every alert with a 500, and records the rest.
type alertHook struct {
	t      *testing.T
	secret []byte

	mu        sync.Mutex
	attempts  map[string]int
	delivered map[string][]alerts.Payload
}

func (h *alertHook) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	sig := r.Header.Get(alerts.SignatureHeader)
	ts, _, _ := strings.Cut(strings.TrimPrefix(sig, "t="), ",")
	unix, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || sig != alerts.Sign(h.secret, body, time.Unix(unix, 0)) || time.Since(time.Unix(unix, 0)) > time.Minute {
		h.t.Errorf("a delivery with signature %q does not verify", sig)
		rw.WriteHeader(http.StatusUnauthorized)
		return
	}
	var p alerts.Payload
	if err := json.Unmarshal(body, &p); err != nil {
		h.t.Errorf("a delivery's body: %v: %s", err, body)
		rw.WriteHeader(http.StatusBadRequest)
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.attempts[p.ID]++
	if h.attempts[p.ID] == 1 {
		rw.WriteHeader(http.StatusInternalServerError)
		return
	}
	h.delivered[p.ID] = append(h.delivered[p.ID], p)
}

func (h *alertHook) snapshot() map[string][]alerts.Payload {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string][]alerts.Payload, len(h.delivered))
	for id, ps := range h.delivered {
		out[id] = append([]alerts.Payload(nil), ps...)
	}
	return out
}

// TestBudgetAlertsAcrossReplicas: two gateway processes on one Postgres and
// Redis serve two waves of concurrent requests (64, then 32) against a
// tenant's monthly budget with alerts at 50% and 100%, and a key budget
// whose 80% alert is never reached. The 50% crossing and the 100% (a
// refusal of the exhausted budget, many times over on both gateways) each
// reach the webhook exactly once, signed, after a failed first attempt;
// the outbox holds exactly those two rows, delivered.
func TestBudgetAlertsAcrossReplicas(t *testing.T) {
	const limit = 20_000 // µ$: about 20 requests of ~1,003 µ$ held, ~510 settled
	w := newBudgetWorld(t, 0)
	ctx := context.Background()
	err := w.store.UpdatePlan(ctx, tenant.Plan{ID: "metered", Budgets: []tenant.BudgetRule{
		{Scope: tenant.BudgetTenant, Window: tenant.WindowMonth, LimitMicros: limit, Alerts: []int{50, 100}},
		{Scope: tenant.BudgetKey, Window: tenant.WindowDay, LimitMicros: 1_000_000, Alerts: []int{80}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	secret := "whsec-e2e-0123456789"
	hook := &alertHook{t: t, secret: []byte(secret), attempts: map[string]int{}, delivered: map[string][]alerts.Payload{}}
	hookSrv := httptest.NewServer(hook)
	defer hookSrv.Close()

	_, mockURL := startMock(t, mockllm.Config{Tokens: 50, TTFT: 200 * time.Millisecond})
	pol := w.policy(t, mockURL, `{}`, "") + "alerts: {webhook_url: \"" + hookSrv.URL + "/budget\", timeout: 2s}\n"
	env := []string{"TOLLGATE_DATABASE_URL=" + w.dsn, "TOLLGATE_ALERTS_SECRET=" + secret}
	_, gwA, _ := gatewayProcess(t, pol, append(env, "TG_TEST_SPOOL="+t.TempDir())...)
	_, gwB, _ := gatewayProcess(t, pol, append(env, "TG_TEST_SPOOL="+t.TempDir())...)

	// Two waves: the first fills the budget with holds (the 100% alert
	// fires on its refusals, with spend far below the limit), the second
	// finds the holds settled at half their size and takes spend past 50%.
	var mu sync.Mutex
	statuses := map[int]int{}
	for _, wave := range []int{64, 32} {
		var wg sync.WaitGroup
		for i := range wave {
			wg.Go(func() {
				gw := gwA
				if i%2 == 1 {
					gw = gwB
				}
				status, _, _ := w.chat(t, gw, chatMax100)
				mu.Lock()
				statuses[status]++
				mu.Unlock()
			})
		}
		wg.Wait()
	}
	t.Logf("statuses %v", statuses)
	if statuses[200] < 20 || statuses[429] == 0 || statuses[200]+statuses[429] != 96 {
		t.Fatalf("statuses %v: want 20 or more served and the rest refused", statuses)
	}
	w.waitRows(t, 96)
	_, settled, _ := w.ledger(t)
	t.Logf("settled %d µ$ of %d", settled, limit)

	var got map[string][]alerts.Payload
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if got = hook.snapshot(); len(got) >= 2 || time.Now().After(deadline) {
			break
		}
	}
	time.Sleep(2 * time.Second) // room for a wrong second delivery
	got = hook.snapshot()
	month := time.Now().UTC().Format("2006-01")
	thresholds := map[int]alerts.Payload{}
	for id, ps := range got {
		if len(ps) != 1 {
			t.Errorf("alert %s delivered %d times", id, len(ps))
		}
		p := ps[0]
		if p.Tenant != "acme" || p.Scope.Kind != "tenant" || p.Scope.Window != "month" || p.Scope.Period != month ||
			p.LimitMicros != limit || p.Type != "budget.threshold" {
			t.Errorf("alert %+v, want acme's monthly budget of %d µ$ this month", p, limit)
		}
		thresholds[p.Threshold] = p
	}
	if len(got) != 2 || thresholds[50].ID == "" || thresholds[100].ID == "" {
		t.Fatalf("alerts delivered %v, want 50%% and 100%% once each", got)
	}
	if p := thresholds[50]; p.Reason != alerts.ReasonCrossed || p.SpentMicros < limit/2 || p.SpentMicros > settled {
		t.Errorf("the 50%% alert %+v: want a crossing with spend in [%d, %d]", p, limit/2, settled)
	}
	if p := thresholds[100]; p.SpentMicros > limit {
		t.Errorf("the 100%% alert %+v reports spend above the limit", p)
	}

	conn, err := pgx.Connect(ctx, w.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var rows, delivered int
	if err := conn.QueryRow(ctx, `SELECT count(*), count(delivered_at) FROM budget_alerts`).Scan(&rows, &delivered); err != nil {
		t.Fatal(err)
	}
	if rows != 2 || delivered != 2 {
		t.Errorf("budget_alerts: %d rows, %d delivered; want 2 and 2", rows, delivered)
	}
}
