package wasmhost

import (
	"context"
	"errors"
	"testing"
	"time"
)

// poolPlugin loads the test plugin with the given pool cap and wait.
func poolPlugin(t *testing.T, instances int, wait time.Duration) *Plugin {
	t.Helper()
	spec := Spec{Name: "p", Module: testPlugin(t), Config: []byte(`{"chunk":"replace_upper"}`),
		Instances: instances, PoolWait: wait, Deadline: time.Second}
	pl, err := NewPipeline(context.Background(), testHost(t), []Spec{spec})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pl.Close)
	return pl.Plugins()[0]
}

func mustGet(t *testing.T, p *Plugin) *instance {
	t.Helper()
	inst, err := p.get()
	if err != nil {
		t.Fatal(err)
	}
	return inst
}

// The instance put back last is the next one out: after a burst, light
// load keeps using one (cache-warm) instance instead of rotating through
// all of them.
func TestPoolReusesTheLastReturned(t *testing.T) {
	p := poolPlugin(t, 3, time.Second)
	a, b, c := mustGet(t, p), mustGet(t, p), mustGet(t, p)
	if a == b || b == c || a == c {
		t.Fatal("one instance handed out twice")
	}
	p.put(a)
	p.put(b)
	p.put(c)
	for range 5 {
		got := mustGet(t, p)
		if got != c {
			t.Fatal("get did not return the instance put back last")
		}
		p.put(got)
	}
	x, y := mustGet(t, p), mustGet(t, p)
	if x != c || y != b {
		t.Fatal("the second get did not return the instance put back before the last")
	}
	p.put(y)
	p.put(x)
	if n := p.Stats().InstancesCreated.Load(); n != 3 {
		t.Fatalf("%d instances created, want 3", n)
	}
}

// A caller waiting for a busy pool is served in turn, and a wait that runs
// out leaves nothing behind.
func TestPoolWaitersServedInOrder(t *testing.T) {
	p := poolPlugin(t, 1, 5*time.Second)
	held := mustGet(t, p)
	type served struct {
		waiter int
		inst   *instance
	}
	got := make(chan served, 2)
	for i := range 2 {
		go func() {
			inst, err := p.get()
			if err != nil {
				t.Error(err)
			}
			got <- served{i, inst}
		}()
		waitFor(t, func() bool { p.mu.Lock(); defer p.mu.Unlock(); return len(p.waiters) == i+1 })
	}
	p.put(held)
	first := <-got
	if first.waiter != 0 || first.inst != held {
		t.Fatalf("waiter %d served first, want 0 (with the instance put back)", first.waiter)
	}
	p.put(first.inst)
	if second := <-got; second.waiter != 1 || second.inst != held {
		t.Fatal("the second waiter was not served next")
	}
	if p.Stats().PoolWaits.Load() != 2 || p.Stats().InstancesCreated.Load() != 1 {
		t.Fatalf("waits %d, instances %d", p.Stats().PoolWaits.Load(), p.Stats().InstancesCreated.Load())
	}
}

func TestPoolWaitTimesOut(t *testing.T) {
	p := poolPlugin(t, 1, 50*time.Millisecond)
	held := mustGet(t, p)
	start := time.Now()
	_, err := p.get()
	if !errors.Is(err, ErrPluginFailed) || time.Since(start) < 50*time.Millisecond {
		t.Fatalf("err %v after %s", err, time.Since(start))
	}
	p.mu.Lock()
	left := len(p.waiters)
	p.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d waiters left after the timeout", left)
	}
	p.put(held)
	if mustGet(t, p) != held {
		t.Fatal("the instance put back after the timeout is lost")
	}
}

// A discarded instance frees its slot for a waiter at once: the waiter
// creates a new instance instead of waiting out PoolWait.
func TestPoolDiscardServesAWaiter(t *testing.T) {
	p := poolPlugin(t, 1, 10*time.Second)
	held := mustGet(t, p)
	done := make(chan error, 1)
	go func() {
		inst, err := p.get()
		if err == nil && inst == held {
			err = errors.New("got the discarded instance")
		}
		if err == nil {
			p.put(inst)
		}
		done <- err
	}()
	waitFor(t, func() bool { p.mu.Lock(); defer p.mu.Unlock(); return len(p.waiters) == 1 })
	held.close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter was not served when the busy instance was discarded")
	}
	p.mu.Lock()
	count := p.count
	p.mu.Unlock()
	if count != 1 || p.Stats().InstancesCreated.Load() != 2 {
		t.Fatalf("count %d, created %d; want 1 alive of 2 created", count, p.Stats().InstancesCreated.Load())
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached within 5s")
		}
		time.Sleep(time.Millisecond)
	}
}
