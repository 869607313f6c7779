package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/gateway/internal/store/pg"
	"github.com/tollgate/tollgate/gateway/internal/tenant"
	"github.com/tollgate/tollgate/gateway/internal/testkit/mockllm"
	"github.com/tollgate/tollgate/gateway/internal/testkit/pgtest"
	"github.com/tollgate/tollgate/gateway/internal/testkit/redistest"
)

// The cluster test's plan: a rate limit of 20 requests a minute and a
// budget with room for exactly 12 requests of 500 µ$ (each holds and
// costs exactly 500 µ$: 50 completion tokens at 10 µ$, max_tokens 50).
const (
	clusterRPM      = 20
	clusterFit      = 12
	clusterCost     = 50 * outputMicrosPerMTok / 1_000_000
	clusterBudget   = clusterFit*clusterCost + clusterCost - 1
	clusterRequests = 50 // per tenant
	clusterBody     = `{"model":"mock-exact","max_tokens":50,"messages":[{"role":"user","content":"hello there"}]}`
)

// clusterWorld is Postgres, a three-master Redis Cluster with a replica
// per master, and two gateway processes sharing them, with ratelimit
// (fail_closed) and budget.
type clusterWorld struct {
	cl    *redistest.Cluster
	dsn   string
	store *pg.Store
	gws   [2]string
	logs  [2]fmt.Stringer
	keys  map[string]string            // tenant → API key
	owner map[string]*redistest.Server // tenant → its master at creation
	taken map[*redistest.Server]int    // tenants created per master
	seen  map[string]bool
}

