// Package redisx is the gateway's Redis client: rueidis underneath, a
// connection that is made (and remade) in the background so a gateway starts
// and keeps serving while Redis is down, a bounded time per command, and
// counters of what was sent, so tests and metrics can count round trips.
//
// A Redis Cluster is detected by rueidis from the seed addresses; scripts
// then need every key of one call in one hash slot (keys share a {tag}).
// rueidis follows MOVED and ASK; the Client sends a call again itself
// while a node refuses it with TRYAGAIN (its keys split by a slot's
// migration) or CLUSTERDOWN (a failover under way), within the timeout.
package redisx

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"math/bits"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
	"golang.org/x/sync/singleflight"

	"github.com/tollgate/tollgate/gateway/internal/sockio"
)

// ErrUnavailable is returned while there is no connection to Redis.
var ErrUnavailable = errors.New("redis unavailable")

// ErrRejected wraps a connection attempt that Redis or its certificate
// refused — a wrong ACL user or password, a server certificate that does
// not verify: a configuration problem that retrying will not mend, unlike
// a Redis that is down.
var ErrRejected = errors.New("redis refused the connection")

// PingInterval is how long a connection may go without a reply before the
// client pings it; a ping unanswered within the dial timeout drops the
// connection and the next command dials a new one. A connection hung by a
// network partition (nothing refused, nothing reset) is given up within
// PingInterval plus the dial timeout of the partition starting; an idle
// connection costs one PING an interval.
const PingInterval = time.Second

// Options configure a Client.
type Options struct {
	// Addrs are host:port seed addresses (one for a single server; any
	// nodes of a cluster).
	Addrs    []string
	Username string
	Password string // never logged
	DB       int
	// TLS connects over TLS (nil: plain TCP, unless TLSFor is set).
	TLS *tls.Config
	// TLSFor, when set, connects over TLS with the configuration it
	// returns, called once for each new connection (TLS is then unused):
	// certificates and CAs reloaded from files (tlsconf.Client) reach the
	// connections made after the reload. It must not block.
	TLSFor func() *tls.Config
	// Timeout bounds one command, round trip included (default 100ms).
	Timeout time.Duration
	// DialTimeout bounds one connection attempt (default 1s).
	DialTimeout time.Duration
	// FlushDelay is how long a connection's writer waits, after a write,
	// for more commands to send with the next one while others are in
	// flight (0: every command is written at once). Commands of requests
	// running together then share write and read system calls, on the
	// gateway and on Redis; a command sent while none is in flight (one
	// request at a time) never waits. The cost is up to FlushDelay more
	// per command under load.
	FlushDelay time.Duration
	// Connections is how many connections to each Redis node commands are
	// pipelined on, a power of two (default 1): one connection's writes
	// carry the commands of every request in flight, where more split
	// them (rueidis's own default is up to 4, the commands spread at
	// random).
	Connections int
	// Logger receives connection state changes (default slog.Default()).
	Logger *slog.Logger
}

// Client is safe for concurrent use.
type Client struct {
	opts Options
	log  *slog.Logger

	cur      atomic.Pointer[clientBox]
	rejected atomic.Pointer[error] // the last attempt's ErrRejected, until one connects

	mu      sync.Mutex // guards dialing and closed
	dialing bool
	closed  bool
	stop    chan struct{}

	commands atomic.Int64 // commands sent (a script call is one)
	failures atomic.Int64 // commands that failed with a non-Redis error
	retries  atomic.Int64 // commands sent again after TRYAGAIN or CLUSTERDOWN

	loads singleflight.Group // FUNCTION LOADs, by library name

	durations *durations // how long calls took (CollectDurations)
}

type clientBox struct{ c rueidis.Client }

