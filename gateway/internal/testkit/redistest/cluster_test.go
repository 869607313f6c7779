package redistest

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestCluster: a three-master cluster with a replica each starts with the
// slots split, a slot moves with its keys, a graceful failover keeps what
// was written, and a killed master's replica takes over.
func TestCluster(t *testing.T) {
	t.Parallel()
	start := time.Now()
	c := StartCluster(t, 3, 1)
	t.Logf("started in %v", time.Since(start))
	if n := len(c.Nodes()); n != 6 {
		t.Fatalf("%d nodes, want 6", n)
	}
	masters := c.Masters()
	if len(masters) != 3 {
		t.Fatalf("%d masters, want 3", len(masters))
	}
	for i, slot := range []int{0, 5461, 16383} {
		o, err := c.Owner(slot)
		if err != nil || o != c.Nodes()[i] {
			t.Fatalf("slot %d: owner %v, %v; want node %d", slot, o, err, i)
		}
		if r := c.ReplicasOf(o); len(r) != 1 {
			t.Fatalf("master %d has %d replicas, want 1", i, len(r))
		}
	}

	slot, err := c.Slot("{acme}")
	if err != nil {
		t.Fatal(err)
	}
	from, err := c.Owner(slot)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		if _, err := from.Do("SET", "{acme}:"+strconv.Itoa(i), strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
	}
	to := masters[0]
	if to == from {
		to = masters[1]
	}
	steps := 0
	moveStart := time.Now()
	if err := c.MoveSlot(slot, to, func() {
		steps++
		// Mid-migration: the old owner redirects a missing key with ASK.
		if steps == 1 {
			_, err := from.Do("GET", "{acme}:nonexistent")
			if err == nil || !strings.Contains(err.Error(), "ASK") {
				t.Errorf("GET of a missing key mid-migration: %v, want ASK", err)
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("moved slot %d (5 keys) in %v", slot, time.Since(moveStart))
	if steps != 5 {
		t.Fatalf("%d keys migrated, want 5", steps)
	}
	if o, err := c.Owner(slot); err != nil || o != to {
		t.Fatalf("slot %d owner after the move: %v, %v", slot, o, err)
	}
	if v, err := to.Do("GET", "{acme}:3"); err != nil || v != "3" {
		t.Fatalf("key on the new owner: %q, %v", v, err)
	}
	if _, err := from.Do("GET", "{acme}:3"); err == nil || !strings.Contains(err.Error(), "MOVED") {
		t.Fatalf("the old owner answered %v, want MOVED", err)
	}

	foStart := time.Now()
	promoted, err := c.Failover(to)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("graceful failover in %v", time.Since(foStart))
	if o, err := c.Owner(slot); err != nil || o != promoted {
		t.Fatalf("slot %d owner after failover: %v, %v; want the promoted replica", slot, o, err)
	}
	if v, err := promoted.Do("GET", "{acme}:4"); err != nil || v != "4" {
		t.Fatalf("key after failover: %q, %v", v, err)
	}

	if _, err := promoted.Do("SET", "{acme}:k", "v"); err != nil {
		t.Fatal(err)
	}
	if _, err := promoted.Do("WAIT", "1", "1000"); err != nil {
		t.Fatal(err)
	}
	elected, took, err := c.KillMaster(promoted)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("killed master replaced in %v", took)
	if elected == promoted {
		t.Fatal("the killed master is still the master")
	}
	if v, err := elected.Do("GET", "{acme}:k"); err != nil || v != "v" {
		t.Fatalf("a replicated key after the kill: %q, %v", v, err)
	}
}
