package cancels_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/cancels"
	"github.com/tollgate/tollgate/gateway/internal/redisx"
	"github.com/tollgate/tollgate/gateway/internal/redisx/redisxtest"
	"github.com/tollgate/tollgate/gateway/internal/testkit/redistest"
)

func redisClient(t *testing.T, srv *redistest.Server) *redisx.Client {
	t.Helper()
	return redisxtest.Connect(t, redisx.Options{Addrs: []string{srv.Addr()}, Timeout: 5 * time.Second})
}

const interval = 20 * time.Millisecond

func newRegistry(t *testing.T, rc *redisx.Client, replica string) *cancels.Registry {
	t.Helper()
	r := cancels.New(slog.New(slog.DiscardHandler), rc, interval, replica)
	t.Cleanup(r.Close)
	return r
}

// listed returns "replica/tenant/id/model/stream" of every request r lists,
// sorted.
func listed(t *testing.T, r *cancels.Registry) []string {
	t.Helper()
	reqs, err := r.List(t.Context())
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	var out []string
	for _, q := range reqs {
		out = append(out, fmt.Sprintf("%s/%s/%s/%s/%v", q.Replica, q.TenantID, q.ID, q.Model, q.Stream))
	}
	slices.Sort(out)
	return out
}

// eventually waits (10 s at most, a loaded machine) until r lists want.
func eventually(t *testing.T, r *cancels.Registry, want []string) {
	t.Helper()
	var got []string
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if got = listed(t, r); slices.Equal(got, want) {
			return
		}
	}
	t.Fatalf("%s lists %q, want %q", r.Replica(), got, want)
}

func noop(error) {}

// TestListAcrossReplicas: each replica lists its own requests at once and
// the others' from their next poll; an ended request leaves every list; a
// replica that stops polling (crashed) leaves the others' lists within
// three intervals; info lost in Redis is sent again.
func TestListAcrossReplicas(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	a := newRegistry(t, redisClient(t, srv), "gw-a")
	b := newRegistry(t, redisClient(t, srv), "gw-b")
	started := time.Now().Add(-time.Second).UTC()
	ka := a.Add([]byte("req-1"), "acme", noop, cancels.Info{Model: "gpt-4o", Stream: true, Started: started})
	a.Add([]byte("req-2"), "beta", noop, cancels.Info{Model: "llama", Started: started})
	// Another tenant's request with the same id on another replica.
	b.Add([]byte("req-1"), "beta", noop, cancels.Info{Model: "m", Started: started})
	// a lists its own at once, before any poll; b's shows once b's poller
	// announced it, which may already have happened.
	all := []string{"gw-a/acme/req-1/gpt-4o/true", "gw-a/beta/req-2/llama/false", "gw-b/beta/req-1/m/false"}
	if got := listed(t, a); !slices.Equal(got, all[:2]) && !slices.Equal(got, all) {
		t.Errorf("a lists its own at once: %q, want %q (and perhaps b's)", got, all[:2])
	}
	eventually(t, a, all)
	eventually(t, b, all)
	reqs, err := b.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range reqs {
		if !q.StartedAt.Equal(started) {
			t.Errorf("%+v: started_at %v, want %v", q, q.StartedAt, started)
		}
	}

	a.Remove(ka)
	eventually(t, b, all[1:])

	// Redis loses the info: the next polls send it again.
	if _, err := srv.Do("FLUSHALL"); err != nil {
		t.Fatal(err)
	}
	eventually(t, b, all[1:])

	b.Close() // stops polling, its request still registered: a crash as seen from Redis
	eventually(t, a, all[1:2])
	// The stale entry is gone from Redis too, not only from the list.
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		n, err := srv.Do("HLEN", "tollgate:{cancel}:info")
		if err != nil {
			t.Fatal(err)
		}
		if n == "1" {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("info hash holds %s entries, want a's 1", n)
		}
	}
}

// TestListWithoutRedis: without Redis a replica lists its own requests.
func TestListWithoutRedis(t *testing.T) {
	t.Parallel()
	r := newRegistry(t, nil, "solo")
	k := r.Add([]byte("x"), "acme", noop, cancels.Info{Model: "m"})
	if got := listed(t, r); !slices.Equal(got, []string{"solo/acme/x/m/false"}) {
		t.Fatalf("list %q", got)
	}
	r.Remove(k)
	if got := listed(t, r); got != nil {
		t.Fatalf("after Remove: %q", got)
	}
}

// TestAddSendsNothing: registering and removing requests sends no Redis
// command; only the poller does (here it never runs: an hour's interval).
func TestAddSendsNothing(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rc := redisClient(t, srv)
	r := cancels.New(slog.New(slog.DiscardHandler), rc, time.Hour, "gw")
	defer r.Close()
	before := rc.Commands()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 500 {
				k := r.Add(fmt.Appendf(nil, "r-%d-%d", g, i), "acme", noop, cancels.Info{Model: "m", Started: time.Now()})
				r.Remove(k)
			}
		})
	}
	wg.Wait()
	if n := rc.Commands() - before; n != 0 {
		t.Errorf("%d Redis commands from Add and Remove, want 0", n)
	}
}

// TestCancelStillWorks: the listing's keys do not disturb cancels: a cancel
// received by one replica reaches a request of another.
func TestCancelStillWorks(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	a := newRegistry(t, redisClient(t, srv), "gw-a")
	b := newRegistry(t, redisClient(t, srv), "gw-b")
	done := make(chan error, 1)
	a.Add([]byte("req-9"), "acme", func(err error) { done <- err }, cancels.Info{Model: "m", Started: time.Now()})
	eventually(t, b, []string{"gw-a/acme/req-9/m/false"})
	ok, err := b.Cancel(t.Context(), "req-9", cancels.AnyTenant)
	if err != nil || !ok {
		t.Fatalf("Cancel: %v %v", ok, err)
	}
	select {
	case err := <-done:
		if !strings.Contains(fmt.Sprint(err), "cancel") {
			t.Errorf("cancel cause %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the request on a was not cancelled")
	}
}

// TestListOnCluster: on a Redis Cluster the poll and the list are one
// script call each over keys of one slot (the {cancel} hash tag): no
// CROSSSLOT refusal, the same listing.
func TestListOnCluster(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t, 3, 0)
	reg := func(name string) *cancels.Registry {
		rc, err := redisx.New(redisx.Options{Addrs: cl.Addrs(), Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(rc.Close)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := rc.Connect(ctx); err != nil {
			t.Fatal(err)
		}
		return newRegistry(t, rc, name)
	}
	a, b := reg("gw-a"), reg("gw-b")
	k := a.Add([]byte("req-1"), "acme", noop, cancels.Info{Model: "m", Started: time.Now()})
	eventually(t, b, []string{"gw-a/acme/req-1/m/false"})
	a.Remove(k)
	eventually(t, b, nil)
	// A CROSSSLOT refusal would have turned the poller to per-key
	// commands.
	if s := a.Stats(); s.FallbackPolls != 0 {
		t.Errorf("poll stats %+v: want every poll one script call", s)
	}
}
