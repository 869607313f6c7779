package limiter

import (
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/testkit/redistest"
)

// TestRedisCluster runs the limiter against a one-node Redis Cluster that
// owns all 16384 slots: rueidis talks cluster protocol to it, and Redis
// refuses a script whose keys are in more than one slot (CROSSSLOT).
//
// A cluster master accepts writes 2s after it starts, so this test runs in
// parallel with the others that do not measure time.
func TestRedisCluster(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, "--cluster-enabled", "yes")
	do(t, srv, "CLUSTER", "ADDSLOTSRANGE", "0", "16383")
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(do(t, srv, "CLUSTER", "INFO"), "cluster_state:ok") {
		if time.Now().After(deadline) {
			t.Fatal("the one-node cluster did not become ok")
		}
		time.Sleep(20 * time.Millisecond)
	}
	l := NewRedis(newRedisClient(t, srv, time.Second), RedisOptions{})
	limits := []Limit{{Key: "t", RPM: 2, TPM: 100}, {Key: "k:key-1", RPM: 5}, {Key: "m:key-1:gpt-4o", TPM: 1000}}
	for _, tenant := range []string{"acme", "{acme}", "a}b{c", "#x"} {
		r := &Request{Tenant: tenant, Limits: limits, Tokens: 10}
		for i, want := range []bool{true, true, false} {
			d := admitOK(t, l, r)
			if d.Allowed != want || d.Fallback {
				t.Fatalf("tenant %q, request %d: %+v, want allowed=%v", tenant, i, d, want)
			}
		}
	}
	// The script really does refuse keys of two slots here.
	if _, err := srv.Do("EVAL", "return 1", "2", "{a}x", "{b}x"); err == nil || !strings.Contains(err.Error(), "CROSSSLOT") {
		t.Fatalf("EVAL over two slots: %v, want CROSSSLOT", err)
	}
}
