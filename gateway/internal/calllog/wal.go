package calllog

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
)

// The write-ahead log (docs/adr/0022-call-log-wal.md). Writer.Log appends a
// settled request's row to a segment file in SpoolDir/wal and returns once
// the append is durable; the proxy calls it before the reply's last byte,
// so a SIGKILL or an OOM kill after that loses no row a client saw the end
// of. The row then takes the usual way (queue → Postgres or spool); once
// it is stored there its record is released, and a segment whose records
// are all released is removed. New moves what segments an earlier run left
// behind into the spool, whose replay stores them idempotently.
//
// Segment file format: the spool's records (spool.go: length, CRC-32C,
// JSON), so one reader, fuzzed, serves both; a torn last record (a kill
// mid-append) ends a segment's valid part and is ignored.

// WALMode says how durable Writer.Log makes a row before it returns.
type WALMode uint8

const (
	// WALFsync (the default) returns once an fsync covers the row: it
	// survives a crash of the process and of the machine. Rows arriving
	// together share one write and one fsync (group commit).
	WALFsync WALMode = iota
	// WALWrite returns once the row is written to the file (the page
	// cache): it survives a crash of the process (SIGKILL, OOM kill), not
	// of the kernel or a power loss.
	WALWrite
	// WALOff keeps no write-ahead log: Log returns at once, and a crash
	// loses the rows still queued (up to QueueSize + MaxBatch).
	WALOff
)

// ParseWALMode reads a mode's configuration name: fsync, write or off.
func ParseWALMode(s string) (WALMode, error) {
	switch s {
	case "fsync", "":
		return WALFsync, nil
	case "write":
		return WALWrite, nil
	case "off":
		return WALOff, nil
	}
	return 0, fmt.Errorf("unknown write-ahead log mode %q (want fsync, write or off)", s)
}

// Defaults of the WAL options.
const (
	DefaultWALSegmentBytes = 4 << 20
	DefaultWALMaxBytes     = 1 << 30
	// walPendingBytes bounds the records waiting for the WAL goroutine;
	// Log waits while it is reached (back-pressure, never a drop).
	walPendingBytes = 4 << 20
	// walRowRoom is the room Ready asks for: more than a row takes (about
	// 300 bytes), so a request it lets in finds room at its end unless
	// many end at once.
	walRowRoom = 1 << 10
)

// ErrWALFull is returned by Log, and by Ready, when the write-ahead log
// holds Options.WALMaxBytes of rows not yet stored, or its disk failed
// recently: the gateway refuses requests rather than serve them unrecorded.
var ErrWALFull = errors.New("call-log write-ahead log full or failing")

// WALDirName is the write-ahead log's directory inside Options.SpoolDir.
const WALDirName = "wal"

// Mark is a row's record in the write-ahead log: Log sets it in the Row,
// and storing the row (Write) releases it. The zero Mark is none.
type Mark struct{ seg uint64 }

// walChunk is a run of encoded records of one segment.
type walChunk struct {
	seg  uint64
	b    []byte
	rows int
}

// walBatch is what the WAL goroutine writes at once.
type walBatch struct {
	chunks  []walChunk
	waiters []chan error
	bytes   int64
}

func (b *walBatch) reset() {
	for i := range b.chunks {
		b.chunks[i].b = b.chunks[i].b[:0]
	}
	b.chunks, b.waiters, b.bytes = b.chunks[:0], b.waiters[:0], 0
}

var waiterPool = sync.Pool{New: func() any { return make(chan error, 1) }}

