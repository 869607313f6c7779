// Package fleet counts the gateway replicas that share a Redis: every
// gateway process with a Redis registers itself under a random instance
// id and refreshes its registration on an interval (a heartbeat); each
// heartbeat also drops the registrations not refreshed in time and
// returns how many remain. The rate limiter divides its limits by that
// count when it has to decide without Redis (on_redis_error: fail_open),
// so that the fleet as a whole stays near a limit however many replicas
// the autoscaler runs (docs/adr/0024-live-replica-count.md).
//
// # Redis layout
//
// The whole fleet is one sorted set, so it lives in one Redis Cluster
// slot and one function call reads and writes it atomically:
//
//	tollgate:fleet   member: instance id, score: its deadline, ms of the
//	                 Redis server's clock (TIME)
//
// A heartbeat is one FCALL of a Redis function (Redis ≥ 7) that reads the
// server's clock, removes every member whose deadline has passed, sets
// its own deadline to now + stale, sets the key to expire when the
// latest deadline passes, and returns the number of members. Deadlines
// are on the server's clock, so replicas whose clocks disagree still
// agree on who is stale. A graceful stop removes the member (one more
// FCALL); a crashed replica is dropped by the first heartbeat of another
// replica after its deadline.
//
// # Off the request path
//
// The heartbeats run in one goroutine per process. Live reads an atomic:
// the count of the last heartbeat that succeeded. While Redis cannot be
// reached the heartbeats fail and the count stays what it was when Redis
// was last reached — frozen through an outage, which is when the rate
// limiter reads it.
package fleet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/tollgate/tollgate/gateway/internal/redisx"
)

// Defaults of Options.
const (
	DefaultKey      = "tollgate:fleet"
	DefaultInterval = time.Second
	// DefaultStaleAfter is how many intervals a registration outlives
	// its last refresh.
	DefaultStaleAfter = 3
)

// Options configure a Heartbeat. The zero value is usable.
type Options struct {
	// Key is the sorted set of the fleet (default DefaultKey). Gateways
	// count each other only if they share it.
	Key string
	// Interval is the time between heartbeats (default 1 s).
	Interval time.Duration
	// Stale is how long a registration lasts after its refresh (default
	// DefaultStaleAfter × Interval). It must exceed Interval.
	Stale time.Duration
	// ID is the instance id (default: the host name and 8 random bytes
	// in hex). Two processes must not share one.
	ID string
	// Logger receives the heartbeat's state changes (default
	// slog.Default()).
	Logger *slog.Logger
}

// Heartbeat keeps one gateway process registered in its fleet. Safe for
// concurrent use.
type Heartbeat struct {
	c        *redisx.Client
	key, id  string
	interval time.Duration
	stale    string // ms, as the function's argument
	log      *slog.Logger

	live     atomic.Int64 // the last count seen; 0: none yet
	beats    atomic.Int64 // heartbeats that succeeded
	failures atomic.Int64 // heartbeats that failed

	stopOnce sync.Once
	stop     chan struct{}
	done     chan struct{}
}

// library holds the fleet's functions. beat(K, A): K[1] the fleet, A[1]
// the instance id, A[2] how long its registration lasts (ms, > 0); A[2]
// '0' removes it instead. Both return the number of members left.
// Numbers below 2^53 go to redis.call exactly (Redis formats a Lua
// number with %.17g).
var library = redisx.NewLibrary("tollgate_fleet", `
local function beat(K, A)
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('ZREMRANGEBYSCORE', K[1], '-inf', now)
  local ttl = tonumber(A[2])
  if ttl and ttl > 0 then
    redis.call('ZADD', K[1], now + ttl, A[1])
  else
    redis.call('ZREM', K[1], A[1])
  end
  local last = redis.call('ZRANGE', K[1], -1, -1, 'WITHSCORES')
  if #last == 2 then
    redis.call('PEXPIRE', K[1], math.max(tonumber(last[2]) - now, 1))
  end
  return redis.call('ZCARD', K[1])
end

register('fleet_beat', beat)
`)

var beatFn = library.Function("fleet_beat")