// New returns a Client and starts connecting in the background. It fails
// only on invalid options.
func New(opts Options) (*Client, error) {
	if len(opts.Addrs) == 0 {
		return nil, errors.New("redis: no address")
	}
	for _, a := range opts.Addrs {
		if _, _, err := net.SplitHostPort(a); err != nil {
			return nil, fmt.Errorf("redis: address %q: %v (want host:port)", a, err)
		}
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 100 * time.Millisecond
	}
	if opts.DialTimeout <= 0 {
		opts.DialTimeout = time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.TLSFor != nil {
		// rueidis reads TLSConfig != nil as "over TLS" (a cluster's nodes
		// are then reached on their TLS ports); dialTLS makes the
		// connections.
		opts.TLS = opts.TLSFor()
	}
	c := &Client{opts: opts, log: opts.Logger, stop: make(chan struct{}), durations: newDurations()}
	c.redial()
	return c, nil
}

// Connect waits until the Client has a connection, an attempt was
// rejected (an error wrapping ErrRejected) or ctx ends.
func (c *Client) Connect(ctx context.Context) error {
	for {
		if c.cur.Load() != nil {
			return nil
		}
		if err := c.rejected.Load(); err != nil {
			return *err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("redis %v: %w", c.opts.Addrs, ErrUnavailable)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// redial starts a background connection attempt loop unless one runs.
func (c *Client) redial() {
	c.mu.Lock()
	if c.dialing || c.closed {
		c.mu.Unlock()
		return
	}
	c.dialing = true
	c.mu.Unlock()
	go func() {
		backoff := 50 * time.Millisecond
		logged := false
		for {
			rc, err := rueidis.NewClient(rueidis.ClientOption{
				DialCtxFn:    c.dialFunc(),
				InitAddress:  c.opts.Addrs,
				Username:     c.opts.Username,
				Password:     c.opts.Password,
				SelectDB:     c.opts.DB,
				TLSConfig:    c.opts.TLS,
				DisableCache: true,
				// rueidis pings a connection that has had no reply for
				// the dialer's keep-alive period and drops it when the
				// ping gets no answer within ConnWriteTimeout (its own
				// reads have no deadline): this is what finds a
				// connection a partition hung, which no error ends.
				Dialer: net.Dialer{Timeout: c.opts.DialTimeout, KeepAlive: PingInterval},
				// Under load, commands wait up to FlushDelay to share a
				// write (rueidis waits only when others are in flight).
				MaxFlushDelay:     c.opts.FlushDelay,
				PipelineMultiplex: multiplex(c.opts.Connections),
				ConnWriteTimeout:  c.opts.DialTimeout,
			})
			c.mu.Lock()
			if c.closed {
				c.dialing = false
				c.mu.Unlock()
				if err == nil {
					rc.Close()
				}
				return
			}
			if err == nil {
				c.rejected.Store(nil)
				c.cur.Store(&clientBox{rc})
				c.dialing = false
				c.mu.Unlock()
				if logged {
					c.log.Info("redis connected", "addrs", c.opts.Addrs)
				}
				return
			}
			c.mu.Unlock()
			if rejected(err) {
				err = fmt.Errorf("redis %v: %w: %w", c.opts.Addrs, ErrRejected, err)
				c.rejected.Store(&err)
			}
			if !logged {
				c.log.Warn("redis unavailable; retrying in the background", "addrs", c.opts.Addrs, "err", err)
				logged = true
			}
			select {
			case <-c.stop:
				c.mu.Lock()
				c.dialing = false
				c.mu.Unlock()
				return
			case <-time.After(backoff):
			}
			backoff = min(backoff*2, 2*time.Second)
		}
	}()
}

// dialFunc is the dial the Client gives rueidis: dialTLS when the
// connections are over TLS, else dial.
func (c *Client) dialFunc() func(context.Context, string, *net.Dialer, *tls.Config) (net.Conn, error) {
	if c.opts.TLS != nil {
		return c.dialTLS
	}
	return c.dial
}

// dial makes one connection to dst, its small reads and writes raw
// syscalls (package sockio): at one request at a time the process's Ps
// are all idle between a request's Redis calls, and a read or write
// through the net package would wake the runtime's monitor thread each
// time (docs/adr/0006-raw-socket-syscalls.md).
func (c *Client) dial(ctx context.Context, dst string, dialer *net.Dialer, _ *tls.Config) (net.Conn, error) {
	nc, err := dialer.DialContext(ctx, "tcp", dst)
	if err != nil {
		return nil, err
	}
	return sockio.New(nc), nil
}

// dialTLS makes one TLS connection, over a socket dial made, with the
// configuration TLSFor returns now, or else cfg (Options.TLS); its
// ServerName, when empty, is dst's host, as rueidis's own dial does. The
// dialer's timeout bounds the connection and the handshake together, as
// tls.Dialer's does.
func (c *Client) dialTLS(ctx context.Context, dst string, dialer *net.Dialer, cfg *tls.Config) (net.Conn, error) {
	if dialer.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, dialer.Timeout)
		defer cancel()
	}
	if c.opts.TLSFor != nil {
		cfg = c.opts.TLSFor()
	}
	if cfg.ServerName == "" {
		host, _, err := net.SplitHostPort(dst)
		if err != nil {
			host = dst
		}
		cfg = cfg.Clone()
		cfg.ServerName = host
	}
	nc, err := c.dial(ctx, dst, dialer, nil)
	if err != nil {
		return nil, err
	}
	tc := tls.Client(nc, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		nc.Close()
		return nil, err
	}
	return tc, nil
}

// Raw returns the underlying rueidis client, or ErrUnavailable while there
// is none. Commands sent through it directly are not counted.
func (c *Client) Raw() (rueidis.Client, error) {
	b := c.cur.Load()
	if b == nil {
		c.redial()
		return nil, ErrUnavailable
	}
	return b.c, nil
}

// Exec runs a script (EVALSHA, and EVAL once after NOSCRIPT, which loads
// it) within the command timeout, again while Redis Cluster refuses it
// (Refused).
func (c *Client) Exec(ctx context.Context, s *rueidis.Lua, keys, args []string) rueidis.RedisResult {
	rc, err := c.Raw()
	if err != nil {
		return rueidis.NewErrorResult(err)
	}
	defer since(c.durations.script, time.Now())
	ctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	res := c.retrying(ctx, func() rueidis.RedisResult { return s.Exec(ctx, counting{rc, &c.commands}, keys, args) })
	c.note(res.Error())
	return res
}

// Do sends one command within the command timeout, again while Redis
// Cluster refuses it (Refused).
func (c *Client) Do(ctx context.Context, build func(rueidis.Builder) rueidis.Completed) rueidis.RedisResult {
	rc, err := c.Raw()
	if err != nil {
		return rueidis.NewErrorResult(err)
	}
	defer since(c.durations.command, time.Now())
	ctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	res := c.retrying(ctx, func() rueidis.RedisResult {
		c.commands.Add(1)
		return rc.Do(ctx, build(rc.B()))
	})
	c.note(res.Error())
	return res
}

// Refused reports whether err is a Redis Cluster node's refusal to run a
// command at all: TRYAGAIN (a command whose keys are split between the two
// nodes of a slot being migrated, or some of them missing there) or
// CLUSTERDOWN (the cluster is failed: a master is down and no replica has
// taken over yet). Such a command did nothing, so sending it again is safe
// — unlike a command whose connection broke or timed out, which may have
// run.
func Refused(err error) bool {
	re, ok := rueidis.IsRedisErr(err)
	return ok && (re.IsTryAgain() || re.IsClusterDown())
}

// Retry bounds of retrying: the first wait and the longest.
const (
	retryFirst = time.Millisecond
	retryMax   = 20 * time.Millisecond
)

// retrying runs do, and again while Redis refuses it (Refused) and ctx
// leaves time for another wait and try, waiting 1 ms, 2, 4, … 20 ms
// between tries. rueidis follows MOVED and ASK itself, but sends a
// command that is not read-only again after TRYAGAIN or CLUSTERDOWN only
// if it is marked retryable, which FCALL and EVALSHA are not: a slot's
// migration or a master's failover would fail them for as long as it
// lasts. do must build its command anew: rueidis recycles a sent one.
func (c *Client) retrying(ctx context.Context, do func() rueidis.RedisResult) rueidis.RedisResult {
	wait := retryFirst
	for {
		res := do()
		if !Refused(res.Error()) {
			return res
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < 2*wait {
			return res
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return res
		case <-t.C:
		}
		c.retries.Add(1)
		wait = min(2*wait, retryMax)
	}
}

func (c *Client) note(err error) {
	if err == nil {
		return
	}
	if _, ok := rueidis.IsRedisErr(err); ok || rueidis.IsRedisNil(err) {
		return
	}
	c.failures.Add(1)
}

// Commands is the number of commands sent so far (a script call, EVALSHA or
// EVAL, is one).
func (c *Client) Commands() int64 { return c.commands.Load() }

// Retries is the number of commands sent again after Redis refused them
// (Refused).
func (c *Client) Retries() int64 { return c.retries.Load() }

// Failures is the number of commands that failed without a Redis reply
// (connection refused or lost, timeout).
func (c *Client) Failures() int64 { return c.failures.Load() }

// IsUnavailable reports whether err means Redis could not be reached or did
// not answer in time, as opposed to a reply that is an error.
func IsUnavailable(err error) bool {
	if err == nil {
		return false
	}
	if _, ok := rueidis.IsRedisErr(err); ok {
		return false
	}
	return !rueidis.IsRedisNil(err)
}

// Close closes the connection; the Client must not be used afterwards.
func (c *Client) Close() {
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		close(c.stop)
	}
	c.mu.Unlock()
	if b := c.cur.Load(); b != nil {
		b.c.Close()
	}
}

// counting counts the commands a script execution sends.
type counting struct {
	rueidis.Client
	n *atomic.Int64
}

func (c counting) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	c.n.Add(1)
	return c.Client.Do(ctx, cmd)
}

// rejected reports whether a connection attempt failed on an answer rather
// than for want of one: Redis replied with an error (WRONGPASS, NOAUTH,
// NOPERM, an invalid DB) or its certificate did not verify.
func rejected(err error) bool {
	if _, ok := rueidis.IsRedisErr(err); ok {
		return true
	}
	var (
		cv *tls.CertificateVerificationError
		ua x509.UnknownAuthorityError
		hn x509.HostnameError
		ci x509.CertificateInvalidError
	)
	return errors.As(err, &cv) || errors.As(err, &ua) || errors.As(err, &hn) || errors.As(err, &ci)
}

// multiplex is rueidis's PipelineMultiplex for n connections a node: its
// base-2 logarithm, where -1 means one (0 would be rueidis's default).
func multiplex(n int) int {
	if n <= 1 {
		return -1
	}
	return bits.Len(uint(n)) - 1
}