// wal is the write-ahead log. Log runs on any goroutine; file I/O runs in
// rounds, one at a time (writing), on the WAL goroutine or on a Log that
// found no round running, never under mu.
type wal struct {
	dir      string
	mode     WALMode
	segBytes int64
	maxBytes int64
	retry    time.Duration
	log      *slog.Logger

	mu      sync.Mutex
	room    *sync.Cond // pending shrank
	pending *walBatch
	spare   *walBatch
	cur     uint64           // segment new records go to
	curSize int64            // bytes assigned to cur
	live    map[uint64]int   // unreleased records per segment
	sizes   map[uint64]int64 // bytes per segment on disk (or pending)
	closing bool
	writing bool // a round is under way (run, or a Log leading one)
	kick    chan struct{}
	done    chan struct{}

	stats       *counters
	bytes       atomic.Int64 // sum of sizes: the WAL's disk use
	failedUntil atomic.Int64 // unix nanos: Ready refuses until then

	// Owned by the round's holder (writing).
	f      *os.File
	fseg   uint64
	fsize  int64
	closed error
}

// openWAL starts the WAL in dir, which must hold no segments (New moved
// them to the spool), numbering segments from first.
func openWAL(dir string, o Options, first uint64, stats *counters, log *slog.Logger) *wal {
	l := &wal{
		dir: dir, mode: o.WALMode, segBytes: o.WALSegmentBytes, maxBytes: o.WALMaxBytes, retry: o.RetryInterval,
		log: log, stats: stats,
		pending: &walBatch{}, spare: &walBatch{}, cur: first,
		live: map[uint64]int{}, sizes: map[uint64]int64{},
		kick: make(chan struct{}, 1), done: make(chan struct{}),
	}
	l.room = sync.NewCond(&l.mu)
	go l.run()
	return l
}

// ready reports ErrWALFull while the WAL is within walRowRoom of its size cap or its disk
// failed within the last retry interval.
func (l *wal) ready() error {
	if l.bytes.Load()+walRowRoom > l.maxBytes {
		return fmt.Errorf("%w: %d of %d bytes hold rows not yet stored", ErrWALFull, l.bytes.Load(), l.maxBytes)
	}
	if until := l.failedUntil.Load(); until != 0 && time.Now().UnixNano() < until {
		return fmt.Errorf("%w: the last append failed", ErrWALFull)
	}
	return nil
}

// recordBufs hold the records append encodes before it copies them into
// the pending batch.
var recordBufs = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// append makes r's record durable (as the mode says) and returns its Mark.
func (l *wal) append(r *Row) (Mark, error) {
	bp := recordBufs.Get().(*[]byte)
	rec := appendRecord((*bp)[:0], r)
	n := int64(len(rec))
	l.mu.Lock()
	for l.pending.bytes >= walPendingBytes && !l.closing {
		l.room.Wait()
	}
	switch {
	case l.closing:
		l.mu.Unlock()
		recordBufs.Put(bp)
		return Mark{}, ErrClosed
	case l.bytes.Load()+n > l.maxBytes:
		l.mu.Unlock()
		recordBufs.Put(bp)
		return Mark{}, fmt.Errorf("%w: %d of %d bytes hold rows not yet stored", ErrWALFull, l.bytes.Load(), l.maxBytes)
	}
	if l.curSize > 0 && l.curSize+n > l.segBytes {
		l.cur, l.curSize = l.cur+1, 0
	}
	seg := l.cur
	l.curSize += n
	l.live[seg]++
	l.sizes[seg] += n
	l.bytes.Add(n)
	b := l.pending
	if k := len(b.chunks); k > 0 && b.chunks[k-1].seg == seg {
		b.chunks[k-1].b = append(b.chunks[k-1].b, rec...)
		b.chunks[k-1].rows++
	} else if k < cap(b.chunks) {
		b.chunks = b.chunks[:k+1]
		b.chunks[k].seg, b.chunks[k].b, b.chunks[k].rows = seg, append(b.chunks[k].b[:0], rec...), 1
	} else {
		b.chunks = append(b.chunks, walChunk{seg: seg, b: append([]byte(nil), rec...), rows: 1})
	}
	b.bytes += n
	ch := waiterPool.Get().(chan error)
	b.waiters = append(b.waiters, ch)
	lead := !l.writing
	if lead {
		// No round is running: this goroutine runs one, writing what is
		// pending (its own row, and any a round's end left), so an
		// unloaded gateway pays the write and no hand-offs. The WAL
		// goroutine takes the rounds that find one running, and the
		// removal of released segments (file I/O off the request path).
		l.writing = true
		l.pending, l.spare = l.spare, nil
	}
	l.mu.Unlock()
	*bp = rec
	recordBufs.Put(bp)
	if lead {
		l.round(b)
		l.mu.Lock()
		l.writing = false
		more := len(l.pending.waiters) > 0 || l.closing || l.anyReleased()
		l.mu.Unlock()
		if more {
			l.wake()
		}
	} else {
		l.wake()
	}
	err := <-ch
	waiterPool.Put(ch)
	if err != nil {
		return Mark{}, err
	}
	return Mark{seg: seg}, nil
}

