// Package redisxtest opens redisx clients for tests: created, connected
// (within 10 s) and closed when the test ends. (redisx's own tests cannot
// use it: they are in package redisx.)
package redisxtest

import (
	"context"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/redisx"
)

// Connect returns a client made with opts and connected; it fails the test
// otherwise, and closes the client in t's cleanup.
func Connect(t testing.TB, opts redisx.Options) *redisx.Client {
	t.Helper()
	c, err := redisx.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	return c
}
