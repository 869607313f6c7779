package config

import "time"

// Cache configures the response cache's store (docs/POLICY.md, "Response
// cache"): an in-process layer in front of the policy's Redis, shared by
// every replica. Which requests use it, for how long and at what cost is
// the cache plugin's configuration (plugins/cache), so it can differ per
// route (chains) and per plan (plugin overrides).
type Cache struct {
	// Enabled (default true) serves the cache.lookup and cache.skip
	// services to plugins; the store is opened at the first lookup, so a
	// policy whose plugins never ask holds nothing.
	Enabled *bool `yaml:"enabled"`
	// Local (default true): false turns the in-process layer off, so
	// every lookup asks Redis (which the policy must then have).
	Local *bool `yaml:"local"`
	// LocalMaxBytes caps the in-process layer's entries, in bytes
	// (default 64MiB).
	LocalMaxBytes ByteSize `yaml:"local_max_bytes"`
	// LocalTTL bounds how long a replica serves its in-process copy of an
	// entry (default 10s, at most its time to live): how long another
	// replica's refresh of the entry (Cache-Control: no-cache) may go
	// unseen here.
	LocalTTL time.Duration `yaml:"local_ttl"`
	// MaxEntryBytes: a reply larger than this is served but not stored
	// (default 4MiB, at most 64MiB).
	MaxEntryBytes ByteSize `yaml:"max_entry_bytes"`
	// Timeout bounds one Redis command of the cache (default 100ms, at
	// most 5s). A lookup that times out is a miss; nothing fails.
	Timeout time.Duration `yaml:"timeout"`
}

// Defaults of the cache section.
const (
	DefaultCacheLocalMaxBytes = 64 << 20
	DefaultCacheMaxEntryBytes = 4 << 20
	DefaultCacheTimeout       = 100 * time.Millisecond
	DefaultCacheLocalTTL      = 10 * time.Second
)

// CacheLocal reports whether the cache keeps entries in-process too.
func (c *Cache) CacheLocal() bool { return c.Local == nil || *c.Local }

// CacheEnabled reports whether the policy serves the response cache.
func (p *Policy) CacheEnabled() bool { return p.Cache.Enabled == nil || *p.Cache.Enabled }

func (p *Policy) applyCacheDefaults() {
	c := &p.Cache
	setDefault(&c.LocalMaxBytes, DefaultCacheLocalMaxBytes)
	setDefault(&c.MaxEntryBytes, DefaultCacheMaxEntryBytes)
	setDefault(&c.Timeout, DefaultCacheTimeout)
	setDefault(&c.LocalTTL, DefaultCacheLocalTTL)
}

func (p *Policy) validateCache(ps *Problems) {
	c := &p.Cache
	if c.LocalMaxBytes < 0 {
		ps.add("cache.local_max_bytes", "must not be negative (local: false turns the layer off)")
	}
	if c.LocalTTL < 0 {
		ps.add("cache.local_ttl", "must not be negative")
	}
	if !c.CacheLocal() && len(p.Redis.Addrs) == 0 && p.CacheEnabled() {
		ps.add("cache.local", "false needs a redis section: the cache would have no layer")
	}
	if c.MaxEntryBytes < 0 || c.MaxEntryBytes > 64<<20 {
		ps.add("cache.max_entry_bytes", "must be between 0 (default) and 64MiB, got %d", c.MaxEntryBytes)
	}
	if c.Timeout <= 0 || c.Timeout > 5*time.Second {
		ps.add("cache.timeout", "must be between 0s (default) and 5s, got %s", c.Timeout)
	}
}
