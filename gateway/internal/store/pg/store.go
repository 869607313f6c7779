package pg

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate/tollgate/gateway/internal/sockio"
	"github.com/tollgate/tollgate/gateway/internal/tenant"
)

// Errors of admin writes, besides tenant.ErrNotFound.
var (
	// ErrExists is returned when creating a plan, tenant, key or price
	// whose identity is taken.
	ErrExists = errors.New("already exists")
	// ErrInvalid is returned for a value the schema rejects: an empty or
	// too long id, an unknown status, a negative limit.
	ErrInvalid = errors.New("invalid value")
)

// Options configure Open. The zero value is the default.
type Options struct {
	// Tracer, if not nil, sees every query run on the pool's connections
	// (not the Listen connection), e.g. to count the statements of a
	// request: KeyByHash and Price are one statement each, an admin write
	// six (BEGIN, the row's image before, the write, its image after, the
	// audit entry, COMMIT). It is also used as a pgx batch,
	// copy-from, prepare or connect tracer if it implements those
	// interfaces.
	Tracer pgx.QueryTracer
	// MaxConns caps the pool's connections; 0 keeps pool_max_conns from the
	// DSN, or pgxpool's default (the greater of 4 and the number of CPUs).
	MaxConns int32
	// Logger receives Listen's connection messages; nil means
	// slog.Default().
	Logger *slog.Logger
}

// PingTimeout bounds the ping with which a pool checks a connection idle
// for over a second before handing it out (pgxpool's pool_ping_timeout; a
// DSN that sets it wins). Without a bound of its own the ping waits as
// long as the caller's context allows: a connection that a network
// partition hung (nothing refused, nothing reset) would, once the network
// healed, cost the caller its whole deadline — a tenant lookup 5 s, a
// call-log transaction 10 s — once for every such connection in the pool.
// With it, each costs at most PingTimeout, and the pool dials anew.
const PingTimeout = time.Second

// ConnectTimeout bounds making a connection, TLS and authentication
// included (libpq's connect_timeout; a DSN that sets it wins). A pool
// makes its connections detached from the caller's context: without a
// bound, a connection attempt that a network partition hung would hold
// its slot in the pool for good, and once every slot was held so, the
// gateway could not reach Postgres again after the network healed.
const ConnectTimeout = 3 * time.Second

// TunePool sets the gateway's defaults on a pool configuration where the
// DSN left them: PingTimeout and ConnectTimeout. Its connections' small
// reads and writes are raw syscalls (package sockio): a query made when
// the process was idle would otherwise wake the runtime's monitor thread
// (docs/adr/0006-raw-socket-syscalls.md).
func TunePool(cfg *pgxpool.Config) {
	if cfg.PingTimeout == 0 {
		cfg.PingTimeout = PingTimeout
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = ConnectTimeout
	}
	if dial := cfg.ConnConfig.DialFunc; dial != nil {
		cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dial(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return sockio.New(c), nil
		}
	}
}

// Store is the Postgres tenant store. Its methods are safe for concurrent
// use.
type Store struct {
	pool *pgxpool.Pool
	// listenConfig is the connection configuration of Listen: the pool's,
	// without the tracer.
	listenConfig *pgx.ConnConfig
	log          *slog.Logger
}

var _ tenant.Store = (*Store)(nil)

// Open connects a pool to the database at dsn (a postgres:// URL or a
// key=value connection string) and checks that it answers. opts holds at
// most one Options; none means defaults. Close the Store when done.
func Open(ctx context.Context, dsn string, opts ...Options) (*Store, error) {
	var o Options
	switch len(opts) {
	case 0:
	case 1:
		o = opts[0]
	default:
		return nil, fmt.Errorf("pg.Open: %d Options given, want at most 1", len(opts))
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// pgconn's parse errors never include the password.
		return nil, fmt.Errorf("parsing the Postgres DSN: %w", err)
	}
	TunePool(cfg)
	if o.MaxConns > 0 {
		cfg.MaxConns = o.MaxConns
	}
	listenConfig := cfg.ConnConfig.Copy()
	if o.Tracer != nil {
		cfg.ConnConfig.Tracer = o.Tracer
	}
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("creating the Postgres pool for %s: %w", where(cfg.ConnConfig), err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connecting to Postgres at %s: %w", where(cfg.ConnConfig), err)
	}
	return &Store{
		pool:         pool,
		listenConfig: listenConfig,
		log:          log.With("component", "store/pg"),
	}, nil
}