// Start registers this process in c's fleet and keeps it registered in a
// goroutine of its own until Stop. The first heartbeat is sent at once;
// Live is 0 until one succeeds.
func Start(c *redisx.Client, opts Options) (*Heartbeat, error) {
	if c == nil {
		return nil, errors.New("fleet: no Redis client")
	}
	if opts.Key == "" {
		opts.Key = DefaultKey
	}
	if opts.Interval <= 0 {
		opts.Interval = DefaultInterval
	}
	if opts.Stale == 0 {
		opts.Stale = DefaultStaleAfter * opts.Interval
	}
	if opts.Stale <= opts.Interval {
		return nil, fmt.Errorf("fleet: stale (%s) must exceed the interval (%s)", opts.Stale, opts.Interval)
	}
	if opts.ID == "" {
		opts.ID = NewID()
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	h := &Heartbeat{
		c: c, key: opts.Key, id: opts.ID, interval: opts.Interval,
		stale: strconv.FormatInt(max(opts.Stale.Milliseconds(), 1), 10),
		log:   opts.Logger, stop: make(chan struct{}), done: make(chan struct{}),
	}
	go h.run()
	return h, nil
}

// NewID returns a fresh instance id: the host name (for an operator
// reading the set) and 8 random bytes.
func NewID() string {
	var b [8]byte
	rand.Read(b[:])
	host, _ := os.Hostname()
	host = strings.Map(func(r rune) rune {
		if r <= ' ' || r == 0x7f {
			return -1
		}
		return r
	}, host)
	if host == "" {
		host = "gateway"
	}
	return host + "-" + hex.EncodeToString(b[:])
}

// ID is the instance id.
func (h *Heartbeat) ID() string { return h.id }

// Live is the number of replicas in the fleet (this one included) at the
// last heartbeat that reached Redis; 0 if none has. It reads an atomic.
func (h *Heartbeat) Live() int { return int(h.live.Load()) }

// Stats are the heartbeat's counters.
type Stats struct {
	Live     int64 // as Live
	Beats    int64 // heartbeats that reached Redis
	Failures int64 // heartbeats that did not
}

// Stats returns the counters.
func (h *Heartbeat) Stats() Stats {
	return Stats{Live: h.live.Load(), Beats: h.beats.Load(), Failures: h.failures.Load()}
}

func (h *Heartbeat) run() {
	defer close(h.done)
	t := time.NewTicker(h.interval)
	defer t.Stop()
	failing := false
	for {
		_, err := h.Beat(context.Background())
		switch {
		case err != nil && !failing:
			failing = true
			h.log.Warn("fleet heartbeat failed; the replica count stays at its last value until Redis answers",
				"live", h.live.Load(), "err", err)
		case err == nil && failing:
			failing = false
			h.log.Info("fleet heartbeat answered again", "live", h.live.Load())
		}
		select {
		case <-h.stop:
			return
		case <-t.C:
		}
	}
}

// Beat sends one heartbeat now and returns the fleet's size. A failed
// one leaves Live as it was. The loop calls it; tests may too.
func (h *Heartbeat) Beat(ctx context.Context) (int, error) {
	n, err := h.call(ctx, h.stale)
	if err != nil {
		h.failures.Add(1)
		return 0, err
	}
	h.beats.Add(1)
	h.live.Store(n)
	return int(n), nil
}

func (h *Heartbeat) call(ctx context.Context, ttl string) (int64, error) {
	n, err := h.c.FCall(ctx, beatFn, []string{h.key}, []string{h.id, ttl}).AsInt64()
	if err != nil {
		return 0, fmt.Errorf("fleet heartbeat: %w", err)
	}
	return n, nil
}

// Stop ends the heartbeats and removes this process from the fleet (one
// call within ctx and the Redis command timeout). When Redis cannot be
// reached the registration stays until it is stale, and the error says
// so. Stop is idempotent; only its first call removes.
func (h *Heartbeat) Stop(ctx context.Context) error {
	var err error
	h.stopOnce.Do(func() {
		close(h.stop)
		<-h.done
		if _, err = h.call(ctx, "0"); err != nil {
			err = fmt.Errorf("leaving the fleet (the registration lapses on its own): %w", err)
		}
	})
	return err
}

// Members lists the fleet's members, for tests and operators: instance id to
// deadline (ms of the server clock).
func Members(ctx context.Context, c *redisx.Client, key string) (map[string]int64, error) {
	if key == "" {
		key = DefaultKey
	}
	res, err := c.Do(ctx, func(b rueidis.Builder) rueidis.Completed {
		return b.Zrange().Key(key).Min("0").Max("-1").Withscores().Build()
	}).AsZScores()
	if err != nil {
		return nil, err
	}
	out := make(map[string]int64, len(res))
	for _, z := range res {
		out[z.Member] = int64(z.Score)
	}
	return out, nil
}
