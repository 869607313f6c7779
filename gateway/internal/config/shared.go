package config

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"
)

// Redis locates the Redis server (or Redis Cluster) that gateway replicas
// share for rate limits and budget counters. Without addresses those live in
// each process (exact for one replica only).
type Redis struct {
	// Addrs are host:port seed addresses: one server, or any nodes of a
	// cluster (detected automatically).
	Addrs []string `yaml:"addrs"`
	// Username is the ACL user (none by default).
	Username string `yaml:"username"`
	// PasswordEnv names the environment variable holding the password
	// (default TOLLGATE_REDIS_PASSWORD; unset means no password).
	PasswordEnv string `yaml:"password_env"`
	// DB is the database number (default 0; not with a cluster).
	DB int `yaml:"db"`
	// Timeout bounds one command, round trip included (default 100ms).
	// A command that fails or times out applies the calling plugin's
	// on_redis_error.
	Timeout time.Duration `yaml:"timeout"`
	// TLS connects over TLS (absent: plain TCP, the password in clear).
	TLS *RedisTLS `yaml:"tls"`
	// FlushDelay is how long a connection waits, after a write, for more
	// commands to share the next one while others are in flight (default
	// 0s: none). A command sent while none is in flight, as at one request
	// at a time, never waits. It trades latency under load for system
	// calls (docs/BENCHMARKS.md, "Redis commands that share a connection").
	FlushDelay time.Duration `yaml:"flush_delay"`
	// Connections is how many connections to each Redis node commands are
	// pipelined on: 1 (the default), 2, 4, ... 256. One carries in each
	// write the commands of every request in flight; more split them.
	Connections int `yaml:"connections"`

	Password string `yaml:"-"` // resolved from PasswordEnv; never logged
}

// Enabled reports whether a Redis is configured.
func (r *Redis) Enabled() bool { return len(r.Addrs) > 0 }

// CallLog configures the ledger writer: one call_log row per request and
// the spend_month counters, group-committed to Postgres (store.kind
// postgres only), spooled to a local file while Postgres is unreachable.
type CallLog struct {
	// Enabled writes the call log (default true with the Postgres store;
	// the memory store has none).
	Enabled *bool `yaml:"enabled"`
	// SpoolDir holds the spool file (default: the user cache directory,
	// tollgate/spool). Put it on a persistent volume: rows spooled there
	// are replayed when Postgres returns, also after a restart.
	SpoolDir string `yaml:"spool_dir"`
	// QueueSize bounds the rows waiting for the writer (default 8192); when
	// full, the request's own goroutine writes its row.
	QueueSize int `yaml:"queue_size"`
	// MaxBatch caps the rows per transaction (default 1000).
	MaxBatch int `yaml:"max_batch"`
	// ReconcileInterval is how often the reconcile job recomputes this and
	// last month's spend from call_log and corrects the counters (default
	// 1h; 0s turns it off).
	ReconcileInterval *time.Duration `yaml:"reconcile_interval"`
	// WAL is the write-ahead log that makes each row durable before the
	// reply's last byte (docs/adr/0022-call-log-wal.md).
	WAL CallLogWAL `yaml:"wal"`
}

// CallLogWAL configures the call log's write-ahead log, kept in the spool
// slot's directory (spool_dir/N/wal).
type CallLogWAL struct {
	// Mode: write (default) waits for the write only — the row survives a
	// kill of the process (SIGKILL, OOM kill), not a power loss; fsync also
	// waits for an fsync covering the row — it survives a crash of the
	// machine, at the disk's flush latency per reply; off keeps no
	// write-ahead log (a crash loses the rows still queued).
	Mode string `yaml:"mode"`
	// MaxBytes caps the rows the log holds that are not yet stored
	// (default 1GiB); at the cap new requests are refused with 503.
	MaxBytes ByteSize `yaml:"max_bytes"`
	// SegmentBytes is the size of one segment file (default 4MiB).
	SegmentBytes ByteSize `yaml:"segment_bytes"`
}

// MaxRedisFlushDelay bounds redis.flush_delay: it is added to commands'
// latency under load.
const MaxRedisFlushDelay = 2 * time.Millisecond

// Defaults of the shared stores.
const (
	DefaultRedisTimeout      = 100 * time.Millisecond
	DefaultReconcileInterval = time.Hour
)

func (p *Policy) applySharedDefaults() {
	setDefault(&p.Redis.Timeout, DefaultRedisTimeout)
	setDefault(&p.Redis.PasswordEnv, "TOLLGATE_REDIS_PASSWORD")
	if p.CallLog.Enabled == nil {
		on := true
		p.CallLog.Enabled = &on
	}
	setDefault(&p.CallLog.WAL.Mode, "write") // ADR 0022: fsync measured too slow on shared disks
	if p.CallLog.ReconcileInterval == nil {
		d := DefaultReconcileInterval
		p.CallLog.ReconcileInterval = &d
	}
	if p.CallLog.SpoolDir == "" {
		dir, err := os.UserCacheDir()
		if err != nil {
			dir = os.TempDir()
		}
		p.CallLog.SpoolDir = filepath.Join(dir, "tollgate", "spool")
	} else if !filepath.IsAbs(p.CallLog.SpoolDir) && p.Dir != "" {
		p.CallLog.SpoolDir = filepath.Join(p.Dir, p.CallLog.SpoolDir)
	}
}

func (p *Policy) validateShared(lookupEnv func(string) (string, bool), ps *Problems) {
	r := &p.Redis
	for i, a := range r.Addrs {
		if _, port, err := net.SplitHostPort(a); err != nil || port == "" {
			ps.add(fmt.Sprintf("redis.addrs[%d]", i), "%q is not host:port", a)
		}
	}
	if r.Timeout < 0 || r.Timeout > 10*time.Second {
		ps.add("redis.timeout", "must be between 0s (default) and 10s, got %s", r.Timeout)
	}
	if r.FlushDelay < 0 || r.FlushDelay > MaxRedisFlushDelay {
		ps.add("redis.flush_delay", "must be between 0s (none, the default) and %s, got %s", MaxRedisFlushDelay, r.FlushDelay)
	}
	if n := r.Connections; n < 0 || n > 256 || n&(n-1) != 0 {
		ps.add("redis.connections", "must be a power of two from 1 to 256 (0: the default, 1), got %d", n)
	}
	if r.DB < 0 {
		ps.add("redis.db", "must not be negative")
	}
	r.Password, _ = lookupEnv(r.PasswordEnv)
	c := &p.CallLog
	if c.QueueSize < 0 {
		ps.add("call_log.queue_size", "must not be negative")
	}
	if c.MaxBatch < 0 {
		ps.add("call_log.max_batch", "must not be negative")
	}
	if d := c.ReconcileInterval; d != nil && *d < 0 {
		ps.add("call_log.reconcile_interval", "must not be negative (0s turns the reconcile job off)")
	}
	switch c.WAL.Mode {
	case "", "fsync", "write", "off":
	default:
		ps.add("call_log.wal.mode", "must be fsync, write or off, got %q", c.WAL.Mode)
	}
	if c.WAL.SegmentBytes != 0 && (c.WAL.SegmentBytes < 4<<10 || c.WAL.SegmentBytes > 1<<30) {
		ps.add("call_log.wal.segment_bytes", "must be between 4KiB and 1GiB, got %d", c.WAL.SegmentBytes)
	}
	if c.WAL.MaxBytes != 0 && c.WAL.MaxBytes < 16<<10 {
		ps.add("call_log.wal.max_bytes", "must be at least 16KiB, got %d", c.WAL.MaxBytes)
	}
	p.validateTracing(lookupEnv, ps)
}
