package limiter

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/redisx"
	"github.com/tollgate/tollgate/gateway/internal/redisx/redisxtest"
	"github.com/tollgate/tollgate/gateway/internal/testkit/redistest"
)

// newRedisClient connects a client to srv (timeout 0: redisx's default).
func newRedisClient(t testing.TB, srv *redistest.Server, timeout time.Duration) *redisx.Client {
	t.Helper()
	return redisxtest.Connect(t, redisx.Options{
		Addrs:   []string{srv.Addr()},
		Timeout: timeout,
		Logger:  slog.New(slog.DiscardHandler),
	})
}

// do runs a command on srv and fails the test on an error.
func do(t testing.TB, srv *redistest.Server, args ...string) string {
	t.Helper()
	s, err := srv.Do(args...)
	if err != nil {
		t.Fatalf("redis %v: %v", args, err)
	}
	return s
}

// scriptCalls is how many EVALSHA and EVAL commands srv received since the
// last CONFIG RESETSTAT (failed ones, such as a NOSCRIPT, included).
func scriptCalls(t testing.TB, srv *redistest.Server) (evalsha, eval int64) {
	t.Helper()
	stats := do(t, srv, "INFO", "commandstats")
	calls := func(cmd string) int64 {
		for line := range strings.Lines(stats) {
			rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+cmd+":")
			if !ok {
				continue
			}
			var n int64
			for field := range strings.SplitSeq(rest, ",") {
				k, v, _ := strings.Cut(field, "=")
				if k == "calls" || k == "rejected_calls" {
					i, err := strconv.ParseInt(v, 10, 64)
					if err != nil {
						t.Fatalf("commandstats line %q: %v", line, err)
					}
					n += i
				}
			}
			return n
		}
		return 0
	}
	return calls("evalsha"), calls("eval")
}

// within reports whether got is in (want − slack, want]: a duration
// measured by the Redis clock, which moves on between calls.
func within(got, want time.Duration) bool {
	const slack = time.Second
	return got <= want && got > want-slack
}

func admitOK(t testing.TB, l Limiter, r *Request) Decision {
	t.Helper()
	d, err := l.Admit(context.Background(), r)
	if err != nil {
		t.Fatalf("Admit(%+v): %v", r, err)
	}
	return d
}

func TestRedisGCRA(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	l := NewRedis(newRedisClient(t, srv, time.Second), RedisOptions{})
	r := &Request{Tenant: "acme", Limits: []Limit{{Key: "t", RPM: 3}}}
	for i, want := range []int64{2, 1, 0} {
		d := admitOK(t, l, r)
		reset := time.Duration(i+1) * 20 * time.Second
		if !d.Allowed || d.LimitRequests != 3 || d.RemainingRequests != want || !within(d.ResetRequests, reset) || d.Fallback {
			t.Fatalf("request %d: %+v, want allowed with %d remaining, reset ≈%v", i, d, want, reset)
		}
	}
	d := admitOK(t, l, r)
	if d.Allowed || d.RemainingRequests != 0 || !within(d.RetryAfter, 20*time.Second) || !within(d.ResetRequests, time.Minute) {
		t.Fatalf("request 3: %+v, want a rejection with RetryAfter ≈20s", d)
	}

	// Several limits: a rejection by one charges none.
	multi := &Request{Tenant: "acme", Limits: []Limit{{Key: "k:1", RPM: 10}, {Key: "m:1:gpt", TPM: 100}}, Tokens: 80}
	if d := admitOK(t, l, multi); !d.Allowed || d.RemainingRequests != 9 || d.RemainingTokens != 20 {
		t.Fatalf("first multi: %+v", d)
	}
	multi.Tokens = 30
	if d := admitOK(t, l, multi); d.Allowed || d.RemainingRequests != 9 || d.RemainingTokens != 20 || !within(d.RetryAfter, 6*time.Second) {
		t.Fatalf("second multi: %+v, want rejected by tokens with RetryAfter ≈6s, nothing charged", d)
	}
	multi.Tokens = 20
	if d := admitOK(t, l, multi); !d.Allowed || d.RemainingRequests != 8 || d.RemainingTokens != 0 {
		t.Fatalf("third multi: %+v, want 8 requests and 0 tokens remaining", d)
	}
	if s := l.Stats(); s != (Stats{Admitted: 5, Rejected: 2}) {
		t.Fatalf("stats %+v", s)
	}
}