// release lets go of the records of rows stored elsewhere; segments left
// with none are removed by the WAL goroutine.
func (l *wal) release(rows []Row) {
	freed := false
	l.mu.Lock()
	for i := range rows {
		if s := rows[i].WAL.seg; s != 0 {
			rows[i].WAL = Mark{}
			l.live[s]--
			freed = freed || (l.live[s] == 0 && (s != l.cur || l.bytes.Load() >= l.maxBytes/2))
		}
	}
	l.mu.Unlock()
	if freed {
		l.wake()
	}
}

// wake starts a round of the WAL goroutine, or makes sure another follows
// the one running.
func (l *wal) wake() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// run is the WAL goroutine: it writes what is pending with one write per
// segment and one sync, answers the waiters, and removes released
// segments. Records arriving while a round writes wait for the next one,
// so rounds grow with the load and an idle WAL adds no delay (group
// commit). A round is run by whoever holds the round (writing, under mu):
// this goroutine, or a Log that found none running (append), which then
// writes its own row without two goroutine hand-offs.
func (l *wal) run() {
	defer close(l.done)
	for {
		<-l.kick
		l.mu.Lock()
		if l.writing {
			// A Log's round is under way; it kicks again when it ends
			// with more to do.
			l.mu.Unlock()
			continue
		}
		l.writing = true
		b := l.pending
		l.pending, l.spare = l.spare, nil
		l.mu.Unlock()

		l.round(b)
		l.mu.Lock()
		remove := l.removable()
		l.mu.Unlock()
		l.removeSegments(remove)
		l.mu.Lock()
		l.writing = false
		closing, more := l.closing, len(l.pending.waiters) > 0
		l.mu.Unlock()
		if closing && !more {
			// The last round: the segment records went to is released too.
			l.mu.Lock()
			remove = l.removable()
			l.mu.Unlock()
			l.removeSegments(remove)
			l.closed = l.closeFile()
			return
		}
		if closing || more {
			l.wake()
		}
	}
}

// round writes b, answers its waiters and makes b the spare batch. The
// caller holds the round (writing); the open segment is the round's.
func (l *wal) round(b *walBatch) {
	err := l.write(b)
	if err != nil {
		l.log.Error("cannot append to the call-log write-ahead log; refusing requests for a while",
			"err", err, "rows", len(b.waiters), "dir", l.dir)
		l.failedUntil.Store(time.Now().Add(l.retry).UnixNano())
	} else if len(b.waiters) > 0 {
		l.failedUntil.Store(0)
		l.stats.walRows.Add(int64(len(b.waiters)))
		l.stats.walRounds.Add(1)
	}
	l.mu.Lock()
	if err != nil {
		for _, c := range b.chunks {
			l.live[c.seg] -= c.rows
			l.sizes[c.seg] -= int64(len(c.b))
			l.bytes.Add(-int64(len(c.b)))
		}
	}
	l.room.Broadcast()
	l.mu.Unlock()
	for _, ch := range b.waiters {
		ch <- err
	}
	b.reset()
	l.mu.Lock()
	l.spare = b
	l.mu.Unlock()
}

// anyReleased reports whether removable would list a segment, for the WAL
// goroutine to remove. Called with mu held.
func (l *wal) anyReleased() bool {
	if l.givesUpCurrent() {
		return true
	}
	for s := range l.live {
		if l.released(s) {
			return true
		}
	}
	return false
}

