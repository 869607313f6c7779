package callout

import (
	"fmt"
	"time"

	"github.com/dgraph-io/ristretto/v2"
)

// defaultCacheBytes caps the cached answers of one Service.
const defaultCacheBytes = 32 << 20

// cache holds 2xx answers by (plugin, key), each for the TTL its request
// asked for. ristretto rather than a map: it bounds the memory by cost,
// evicts by frequency, and expires entries on its own.
type cache struct {
	c *ristretto.Cache[string, *Result]
}

func newCache(maxBytes int64) (*cache, error) {
	if maxBytes <= 0 {
		maxBytes = defaultCacheBytes
	}
	c, err := ristretto.NewCache(&ristretto.Config[string, *Result]{
		NumCounters: max(maxBytes/1024*10, 1000), // ~10 per 1KiB answer
		MaxCost:     maxBytes,
		BufferItems: 64,
	})
	if err != nil {
		return nil, fmt.Errorf("callout: cache: %w", err)
	}
	return &cache{c: c}, nil
}

// cacheKey keeps plugins' keys apart: one plugin cannot read another's
// answers by choosing its key.
func cacheKey(plugin string, key []byte) string {
	return plugin + "\x00" + string(key)
}

func (c *cache) get(plugin string, key []byte) (Result, bool) {
	r, ok := c.c.Get(cacheKey(plugin, key))
	if !ok {
		return Result{}, false
	}
	res := *r
	res.Body = append([]byte(nil), r.Body...) // the host owns a call's result
	res.Cached = true
	return res, true
}

// set stores res, which is then shared: it must not be written to. It
// waits for the cache to take the entry, so that the next request sees it
// (one wait per answer stored, beside a network round trip).
func (c *cache) set(plugin string, key []byte, res Result, ttl time.Duration) {
	cost := int64(len(res.Body)) + 64
	for _, h := range res.Header {
		cost += int64(len(h.Name) + len(h.Value))
	}
	if c.c.SetWithTTL(cacheKey(plugin, key), &res, cost, ttl) {
		c.c.Wait()
	}
}

func (c *cache) close() {
	if c != nil {
		c.c.Close()
	}
}