func newClusterWorld(t *testing.T) *clusterWorld {
	t.Helper()
	w := &clusterWorld{cl: redistest.StartCluster(t, 3, 1), keys: map[string]string{}, owner: map[string]*redistest.Server{},
		taken: map[*redistest.Server]int{}, seen: map[string]bool{}}
	srv := pgtest.Start(t)
	w.dsn = srv.DSN()
	ctx := context.Background()
	if err := pgtest.Migrate(ctx, w.dsn); err != nil {
		t.Fatal(err)
	}
	st, err := pg.Open(ctx, w.dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	w.store = st
	if err := st.CreatePlan(ctx, tenant.Plan{ID: "metered", MonthlyBudgetMicros: clusterBudget, Limits: tenant.Limits{RPM: clusterRPM}}); err != nil {
		t.Fatal(err)
	}
	if err := st.SetPrice(ctx, tenant.Price{Model: "mock-exact", InputMicrosPerMTok: 0, OutputMicrosPerMTok: outputMicrosPerMTok,
		EffectiveFrom: time.Now().Add(-time.Hour)}); err != nil {
		t.Fatal(err)
	}
	// TTFT 50 ms: admitted requests overlap, on both replicas.
	_, mockURL := startMock(t, mockllm.Config{Tokens: 50, TTFT: 50 * time.Millisecond})
	pol := policy(mockURL, "", "mock-exact") + fmt.Sprintf(`
store:
  kind: postgres
  cache: {ttl: 30s}
redis: {addrs: [%s], timeout: 2s}
call_log: {spool_dir: "${TG_TEST_SPOOL}", reconcile_interval: 0s}
plugins:
  - name: preflight
    path: %s
  - name: ratelimit
    path: %s
    config: {on_redis_error: fail_closed}
  - name: budget
    path: %s
`, quoteJoin(w.cl.Addrs()), pluginPath(t, "preflight"), pluginPath(t, "ratelimit"), pluginPath(t, "budget"))
	var cmds [2]*exec.Cmd
	for i := range w.gws {
		cmd, url, logs := gatewayProcess(t, pol, "TOLLGATE_DATABASE_URL="+w.dsn, "TG_TEST_SPOOL="+t.TempDir())
		cmds[i], w.gws[i], w.logs[i] = cmd, url, logs
	}
	t.Cleanup(func() {
		if t.Failed() {
			for i, l := range w.logs {
				// Its log is read once it has exited and its output
				// has been copied (Wait), not while it writes.
				cmds[i].Process.Kill()
				cmds[i].Wait()
				t.Logf("gateway %d:\n%s", i, tail(l.String(), 3000))
			}
		}
	})
	return w
}

// tenants creates one tenant on each master (by its {tenant} slot), named
// prefix-N, with a key each.
func (w *clusterWorld) tenants(t *testing.T, prefix string) []string {
	t.Helper()
	ctx := context.Background()
	var out []string
	got := map[*redistest.Server]bool{}
	for i := 0; len(out) < 3; i++ {
		name := fmt.Sprintf("%s-%d", prefix, i)
		slot, err := w.cl.Slot("{" + name + "}")
		if err != nil {
			t.Fatal(err)
		}
		o, err := w.cl.Owner(slot)
		if err != nil {
			t.Fatal(err)
		}
		if got[o] {
			continue
		}
		got[o] = true
		if err := w.store.CreateTenant(ctx, tenant.Tenant{ID: name, PlanID: "metered"}); err != nil {
			t.Fatal(err)
		}
		key, _, err := w.store.CreateKey(ctx, name, pg.KeyOptions{})
		if err != nil {
			t.Fatal(err)
		}
		w.keys[name], w.owner[name] = key, o
		out = append(out, name)
	}
	return out
}

// outcome is what one tenant's requests got.
type outcome struct {
	ok, rate, quota, other atomic.Int64
	lastOther              atomic.Pointer[string]
}

// load sends clusterRequests requests per tenant from 32 clients,
// alternating between the gateways. The gated tenant's requests wait
// until disturb calls open, and are then sent one every 10 ms while
// disturb runs; sent is how many of them were sent meanwhile, and during
// how many of those were served (a 200, whenever it came).
func (w *clusterWorld) load(t *testing.T, tenants []string, gated string, disturb func(open func())) (outs map[string]*outcome, elapsed time.Duration, sent, during int64) {
	outs = map[string]*outcome{}
	for _, tn := range tenants {
		outs[tn] = &outcome{}
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	send := func(i int, tn string) (served bool) {
		o := outs[tn]
		req, _ := http.NewRequest("POST", w.gws[i%2]+"/v1/chat/completions", strings.NewReader(clusterBody))
		req.Header.Set("Authorization", "Bearer "+w.keys[tn])
		resp, err := client.Do(req)
		if err != nil {
			s := err.Error()
			o.lastOther.Store(&s)
			o.other.Add(1)
			return false
		}
		var body [8192]byte
		n, _ := readFull(resp.Body, body[:])
		resp.Body.Close()
		code := ""
		if resp.StatusCode != 200 {
			if e := decodeError(t, body[:n]).Error; e.Code != nil {
				code = *e.Code
			}
		}
		switch {
		case resp.StatusCode == 200:
			o.ok.Add(1)
		case resp.StatusCode == 429 && code == "rate_limit_exceeded":
			o.rate.Add(1)
		case resp.StatusCode == 429 && code == "insufficient_quota":
			o.quota.Add(1)
		default:
			s := fmt.Sprintf("%d %s", resp.StatusCode, body[:n])
			o.lastOther.Store(&s)
			o.other.Add(1)
		}
		return resp.StatusCode == 200
	}
	// Each tenant's first request alone: its keys exist in Redis, its
	// tenant is cached on that replica.
	for i, tn := range tenants {
		send(i, tn)
	}
	var disturbing atomic.Bool
	var sentDuring, servedDuring atomic.Int64
	gate := make(chan struct{})
	var openOnce sync.Once
	open := func() { openOnce.Do(func() { close(gate) }) }
	if disturb == nil {
		open()
	} else {
		disturbing.Store(true)
	}
	var paceMu sync.Mutex
	var last time.Time
	jobs := make(chan int)
	start := time.Now()
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for i := range jobs {
				tn := tenants[i%len(tenants)]
				if tn == gated {
					<-gate
					paceMu.Lock()
					if disturbing.Load() {
						if d := 10*time.Millisecond - time.Since(last); d > 0 {
							time.Sleep(d)
						}
						last = time.Now()
					}
					paceMu.Unlock()
				}
				during := tn == gated && disturbing.Load()
				if during {
					sentDuring.Add(1)
				}
				if send(i, tn) && during {
					servedDuring.Add(1)
				}
			}
		})
	}
	go func() {
		for i := len(tenants); i < clusterRequests*len(tenants); i++ {
			jobs <- i
		}
		close(jobs)
	}()
	if disturb != nil {
		disturb(open)
		disturbing.Store(false)
		open()
	}
	wg.Wait()
	return outs, time.Since(start), sentDuring.Load(), servedDuring.Load()
}

