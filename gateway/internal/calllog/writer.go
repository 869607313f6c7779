package calllog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Errors of Write and Close, besides ErrInvalidRow.
var (
	// ErrClosed is returned by Write after Close has begun.
	ErrClosed = errors.New("call-log writer closed")
	// ErrRejected is returned by a Write that stored its row inline (the
	// queue was full) when Postgres rejected the row's data. A queued row
	// that is rejected is logged and counted in Stats.Rejected instead.
	ErrRejected = errors.New("call-log row rejected by Postgres")
	// ErrLost is returned when rows could be stored neither in Postgres nor
	// in the spool before Close's context ended (e.g. the spool's disk is
	// full while Postgres is down). They are counted in Stats.Lost.
	ErrLost = errors.New("call-log rows lost")
)

// ErrStuck is returned by Ready while the writer holds rows that neither
// Postgres nor the spool would take.
var ErrStuck = errors.New("call-log writer stuck")

// DefaultLinger is Options.Linger's default.
const DefaultLinger = 10 * time.Millisecond

// Options configure New. Zero values mean the defaults.
type Options struct {
	// QueueSize bounds the rows waiting for the writer goroutine (default
	// 8192). A Write that finds it full stores its row itself. It is also
	// the most rows a crash of the process can lose; see the package doc.
	QueueSize int
	// MaxBatch bounds the rows of one transaction, and of one spool append
	// (default 1000).
	MaxBatch int
	// SpoolDir holds the spool file (SpoolFileName) and its lock; it is
	// created if missing. Default: os.TempDir()/tollgate-spool. Production
	// should name a directory on persistent storage: a spool on tmpfs does
	// not outlive a reboot.
	SpoolDir string
	// Logger receives the writer's messages; nil means slog.Default().
	Logger *slog.Logger
	// RetryInterval is how often Postgres is probed while rows are spooled
	// (default 1s).
	RetryInterval time.Duration
	// Linger is how long the writer waits for more rows after the first
	// of a batch before it commits (default 10ms; negative: none). Writes
	// never wait for it — rows are queued — so it costs no request any
	// latency; it widens the crash window by as much and makes batches
	// larger, so Postgres runs fewer transactions under load.
	Linger time.Duration
	// TxTimeout bounds one transaction (and one probe); one that takes
	// longer counts as Postgres being unavailable, and its rows go to the
	// spool (default 10s).
	TxTimeout time.Duration
	// WALMode is how durable Log makes a row (default WALFsync); WALOff
	// keeps no write-ahead log. See docs/adr/0022-call-log-wal.md.
	WALMode WALMode
	// WALSegmentBytes is the size at which the write-ahead log starts a
	// new segment file (default 4 MiB); a segment is removed once all its
	// rows are stored.
	WALSegmentBytes int64
	// WALMaxBytes caps the write-ahead log's rows not yet stored (default
	// 1 GiB): past it Log and Ready return ErrWALFull.
	WALMaxBytes int64
}