// givesUpCurrent reports whether the current segment is to be given up:
// past half of WALMaxBytes a released current segment goes too (new
// records start another), so a WAL at its cap frees itself as soon as its
// rows are stored; below that the segment stays, sparing a file creation
// per round. Called with mu held.
func (l *wal) givesUpCurrent() bool {
	return l.live[l.cur] == 0 && l.curSize > 0 && !l.closing && l.bytes.Load() >= l.maxBytes/2
}

// released reports whether segment s has no unreleased record left and is
// not the one records still go to (every segment, once closing). Called
// with mu held.
func (l *wal) released(s uint64) bool {
	return l.live[s] == 0 && (s != l.cur || l.closing)
}

// removable lists the released segments, moving records to a new segment
// first when the current one is given up. Called with mu held.
func (l *wal) removable() []uint64 {
	if l.givesUpCurrent() {
		l.cur, l.curSize = l.cur+1, 0
	}
	var out []uint64
	for s := range l.live {
		if l.released(s) {
			out = append(out, s)
		}
	}
	return out
}

// removeSegments deletes released segments (the open one is closed
// first) and forgets their sizes.
func (l *wal) removeSegments(segs []uint64) {
	for _, s := range segs {
		if s == l.fseg && l.f != nil {
			l.f.Close()
			l.f, l.fseg, l.fsize = nil, 0, 0
		}
		err := os.Remove(l.segPath(s))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			l.log.Error("cannot remove a released write-ahead log segment", "err", err)
			continue
		}
		l.mu.Lock()
		if l.live[s] == 0 {
			l.bytes.Add(-l.sizes[s])
			delete(l.live, s)
			delete(l.sizes, s)
		}
		l.mu.Unlock()
	}
}

// write appends b's chunks to their segments and syncs (mode WALFsync).
// On error the open segment is cut back to its last good size.
func (l *wal) write(b *walBatch) error {
	for _, c := range b.chunks {
		if c.seg != l.fseg || l.f == nil {
			if err := l.rotate(c.seg); err != nil {
				return err
			}
		}
		if _, err := l.f.Write(c.b); err != nil {
			return l.undo(err)
		}
		if l.mode == WALFsync {
			if err := l.f.Sync(); err != nil {
				return l.undo(err)
			}
		}
		l.fsize += int64(len(c.b))
	}
	return nil
}

// undo cuts the open segment back to the records written before err.
func (l *wal) undo(err error) error {
	if terr := l.f.Truncate(l.fsize); terr != nil {
		err = errors.Join(err, terr)
	}
	return fmt.Errorf("appending to the write-ahead log segment %s: %w", l.f.Name(), err)
}

// rotate syncs and closes the open segment and opens (creating) seg.
func (l *wal) rotate(seg uint64) error {
	if l.f != nil {
		if err := l.closeFile(); err != nil {
			return err
		}
	}
	f, err := os.OpenFile(l.segPath(seg), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("creating a write-ahead log segment: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("reading a write-ahead log segment's size: %w", err)
	}
	if l.mode == WALFsync {
		// The new file's directory entry must be as durable as its rows.
		if err := syncDir(l.dir); err != nil {
			f.Close()
			os.Remove(f.Name())
			return err
		}
	}
	l.f, l.fseg, l.fsize = f, seg, fi.Size()
	return nil
}

func (l *wal) closeFile() error {
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f, l.fseg, l.fsize = nil, 0, 0
	return err
}

func (l *wal) segPath(seg uint64) string {
	return filepath.Join(l.dir, segmentName(seg))
}

// close stops the WAL once what is pending is written; segments with
// unreleased records (rows Close lost) stay for the next start.
func (l *wal) close() error {
	l.mu.Lock()
	l.closing = true
	l.room.Broadcast()
	l.mu.Unlock()
	l.wake()
	<-l.done
	return l.closed
}
