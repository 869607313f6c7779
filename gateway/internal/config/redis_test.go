package config

import (
	"strings"
	"testing"
	"time"
)

// TestRedisPipelining: redis.flush_delay and redis.connections default to
// 0 (no delay; one connection); values out of range are refused with the
// key named.
func TestRedisPipelining(t *testing.T) {
	p, err := Parse([]byte(valid+"redis: {addrs: [\"r:6379\"]}\n"), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if p.Redis.FlushDelay != 0 || p.Redis.Connections != 0 {
		t.Fatalf("defaults: flush_delay %v, connections %d", p.Redis.FlushDelay, p.Redis.Connections)
	}
	p, err = Parse([]byte(valid+"redis: {addrs: [\"r:6379\"], flush_delay: 100us, connections: 4}\n"), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if p.Redis.FlushDelay != 100*time.Microsecond || p.Redis.Connections != 4 {
		t.Fatalf("set: flush_delay %v, connections %d", p.Redis.FlushDelay, p.Redis.Connections)
	}
	if _, err = Parse([]byte(valid+"redis: {addrs: [\"r:6379\"], flush_delay: 1ms, connections: 256}\n"), env(nil)); err != nil {
		t.Fatal(err)
	}
	for yaml, want := range map[string]string{
		"flush_delay: -1us": "redis.flush_delay: must be between 0s (none, the default) and 2ms, got -1µs",
		"flush_delay: 3ms":  "redis.flush_delay: must be between 0s (none, the default) and 2ms, got 3ms",
		"connections: 3":    "redis.connections: must be a power of two from 1 to 256 (0: the default, 1), got 3",
		"connections: 512":  "redis.connections: must be a power of two from 1 to 256",
		"connections: -1":   "redis.connections: must be a power of two",
	} {
		_, err := Parse([]byte(valid+"redis: {addrs: [\"r:6379\"], "+yaml+"}\n"), env(nil))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want %q", yaml, err, want)
		}
	}
}