// check wants, per tenant: exactly clusterRPM requests through the rate
// limit (plus its refill over elapsed: one every 3 s), of which exactly
// clusterFit served and the rest refused insufficient_quota; call_log,
// spend_month and the Redis counter all at clusterFit × clusterCost; no
// hold left.
func (w *clusterWorld) check(t *testing.T, outs map[string]*outcome, elapsed time.Duration) {
	t.Helper()
	extra := int64(elapsed / (time.Minute / clusterRPM))
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, w.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for tn, o := range outs {
		t.Logf("%s: %d served, %d rate-limited, %d over budget, %d other", tn, o.ok.Load(), o.rate.Load(), o.quota.Load(), o.other.Load())
		if o.other.Load() != 0 {
			t.Errorf("%s: %d requests neither served nor refused by a limit; last: %s", tn, o.other.Load(), *o.lastOther.Load())
			continue
		}
		if through := o.ok.Load() + o.quota.Load(); through < clusterRPM || through > clusterRPM+extra {
			t.Errorf("%s: %d requests passed the rate limit, want exactly %d (+%d for the run's %v)", tn, through, clusterRPM, extra, elapsed)
		}
		if o.ok.Load() != clusterFit {
			t.Errorf("%s: %d served, want exactly %d (budget %d µ$, %d µ$ each)", tn, o.ok.Load(), clusterFit, clusterBudget, clusterCost)
		}
		var rows, sum, month int64
		deadline := time.Now().Add(20 * time.Second)
		for {
			if err := conn.QueryRow(ctx, `SELECT count(*), coalesce(sum(cost_micros), 0)::bigint FROM call_log WHERE tenant_id = $1`, tn).Scan(&rows, &sum); err != nil {
				t.Fatal(err)
			}
			if rows == o.ok.Load()+o.quota.Load()+o.rate.Load() || time.Now().After(deadline) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		err := conn.QueryRow(ctx, `SELECT cost_micros FROM spend_month WHERE tenant_id = $1 AND month = date_trunc('month', now() AT TIME ZONE 'UTC')::date`, tn).Scan(&month)
		if err != nil && err != pgx.ErrNoRows {
			t.Fatal(err)
		}
		spent, holds := w.counter(t, tn)
		if sum != clusterFit*clusterCost || month != sum || spent != fmt.Sprint(sum) || (holds != "0" && holds != "") {
			t.Errorf("%s: call_log %d rows, %d µ$; spend_month %d; Redis spent %s, held %s; want all %d µ$ and nothing held",
				tn, rows, sum, month, spent, holds, clusterFit*clusterCost)
		}
	}
}

// counter reads tenant's budget counter from the master that owns its
// slot now.
func (w *clusterWorld) counter(t *testing.T, tn string) (spent, holds string) {
	t.Helper()
	slot, err := w.cl.Slot("{" + tn + "}")
	if err != nil {
		t.Fatal(err)
	}
	o, err := w.cl.Owner(slot)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := o.Do("KEYS", "*{"+tn+"}*")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range strings.Split(keys, "\n") {
		switch {
		case strings.HasSuffix(k, ":spent"):
			spent, _ = o.Do("GET", k)
		case strings.HasSuffix(k, ":holds"):
			holds, _ = o.Do("HGET", k, "")
		}
	}
	return spent, holds
}

// TestClusterExactAcrossReplicas: two gateway processes on a three-master
// Redis Cluster (a replica each), with tenants on every master and
// ratelimit and budget on, under 32 concurrent clients: per tenant, exactly
// the rate limit's requests pass it and exactly the budget's fit are
// served, and the ledger, spend_month and the Redis counter agree — with
// nothing disturbing the cluster, while the slot of a loaded tenant moves
// to another master (Redis refuses the calls over its split keys with
// TRYAGAIN; the gateway sends them again), and through a graceful failover
// of a loaded tenant's master. The kill of a master is measured in
// gateway/internal/meterstore (TestClusterMasterKilled) and
// docs/RELIABILITY.md.
func TestClusterExactAcrossReplicas(t *testing.T) {
	w := newClusterWorld(t)

	t.Run("steady", func(t *testing.T) {
		tenants := w.tenants(t, "steady")
		outs, elapsed, _, _ := w.load(t, tenants, "", nil)
		w.check(t, outs, elapsed)
	})

	t.Run("reshard", func(t *testing.T) {
		tenants := w.tenants(t, "reshard")
		moved := tenants[0]
		slot, err := w.cl.Slot("{" + moved + "}")
		if err != nil {
			t.Fatal(err)
		}
		to := w.owner[tenants[1]]
		var keys int
		var took time.Duration
		outs, elapsed, sent, _ := w.load(t, tenants, moved, func(open func()) {
			start := time.Now()
			// The tenant's requests start once its first key has moved;
			// the slot stays split (20 ms a key) while they run.
			if err := w.cl.MoveSlot(slot, to, func() { keys++; open(); time.Sleep(20 * time.Millisecond) }); err != nil {
				t.Error(err)
			}
			took = time.Since(start)
		})
		t.Logf("moved %s's slot %d (%d keys) in %v under load; %d of its requests sent meanwhile; all in %v", moved, slot, keys, took, sent, elapsed)
		if keys < 2 || sent == 0 {
			t.Fatalf("%d keys moved, %d requests sent while the slot was split: the test proves nothing", keys, sent)
		}
		w.check(t, outs, elapsed)
	})

	t.Run("failover", func(t *testing.T) {
		tenants := w.tenants(t, "failover")
		var took time.Duration
		outs, elapsed, _, during := w.load(t, tenants, tenants[0], func(open func()) {
			start := time.Now()
			open()
			if _, err := w.cl.Failover(w.owner[tenants[0]]); err != nil {
				t.Error(err)
			}
			took = time.Since(start)
		})
		t.Logf("graceful failover of %s's master in %v under load; %d of its requests sent meanwhile were served; all in %v", tenants[0], took, during, elapsed)
		if during == 0 {
			t.Fatal("no request of the tenant sent during the failover was served: the test proves nothing")
		}
		w.check(t, outs, elapsed)
	})
}
