package redistest

import (
	"context"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

// Doer is the command path of a Redis client (the gateway's redisx.Client).
type Doer interface {
	Do(ctx context.Context, build func(rueidis.Builder) rueidis.Completed) rueidis.RedisResult
}

// WaitReconnected waits until c serves 50 keyed commands in a row (a GET of
// key; a missing key counts as served) after the server restarted. Each of
// the client's connections (rueidis spreads keyed commands over several)
// finds the old server gone on its first command (EOF) and reconnects, so
// one success says little. It fails t after 10 s.
func WaitReconnected(t testing.TB, c Doer, key string) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(10 * time.Second)
	for ok := 0; ok < 50; {
		err := c.Do(ctx, func(b rueidis.Builder) rueidis.Completed { return b.Get().Key(key).Build() }).Error()
		if err == nil || rueidis.IsRedisNil(err) {
			ok++
			continue
		}
		ok = 0
		if time.Now().After(deadline) {
			t.Fatalf("no connection to Redis 10 s after the restart: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