func (o Options) withDefaults() (Options, error) {
	if o.QueueSize < 0 || o.MaxBatch < 0 || o.RetryInterval < 0 || o.TxTimeout < 0 || o.WALSegmentBytes < 0 || o.WALMaxBytes < 0 {
		return o, fmt.Errorf("calllog: negative option in %+v", o)
	}
	if o.QueueSize == 0 {
		o.QueueSize = 8192
	}
	if o.MaxBatch == 0 {
		o.MaxBatch = 1000
	}
	if o.SpoolDir == "" {
		o.SpoolDir = filepath.Join(os.TempDir(), "tollgate-spool")
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.RetryInterval == 0 {
		o.RetryInterval = time.Second
	}
	if o.Linger == 0 {
		o.Linger = DefaultLinger
	}
	if o.TxTimeout == 0 {
		o.TxTimeout = 10 * time.Second
	}
	if o.WALSegmentBytes == 0 {
		o.WALSegmentBytes = DefaultWALSegmentBytes
	}
	if o.WALMaxBytes == 0 {
		o.WALMaxBytes = DefaultWALMaxBytes
	}
	return o, nil
}

// Writer is the group-commit writer of call_log and spend_month. Its
// methods are safe for concurrent use.
type Writer struct {
	pool *pgxpool.Pool // nil: spool only
	opts Options
	log  *slog.Logger
	lock *os.File // flock of SpoolDir
	wal  *wal     // nil: WALOff

	queue   chan Row
	handoff chan handoffReq
	// full wakes a lingering writer (fill) once fullAt rows are queued:
	// the rows themselves do not, so a row costs its Write no wake-up of
	// the writer goroutine while a batch gathers.
	full   chan struct{}
	fullAt int

	// ctx bounds every Postgres operation; hurry cancels it when Close's
	// context ends, sending what is left to the spool at once.
	ctx   context.Context
	hurry context.CancelFunc

	mu     sync.Mutex
	closed bool
	active int           // Writes in progress
	idle   chan struct{} // closed once closed and active == 0
	stop   chan struct{} // closed by Close after idle: the loop drains and ends
	linger *time.Timer   // the writer goroutine's, for fill
	done   chan struct{} // closed when the loop has ended

	// spooling is true while the spool holds rows: new rows go there too,
	// behind them. Written by the loop only.
	spooling atomic.Bool
	// stuck is true while the loop holds rows that neither Postgres nor
	// the spool would take (spoolRows retrying): Ready refuses new
	// requests then, so that only rows of requests already admitted can
	// fill the queue behind it.
	stuck atomic.Bool

	// Owned by the loop goroutine.
	sp        *spool
	replayOff int64 // spool bytes already replayed
	buf       []Row
	closeErr  error // read by Close after done

	stats counters
}

// handoffReq carries an inline Write's rows to the loop, which owns the
// spool, and brings back the result of appending them.
type handoffReq struct {
	rows []Row
	done chan error
}

// New starts a Writer on pool, which may be nil for a spool-only writer (a
// gateway without Postgres: rows accumulate in the spool). If SpoolDir holds
// a spool from an earlier run, its rows are replayed before any new row
// reaches Postgres; New does not wait for that. Close the Writer when done.
func New(pool *pgxpool.Pool, opts Options) (*Writer, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.SpoolDir, 0o700); err != nil {
		return nil, fmt.Errorf("calllog: creating the spool directory: %w", err)
	}
	lock, err := lockDir(o.SpoolDir)
	if err != nil {
		return nil, fmt.Errorf("calllog: %w", err)
	}
	sp, err := openSpool(o.SpoolDir)
	if err != nil {
		lock.Close()
		return nil, fmt.Errorf("calllog: %w", err)
	}
	ctx, hurry := context.WithCancel(context.Background())
	w := &Writer{
		pool: pool, opts: o, log: o.Logger.With("component", "calllog"), lock: lock,
		queue:   make(chan Row, o.QueueSize),
		full:    make(chan struct{}, 1),
		fullAt:  max(1, min(o.MaxBatch, o.QueueSize/2)),
		handoff: make(chan handoffReq),
		ctx:     ctx, hurry: hurry,
		idle: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{}),
		sp: sp, buf: make([]Row, 0, o.MaxBatch),
	}
	if sp.cut > 0 {
		w.log.Warn("ignored the torn or damaged end of the spool (a crash during an append)",
			"path", sp.path, "bytes", sp.cut, "reason", sp.cutReason)
	}
	if o.WALMode != WALOff {
		if w.wal, err = startWAL(o, sp, &w.stats, w.log); err != nil {
			hurry()
			sp.close()
			lock.Close()
			return nil, fmt.Errorf("calllog: %w", err)
		}
	}
	w.stats.spoolBytes.Store(sp.size)
	if sp.size > 0 || pool == nil {
		w.spooling.Store(true)
	}
	if sp.size > 0 {
		w.log.Info("the spool holds rows of an earlier run; replaying them when Postgres answers",
			"path", sp.path, "bytes", sp.size)
	}
	go w.run()
	return w, nil
}

// startWAL moves the rows an earlier run left in the write-ahead log into
// the spool (the loop replays them) and starts the log.
func startWAL(o Options, sp *spool, stats *counters, log *slog.Logger) (*wal, error) {
	dir := filepath.Join(o.SpoolDir, WALDirName)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating the write-ahead log directory: %w", err)
	}
	moved, next, err := recoverWAL(dir, sp, log)
	if err != nil {
		return nil, err
	}
	if moved > 0 {
		log.Info("moved the write-ahead log of an earlier run to the spool", "rows", moved)
	}
	return openWAL(dir, o, next, stats, log), nil
}

// Log makes r durable in the write-ahead log (Options.WALMode says how) and
// sets r.WAL; the caller then hands r, or a later version of it with the
// same WAL, RequestID and StartedAt, to Write, which releases the record
// once the row is stored. A crash between the two leaves the record, and
// the next New stores it. The proxy calls Log before a reply's last byte.
//
// Log waits only for the write (and fsync) that covers its record: records
// that arrive together share one. It returns ErrWALFull when the log is at
// Options.WALMaxBytes or its disk fails, ErrClosed after Close, and
// ErrInvalidRow for a row Write would refuse; with WALOff it does nothing.
func (w *Writer) Log(r *Row) error {
	if w.wal == nil {
		return nil
	}
	if err := r.validate(); err != nil {
		return err
	}
	if !w.enter() {
		return ErrClosed
	}
	defer w.leave()
	m, err := w.wal.append(r)
	if err != nil {
		return err
	}
	r.WAL = m
	return nil
}

