package calllog

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

const segmentSuffix = ".wal"

func segmentName(seg uint64) string {
	return fmt.Sprintf("%016x%s", seg, segmentSuffix)
}

// listSegments returns the segment numbers in dir, oldest first; files
// that are not segments are left alone.
func listSegments(dir string) ([]uint64, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("listing the write-ahead log: %w", err)
	}
	var segs []uint64
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), segmentSuffix)
		if !ok || e.IsDir() {
			continue
		}
		if s, err := strconv.ParseUint(name, 16, 64); err == nil && s > 0 {
			segs = append(segs, s)
		}
	}
	slices.Sort(segs)
	return segs, nil
}

// readSegment reads the records of a segment: the rows of its valid part
// and that part's length. A torn or damaged record ends the valid part
// (bad says why); whatever follows it is not read. err is an I/O error.
func readSegment(r io.Reader) (rows []Row, valid int64, bad, err error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var buf []byte
	for {
		row, n, b, rerr := readRecord(br, buf)
		buf = b
		switch {
		case rerr == io.EOF:
			return rows, valid, nil, nil
		case errors.Is(rerr, errBadRecord):
			return rows, valid, rerr, nil
		case rerr != nil:
			return rows, valid, nil, rerr
		}
		rows = append(rows, row)
		valid += n
	}
}

// recoverWAL moves the rows of the segments an earlier run left in dir
// into sp (each segment's with one fsynced append), then removes the
// segments. It returns the rows moved and the next free segment number.
// A row that Postgres already holds is harmless: the replay skips it and
// does not count its cost again (ledger.go).
func recoverWAL(dir string, sp *spool, log *slog.Logger) (moved int, next uint64, err error) {
	segs, err := listSegments(dir)
	if err != nil {
		return 0, 0, err
	}
	next = 1
	if len(segs) > 0 {
		next = segs[len(segs)-1] + 1
	}
	for _, s := range segs {
		path := filepath.Join(dir, segmentName(s))
		f, err := os.Open(path)
		if err != nil {
			return moved, next, fmt.Errorf("opening the write-ahead log segment: %w", err)
		}
		rows, valid, bad, err := readSegment(f)
		f.Close()
		if err != nil {
			return moved, next, fmt.Errorf("reading the write-ahead log segment %s: %w", path, err)
		}
		if bad != nil {
			log.Warn("ignored the torn or damaged end of a write-ahead log segment (a crash during an append)",
				"path", path, "valid_bytes", valid, "reason", bad)
		}
		for len(rows) > 0 {
			n := min(len(rows), 1000)
			if err := sp.append(rows[:n]); err != nil {
				return moved, next, err
			}
			moved += n
			rows = rows[n:]
		}
		if err := os.Remove(path); err != nil {
			return moved, next, fmt.Errorf("removing a recovered write-ahead log segment: %w", err)
		}
	}
	if len(segs) > 0 {
		// A removed segment that came back after a power loss would only
		// be replayed again, harmlessly; syncing keeps that rare.
		if err := syncDir(dir); err != nil {
			return moved, next, err
		}
	}
	return moved, next, nil
}