func TestRedisKeyLayout(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := newRedisClient(t, srv, time.Second)
	limits := []Limit{{Key: "t", RPM: 60}, {Key: "k:key-1", TPM: 1000}, {Key: "m:key-1:gpt-4o", RPM: 10, TPM: 100}, {Key: "off"}}
	admitOK(t, NewRedis(c, RedisOptions{}), &Request{Tenant: "acme", Limits: limits, Tokens: 10})
	admitOK(t, NewRedis(c, RedisOptions{Prefix: "x:"}), &Request{Tenant: "a{b}", Limits: limits[:1]})
	got := strings.Split(do(t, srv, "KEYS", "*"), "\n")
	have := map[string]bool{}
	for _, k := range got {
		have[k] = true
	}
	want := []string{
		"tollgate:rl:{acme}:t:r",
		"tollgate:rl:{acme}:k:key-1:t",
		"tollgate:rl:{acme}:m:key-1:gpt-4o:r",
		"tollgate:rl:{acme}:m:key-1:gpt-4o:t",
		"x:{#" + sha256Hex("a{b}") + "}:t:r",
	}
	if len(got) != len(want) {
		t.Fatalf("keys %q, want %q", got, want)
	}
	for _, k := range want {
		if !have[k] {
			t.Fatalf("keys %q, want %q", got, want)
		}
	}
	// A cell expires a second after its TAT: 1s of requests, 10 tokens of
	// 1000 TPM is 600ms.
	for key, max := range map[string]int64{"tollgate:rl:{acme}:t:r": 2000, "tollgate:rl:{acme}:k:key-1:t": 1600} {
		ttl, err := strconv.ParseInt(do(t, srv, "PTTL", key), 10, 64)
		if err != nil || ttl <= max-500 || ttl > max {
			t.Fatalf("PTTL %s = %d, %v; want in (%d, %d]", key, ttl, err, max-500, max)
		}
	}
}