// where names the server and database of cfg for messages, without
// credentials.
func where(cfg *pgx.ConnConfig) string {
	return fmt.Sprintf("%s:%d/%s", cfg.Host, cfg.Port, cfg.Database)
}

// Close closes the pool's connections, waiting for those in use to be
// released. It does not stop Listen: cancel its context.
func (s *Store) Close() { s.pool.Close() }

// Ping checks that the database answers, for readiness checks.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("pinging Postgres: %w", err)
	}
	return nil
}

// inTx runs fn in a transaction, committed if fn returns nil and rolled back
// otherwise. Notifications of the triggers are sent on commit.
//
// A BEGIN that finds its connection gone (ConnLost) is sent again on a new
// one, as a read is: nothing of the transaction has run yet. A connection
// lost later fails the transaction, since a COMMIT that got no answer may
// or may not have taken effect.
func (s *Store) inTx(ctx context.Context, fn func(pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, beginAgain{s}, fn)
}

// beginAgain begins a transaction on the store's pool, again on a new
// connection when the first was lost (Store.read).
type beginAgain struct{ s *Store }

func (b beginAgain) Begin(ctx context.Context) (tx pgx.Tx, err error) {
	err = b.s.read(ctx, func() (err error) {
		tx, err = b.s.pool.Begin(ctx)
		return err
	})
	return tx, err
}

// SQLSTATE classes and codes this package maps to its errors.
const (
	codeUniqueViolation     = "23505"
	codeForeignKeyViolation = "23503"
	codeCheckViolation      = "23514"
	codeNotNullViolation    = "23502"
	classDataException      = "22"
)

// classify wraps a database error in ErrExists, tenant.ErrNotFound (a
// reference to a missing row) or ErrInvalid where it is one of those, keeping
// the original in the chain; other errors are returned as they are.
func classify(err error) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return err
	}
	switch {
	case pgErr.Code == codeUniqueViolation:
		return fmt.Errorf("%w (%w)", ErrExists, err)
	case pgErr.Code == codeForeignKeyViolation:
		return fmt.Errorf("%w (%w)", tenant.ErrNotFound, err)
	case pgErr.Code == codeCheckViolation, pgErr.Code == codeNotNullViolation,
		len(pgErr.Code) == 5 && pgErr.Code[:2] == classDataException:
		return fmt.Errorf("%w (%w)", ErrInvalid, err)
	}
	return err
}

// ConnLost reports whether err says that the connection a statement ran on
// was gone: the server ended it (SQLSTATE class 08, or 57P01–57P03: a
// shutdown, a crash, pg_terminate_backend, a server still starting) or the
// socket was closed or reset under it. A failure to connect is not one: a
// new connection would fail the same way, after the same wait.
func ConnLost(err error) bool {
	if err == nil {
		return false
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case len(pgErr.Code) == 5 && pgErr.Code[:2] == "08",
			pgErr.Code == "57P01", pgErr.Code == "57P02", pgErr.Code == "57P03":
			return true
		}
		return false
	}
	return pgconn.SafeToRetry(err) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, net.ErrClosed)
}

// ReadAgain runs read, a read-only statement or a BEGIN on pool, and runs
// it once more when the connection it ran on was lost (ConnLost); lost
// holds that first error, nil when there was none. Before the second run
// it resets the pool: a server that ended one idle connection (a restart,
// a failover) has ended them all, and the pool checks an idle connection
// only once it has been idle for a second, so under load each dead
// connection would otherwise fail one request. Connections in use finish
// what they are doing and are closed when released.
func ReadAgain(ctx context.Context, pool *pgxpool.Pool, read func() error) (lost, err error) {
	err = read()
	if !ConnLost(err) || ctx.Err() != nil {
		return nil, err
	}
	pool.Reset()
	return err, read()
}

// read is ReadAgain on the store's pool, logged.
func (s *Store) read(ctx context.Context, read func() error) error {
	lost, err := ReadAgain(ctx, s.pool, read)
	if lost != nil {
		s.log.Warn("Postgres ended a connection of the pool; the pool is reset and the statement run again on a new connection", "err", lost)
	}
	return err
}
