package redisx

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/tollgate/tollgate/gateway/internal/testkit/redistest"
)

var incr = rueidis.NewLuaScript(`return redis.call('INCRBY', KEYS[1], ARGV[1])`)

func TestExecCountsAndSurvivesRestart(t *testing.T) {
	srv := redistest.Start(t)
	c := connected(t, srv)
	ctx := context.Background()
	n, err := c.Exec(ctx, incr, []string{"k"}, []string{"2"}).AsInt64()
	if err != nil || n != 2 {
		t.Fatalf("first exec = %d, %v", n, err)
	}
	before := c.Commands()
	if n, err = c.Exec(ctx, incr, []string{"k"}, []string{"3"}).AsInt64(); err != nil || n != 5 {
		t.Fatalf("second exec = %d, %v", n, err)
	}
	if d := c.Commands() - before; d != 1 {
		t.Fatalf("a warm script call sent %d commands, want 1", d)
	}

	// Redis dies: calls fail fast with an unavailable error, then work again
	// once it is back (scripts are reloaded after NOSCRIPT).
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = c.Exec(ctx, incr, []string{"k"}, []string{"1"}).Error()
	if err == nil || !IsUnavailable(err) {
		t.Fatalf("exec with Redis down: %v, want an unavailable error", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("exec with Redis down took %v", d)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err = c.Exec(ctx, incr, []string{"k"}, []string{"7"}).AsInt64()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no recovery after restart: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n != 7 {
		t.Fatalf("after restart = %d, want 7 (a fresh server)", n)
	}
}

func TestStartsWhileRedisIsDown(t *testing.T) {
	srv := redistest.Start(t)
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	c, err := New(Options{Addrs: []string{srv.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Exec(context.Background(), incr, []string{"k"}, []string{"1"}).Error(); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("exec before any connection: %v, want ErrUnavailable", err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	if err := c.Connect(ctxTimeout(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := c.Exec(context.Background(), incr, []string{"k"}, []string{"1"}).Error(); err != nil {
		t.Fatal(err)
	}
}

func TestBadAddress(t *testing.T) {
	if _, err := New(Options{Addrs: []string{"localhost"}}); err == nil {
		t.Fatal("an address without a port was accepted")
	}
}

func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// connected is a client of srv, connected, closed when t ends. Its command
// timeout is 500 ms, not the default 100 ms: these tests count commands and
// replies, not time, and on a loaded 2-core machine a reply can take more
// than 100 ms.
func connected(t *testing.T, srv *redistest.Server) *Client {
	t.Helper()
	c, err := New(Options{Addrs: []string{srv.Addr()}, Timeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if err := c.Connect(ctxTimeout(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	return c
}