func TestRedisReplicasShareExactLimit(t *testing.T) {
	srv := redistest.Start(t)
	replicas := []*Redis{
		NewRedis(newRedisClient(t, srv, time.Second), RedisOptions{}),
		NewRedis(newRedisClient(t, srv, time.Second), RedisOptions{}),
	}
	for i, l := range replicas { // load the script
		admitOK(t, l, &Request{Tenant: "warm" + strconv.Itoa(i), Limits: []Limit{{Key: "t", RPM: 1}}})
	}
	r := Request{Tenant: "acme", Limits: []Limit{{Key: "t", RPM: 100}, {Key: "k:1", RPM: 450}}}
	var allowed, rejected, next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for g := range 64 {
		l := replicas[g%2]
		wg.Go(func() {
			for next.Add(1) <= 500 {
				d, err := l.Admit(context.Background(), &r)
				if err != nil {
					t.Error(err)
					return
				}
				if d.Allowed {
					allowed.Add(1)
				} else {
					rejected.Add(1)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	t.Logf("500 admissions took %v", elapsed)
	const T = 600 * time.Millisecond // a request of 100 RPM
	if elapsed < T {
		if allowed.Load() != 100 || rejected.Load() != 400 {
			t.Fatalf("allowed %d, rejected %d in %v; want exactly 100, 400", allowed.Load(), rejected.Load(), elapsed)
		}
	} else {
		// Too slow a machine for exactness: each T since the first
		// admission may have let one more in.
		t.Logf("the run took %v, more than T", elapsed)
		if n := allowed.Load(); n < 100 || n > 100+int64(elapsed/T) || n+rejected.Load() != 500 {
			t.Fatalf("allowed %d, rejected %d in %v; want 100 to %d allowed", n, rejected.Load(), elapsed, 100+elapsed/T)
		}
	}
	s0, s1 := replicas[0].Stats(), replicas[1].Stats()
	if s0.Admitted+s1.Admitted != allowed.Load()+2 || s0.Rejected+s1.Rejected != rejected.Load() || s0.Fallbacks+s1.Fallbacks != 0 {
		t.Fatalf("stats %+v, %+v", s0, s1)
	}
	// k:1 was charged for the admitted requests only (had the 400
	// rejections charged it, it would be empty); it refills one every
	// T1 since the run started.
	d := admitOK(t, replicas[0], &Request{Tenant: "acme", Limits: []Limit{{Key: "k:1", RPM: 450}}})
	const T1 = 133334 * time.Microsecond // ⌈60s/450⌉
	least := 450 - allowed.Load() - 1
	if most := least + int64(time.Since(start)/T1); d.RemainingRequests < least || d.RemainingRequests > most {
		t.Fatalf("k:1 remaining %d, want %d to %d", d.RemainingRequests, least, most)
	}
}

func TestRedisAdjust(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	l := NewRedis(newRedisClient(t, srv, time.Second), RedisOptions{})
	ctx := context.Background()
	limits := []Limit{{Key: "k:1", RPM: 100, TPM: 600}} // a token is 100ms
	const key = "tollgate:rl:{acme}:k:1:t"
	admit := func(tokens int64) Decision {
		return admitOK(t, l, &Request{Tenant: "acme", Limits: limits, Tokens: tokens})
	}
	adjust := func(delta int64) {
		if err := l.Adjust(ctx, "acme", limits, delta, FailClosed, 0); err != nil {
			t.Fatalf("Adjust(%d): %v", delta, err)
		}
	}
	if d := admit(600); !d.Allowed || d.RemainingTokens != 0 || !within(d.ResetTokens, time.Minute) {
		t.Fatalf("600 tokens: %+v", d)
	}
	if d := admit(100); d.Allowed || !within(d.RetryAfter, 10*time.Second) {
		t.Fatalf("100 more tokens: %+v, want a rejection with RetryAfter ≈10s", d)
	}
	adjust(-300) // the request used 300 fewer than estimated
	if d := admit(100); !d.Allowed || d.RemainingTokens < 200 || d.RemainingTokens > 201 || d.RemainingRequests != 98 {
		t.Fatalf("after giving back 300: %+v, want allowed with 200 tokens left", d)
	}
	adjust(600) // the request used 600 more than estimated: debt
	d := admit(0)
	if d.Allowed || d.RemainingTokens != 0 || !within(d.ResetTokens, 100*time.Second) || !within(d.RetryAfter, 40*time.Second) {
		t.Fatalf("in debt: %+v, want a rejection with RetryAfter ≈40s and ResetTokens ≈100s", d)
	}
	ttl, err := strconv.ParseInt(do(t, srv, "PTTL", key), 10, 64)
	if err != nil || ttl <= 100_000 || ttl > 101_000 {
		t.Fatalf("PTTL of the token cell in debt = %d, %v; want ≈101s", ttl, err)
	}
	adjust(-1 << 40) // everything back: a full cell is no key
	if n := do(t, srv, "EXISTS", key); n != "0" {
		t.Fatalf("EXISTS %s = %s after giving back everything, want 0", key, n)
	}
	if d := admit(600); !d.Allowed {
		t.Fatalf("600 tokens after giving back everything: %+v", d)
	}
	if s := l.Stats(); s != (Stats{Admitted: 3, Rejected: 2}) {
		t.Fatalf("stats %+v", s)
	}
}

func TestRedisCommandCount(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := newRedisClient(t, srv, time.Second)
	l := NewRedis(c, RedisOptions{})
	ctx := context.Background()
	limits := []Limit{{Key: "t", RPM: 1000}, {Key: "k:1", RPM: 100, TPM: 100_000}, {Key: "m:1:gpt", TPM: 10_000}}
	r := &Request{Tenant: "acme", Limits: limits, Tokens: 10}
	admitOK(t, l, r) // loads the admit script
	if err := l.Adjust(ctx, "acme", limits, -1, FailClosed, 0); err != nil {
		t.Fatal(err) // loads the adjust script
	}

	tests := []struct {
		name    string
		call    func() error
		evalsha int64 // commands received by Redis, and sent by the client
	}{
		{"warm admit", func() error { _, err := l.Admit(ctx, r); return err }, 1},
		{"adjust", func() error { return l.Adjust(ctx, "acme", limits, 5, FailClosed, 0) }, 1},
		{"adjust by 0", func() error { return l.Adjust(ctx, "acme", limits, 0, FailClosed, 0) }, 0},
		{"adjust without TPM", func() error { return l.Adjust(ctx, "acme", limits[:1], 5, FailClosed, 0) }, 0},
		{"admit without any rate", func() error {
			_, err := l.Admit(ctx, &Request{Tenant: "acme", Limits: []Limit{{Key: "off"}}})
			return err
		}, 0},
		{"invalid admit", func() error {
			_, err := l.Admit(ctx, &Request{Tenant: "", Limits: limits})
			if !errors.Is(err, ErrInvalid) {
				return errors.New("no ErrInvalid")
			}
			return nil
		}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			do(t, srv, "CONFIG", "RESETSTAT")
			before := c.Commands()
			if err := tt.call(); err != nil {
				t.Fatal(err)
			}
			evalsha, eval := scriptCalls(t, srv)
			if evalsha != tt.evalsha || eval != 0 {
				t.Fatalf("Redis received %d EVALSHA and %d EVAL, want %d and 0", evalsha, eval, tt.evalsha)
			}
			if sent := c.Commands() - before; sent != tt.evalsha {
				t.Fatalf("the client sent %d commands, want %d", sent, tt.evalsha)
			}
		})
	}
}

func TestRedisNoScript(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := newRedisClient(t, srv, time.Second)
	l := NewRedis(c, RedisOptions{})
	r := &Request{Tenant: "acme", Limits: []Limit{{Key: "t", RPM: 10}}}
	admitOK(t, l, r)
	do(t, srv, "SCRIPT", "FLUSH")
	do(t, srv, "CONFIG", "RESETSTAT")
	before := c.Commands()
	if d := admitOK(t, l, r); !d.Allowed || d.RemainingRequests != 8 {
		t.Fatalf("after SCRIPT FLUSH: %+v, want allowed with 8 remaining", d)
	}
	if evalsha, eval := scriptCalls(t, srv); evalsha != 1 || eval != 1 {
		t.Fatalf("after SCRIPT FLUSH Redis received %d EVALSHA and %d EVAL, want 1 and 1", evalsha, eval)
	}
	if sent := c.Commands() - before; sent != 2 {
		t.Fatalf("after SCRIPT FLUSH the client sent %d commands, want 2", sent)
	}
	if d := admitOK(t, l, r); !d.Allowed || d.RemainingRequests != 7 {
		t.Fatalf("second admission: %+v", d)
	}
	if evalsha, eval := scriptCalls(t, srv); evalsha != 2 || eval != 1 {
		t.Fatalf("the EVAL did not load the script: %d EVALSHA and %d EVAL, want 2 and 1", evalsha, eval)
	}
}

func TestRedisReplyErrorIsNotAdmitted(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	l := NewRedis(newRedisClient(t, srv, time.Second), RedisOptions{})
	do(t, srv, "LPUSH", "tollgate:rl:{acme}:t:r", "x") // a cell of the wrong type
	for _, mode := range []FailMode{FailClosed, FailOpen} {
		d, err := l.Admit(context.Background(), &Request{Tenant: "acme", Limits: []Limit{{Key: "t", RPM: 10}}, OnError: mode})
		if err == nil || errors.Is(err, ErrUnavailable) || errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "WRONGTYPE") || d != (Decision{}) {
			t.Fatalf("%v: %+v, %v; want a WRONGTYPE error and no decision", mode, d, err)
		}
	}
	if err := l.Adjust(context.Background(), "acme", []Limit{{Key: "t", TPM: 10}}, 1, FailOpen, 0); err != nil {
		t.Fatalf("Adjust of a good cell: %v", err)
	}
	do(t, srv, "LPUSH", "tollgate:rl:{acme}:u:t", "x")
	if err := l.Adjust(context.Background(), "acme", []Limit{{Key: "u", TPM: 10}}, 1, FailOpen, 0); err == nil || errors.Is(err, ErrUnavailable) {
		t.Fatalf("Adjust of a wrong-type cell: %v, want a reply error", err)
	}
	if s := l.Stats(); s != (Stats{Errors: 3}) {
		t.Fatalf("stats %+v, want 3 errors", s)
	}
}