// Ready returns ErrWALFull (wrapped) while Log would refuse rows because
// the write-ahead log is full or its disk failed within the last
// RetryInterval, so that requests can be refused before they cost
// anything; nil otherwise, and always with WALOff.
//
// It returns ErrStuck (wrapped), also with WALOff, while the writer holds
// rows that neither Postgres nor the spool would take (Postgres down and
// the spool's disk full or failing): the rows of requests admitted then
// would wait in the queue, and once it is full every Write would wait for
// the disk, holding its request without bound.
func (w *Writer) Ready() error {
	if w.stuck.Load() {
		return fmt.Errorf("%w: Postgres is unavailable and the spool cannot be appended to", ErrStuck)
	}
	if w.wal == nil {
		return nil
	}
	return w.wal.ready()
}

// release lets go of the write-ahead log records of rows now stored (in
// Postgres or the spool) or rejected.
func (w *Writer) release(rows []Row) {
	if w.wal != nil {
		w.wal.release(rows)
	}
}

// Write queues r for the writer goroutine and returns at once. If the queue
// is full it stores r itself before returning (back-pressure, never a
// drop): in Postgres in a transaction of its own, or, if Postgres is
// unavailable or rows are being spooled, in the spool, fsynced. Callers
// that must not wait should size QueueSize for their bursts.
//
// ctx is not used to cancel: a row handed to Write is kept even if the
// request behind it is gone. Write returns ErrInvalidRow for a row that
// could never be stored, ErrClosed after Close, ErrRejected (inline only)
// if Postgres refused the row, and ErrLost if neither Postgres nor the
// spool could take it before Close gave up.
func (w *Writer) Write(ctx context.Context, r Row) error {
	if err := r.validate(); err != nil {
		return err
	}
	if !w.enter() {
		return ErrClosed
	}
	defer w.leave()
	select {
	case w.queue <- r:
		if len(w.queue) >= w.fullAt {
			select {
			case w.full <- struct{}{}:
			default: // already signalled
			}
		}
		return nil
	default:
	}
	w.stats.inline.Add(1)
	rows := []Row{r}
	if w.pool != nil && !w.spooling.Load() {
		err := w.commit(w.ctx, rows)
		switch {
		case err == nil:
			w.release(rows)
			return nil
		case rowFault(err):
			w.reject(&r, err)
			w.release(rows)
			return fmt.Errorf("%w: request %s: %w", ErrRejected, r.RequestID, err)
		}
		w.log.WarnContext(ctx, "Postgres unavailable for an inline call-log write; spooling it", "err", err)
	}
	// The loop owns the spool; it appends these rows with whatever else is
	// waiting, one fsync for all.
	req := handoffReq{rows: rows, done: make(chan error, 1)}
	w.handoff <- req
	return <-req.done
}

// enter counts a Write in progress, unless the Writer is closed.
func (w *Writer) enter() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return false
	}
	w.active++
	return true
}

func (w *Writer) leave() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.active--
	if w.closed && w.active == 0 {
		close(w.idle)
	}
}

// Close stops accepting rows, waits for the Writes in progress, then
// stores everything queued: in Postgres, or in the spool, fsynced, if
// Postgres is unavailable (if the spool holds rows, Close first tries to
// replay them). When Close returns the spool file is closed, and removed if
// empty. If ctx ends first, the rows not yet in Postgres go to the spool at
// once and Close still waits for that fsync; it returns an error only if
// rows were lost (ErrLost) or the spool could not be closed. Later calls
// wait for the first and return its result.
func (w *Writer) Close(ctx context.Context) error {
	w.mu.Lock()
	first := !w.closed
	if first {
		w.closed = true
		if w.active == 0 {
			close(w.idle)
		}
	}
	w.mu.Unlock()
	if first {
		// After idle no Write is sending: the loop can drain to the end.
		w.await(ctx, w.idle)
		close(w.stop)
	}
	w.await(ctx, w.done)
	return w.closeErr
}

// await waits for ch; if ctx ends first it hurries the Writer (Postgres
// operations end, rows go to the spool) and waits on.
func (w *Writer) await(ctx context.Context, ch <-chan struct{}) {
	select {
	case <-ch:
		return
	case <-ctx.Done():
	}
	w.hurry()
	<-ch
}
