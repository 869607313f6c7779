package cancels

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/redisx"
	"github.com/tollgate/tollgate/gateway/internal/testkit/redistest"
)

// TestListWithoutScripts: where Redis refuses scripts, the per-command
// poll and list give the same listing.
func TestListWithoutScripts(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	reg := func(name string) *Registry {
		rc, err := redisx.New(redisx.Options{Addrs: []string{srv.Addr()}, Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(rc.Close)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := rc.Connect(ctx); err != nil {
			t.Fatal(err)
		}
		r := New(slog.New(slog.DiscardHandler), rc, 20*time.Millisecond, name)
		r.scriptRefused.Store(true)
		t.Cleanup(r.Close)
		return r
	}
	a, b := reg("gw-a"), reg("gw-b")
	k := a.Add([]byte("r1"), "acme", func(error) {}, Info{Model: "m", Started: time.Now()})
	wait := func(want []string) {
		t.Helper()
		var got []string
		for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
			reqs, err := b.List(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			got = nil
			for _, q := range reqs {
				got = append(got, q.Replica+"/"+q.ID)
			}
			if slices.Equal(got, want) {
				return
			}
		}
		t.Fatalf("b lists %q, want %q", got, want)
	}
	wait([]string{"gw-a/r1"})
	a.Remove(k)
	wait(nil)
	if a.Stats().FallbackPolls == 0 {
		t.Error("no fallback poll counted")
	}
}
