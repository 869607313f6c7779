package calllog

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/openai"
)

// Spool file format: a sequence of records, each
//
//	[4]byte  payload length n, big-endian
//	[4]byte  CRC-32C (Castagnoli) of the payload, big-endian
//	[n]byte  payload: spoolRecord as JSON
//
// Records are only appended, a batch with one write(2) and one fsync. A
// crash in the middle of an append leaves a record whose length or checksum
// does not match: the file is valid up to it, and openSpool cuts it off.
//
// The payload has no version number: its JSON object is the version. A
// field added later is optional, and its absence means what the rows
// written before it meant (a record without "cache" and "saved" is a row
// no cache took part in), so the spools and write-ahead logs an older
// build left behind replay after an upgrade (TestReplayOldFormat). An
// older build reading a newer record ignores the fields it does not know.

// SpoolFileName is the spool's file name inside Options.SpoolDir.
const SpoolFileName = "calllog.spool"

// lockFileName is the file whose flock marks SpoolDir as taken by a Writer.
const lockFileName = "calllog.lock"

const (
	recordHeaderSize = 8
	// maxRecordSize bounds a payload: seven text fields of at most
	// maxFieldBytes (JSON may escape each byte to six) and a few numbers fit.
	maxRecordSize = 64 << 10
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// errBadRecord means the bytes at the read position are not a whole, intact
// record: a torn tail or a damaged file.
var errBadRecord = errors.New("bad spool record")

// spoolRecord is Row as stored in the spool. Its JSON names are the file
// format: do not rename them.
type spoolRecord struct {
	RequestID        string    `json:"rid"`
	TenantID         string    `json:"tid"`
	KeyID            string    `json:"kid,omitempty"`
	Model            string    `json:"model"`
	Upstream         string    `json:"up,omitempty"`
	Status           int       `json:"st"`
	StartedAt        time.Time `json:"at"`
	FirstByteNanos   int64     `json:"fb"`
	TotalNanos       int64     `json:"tot"`
	PromptTokens     int64     `json:"pt"`
	CompletionTokens int64     `json:"ct"`
	CostMicros       int64     `json:"cost"`
	GuardAction      string    `json:"ga,omitempty"`
	ReplyBytes       *int64    `json:"rb,omitempty"`
	Attempts         int       `json:"att"`
	EndUser          string    `json:"eu,omitempty"`
	Kinds            *[7]int64 `json:"kinds,omitempty"` // TokenKinds; absent: not reported
	Cache            string    `json:"cache,omitempty"` // absent: no cache took part
	SavedMicros      int64     `json:"saved,omitempty"` // absent: 0
}

func spoolKinds(k *TokenKinds) *[7]int64 {
	if !k.Reported {
		return nil
	}
	c := k.counts()
	return &c
}

// appendRecord appends r's record to dst. The payload is spoolRecord's
// JSON written field by field, in its declared order and with its
// omitempty rules: encoding/json's reflection took ~4 µs a row on the
// reply's path, a tenth of what the call log costs a request. readRecord
// reads it with encoding/json, and TestAppendRecordIsMarshal and
// FuzzAppendRecord hold the two to the same values.
func appendRecord(dst []byte, r *Row) []byte {
	at := r.StartedAt.UTC()
	if y := at.Year(); y < 0 || y > 9999 {
		// Outside what RFC 3339 (and time.Time's JSON) can write.
		return marshalRecord(dst, r)
	}
	head := len(dst)
	dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0)
	start := len(dst)
	dst = append(dst, `{"rid":`...)
	dst = openai.AppendJSONString(dst, r.RequestID)
	dst = append(dst, `,"tid":`...)
	dst = openai.AppendJSONString(dst, r.TenantID)
	dst = appendOptString(dst, `,"kid":`, r.KeyID)
	dst = append(dst, `,"model":`...)
	dst = openai.AppendJSONString(dst, r.Model)
	dst = appendOptString(dst, `,"up":`, r.Upstream)
	dst = append(dst, `,"st":`...)
	dst = strconv.AppendInt(dst, int64(r.Status), 10)
	dst = append(dst, `,"at":"`...)
	dst = at.AppendFormat(dst, time.RFC3339Nano)
	dst = append(dst, `","fb":`...)
	dst = strconv.AppendInt(dst, int64(r.FirstByte), 10)
	dst = append(dst, `,"tot":`...)
	dst = strconv.AppendInt(dst, int64(r.Total), 10)
	dst = append(dst, `,"pt":`...)
	dst = strconv.AppendInt(dst, r.PromptTokens, 10)
	dst = append(dst, `,"ct":`...)
	dst = strconv.AppendInt(dst, r.CompletionTokens, 10)
	dst = append(dst, `,"cost":`...)
	dst = strconv.AppendInt(dst, r.CostMicros, 10)
	dst = appendOptString(dst, `,"ga":`, r.GuardAction)
	if r.ReplyBytes >= 0 { // optInt
		dst = append(dst, `,"rb":`...)
		dst = strconv.AppendInt(dst, r.ReplyBytes, 10)
	}
	dst = append(dst, `,"att":`...)
	dst = strconv.AppendInt(dst, int64(r.Attempts), 10)
	dst = appendOptString(dst, `,"eu":`, r.EndUser)
	if r.Kinds.Reported { // spoolKinds
		dst = append(dst, `,"kinds":[`...)
		for i, n := range r.Kinds.counts() {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = strconv.AppendInt(dst, n, 10)
		}
		dst = append(dst, ']')
	}
	dst = appendOptString(dst, `,"cache":`, r.Cache)
	if r.SavedMicros != 0 {
		dst = append(dst, `,"saved":`...)
		dst = strconv.AppendInt(dst, r.SavedMicros, 10)
	}
	dst = append(dst, '}')
	payload := dst[start:]
	binary.BigEndian.PutUint32(dst[head:], uint32(len(payload)))
	binary.BigEndian.PutUint32(dst[head+4:], crc32.Checksum(payload, crcTable))
	return dst
}

// appendOptString appends name and s as a JSON string unless s is empty
// (omitempty).
func appendOptString(dst []byte, name, s string) []byte {
	if s == "" {
		return dst
	}
	dst = append(dst, name...)
	return openai.AppendJSONString(dst, s)
}

// marshalRecord is appendRecord by encoding/json: the reference the tests
// hold appendRecord to, and the encoding of a start time RFC 3339 cannot
// write (which encoding/json refuses).
func marshalRecord(dst []byte, r *Row) []byte {
	payload, err := json.Marshal(spoolRecord{
		RequestID: r.RequestID, TenantID: r.TenantID, KeyID: r.KeyID,
		Model: r.Model, Upstream: r.Upstream, Status: r.Status,
		StartedAt: r.StartedAt.UTC(), FirstByteNanos: int64(r.FirstByte),
		TotalNanos: int64(r.Total), PromptTokens: r.PromptTokens,
		CompletionTokens: r.CompletionTokens, CostMicros: r.CostMicros,
		GuardAction: r.GuardAction, Attempts: r.Attempts, ReplyBytes: optInt(r.ReplyBytes),
		EndUser: r.EndUser,
		Kinds:   spoolKinds(&r.Kinds),
		Cache:   r.Cache, SavedMicros: r.SavedMicros,
	})
	if err != nil {
		// Only strings, integers and a time: it fails only for a year
		// outside 0–9999, which no clock gives.
		panic(fmt.Sprintf("calllog: encoding a spool record: %v", err))
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(payload)))
	dst = binary.BigEndian.AppendUint32(dst, crc32.Checksum(payload, crcTable))
	return append(dst, payload...)
}

// readRecord reads one record from br. It returns io.EOF at a clean end,
// and errBadRecord (wrapped) for a torn or damaged record.
func readRecord(br *bufio.Reader, buf []byte) (Row, int64, []byte, error) {
	var hdr [recordHeaderSize]byte
	n, err := io.ReadFull(br, hdr[:])
	switch {
	case err == io.EOF:
		return Row{}, 0, buf, io.EOF
	case err == io.ErrUnexpectedEOF:
		return Row{}, 0, buf, fmt.Errorf("%w: header of %d bytes", errBadRecord, n)
	case err != nil:
		return Row{}, 0, buf, err // an I/O error, not a verdict on the file
	}
	size := binary.BigEndian.Uint32(hdr[:4])
	if size > maxRecordSize {
		return Row{}, 0, buf, fmt.Errorf("%w: length %d", errBadRecord, size)
	}
	if cap(buf) < int(size) {
		buf = make([]byte, size)
	}
	buf = buf[:size]
	if n, err := io.ReadFull(br, buf); err == io.EOF || err == io.ErrUnexpectedEOF {
		return Row{}, 0, buf, fmt.Errorf("%w: %d of %d payload bytes", errBadRecord, n, size)
	} else if err != nil {
		return Row{}, 0, buf, err
	}
	if crc32.Checksum(buf, crcTable) != binary.BigEndian.Uint32(hdr[4:]) {
		return Row{}, 0, buf, fmt.Errorf("%w: checksum mismatch", errBadRecord)
	}
	var rec spoolRecord
	if err := json.Unmarshal(buf, &rec); err != nil {
		return Row{}, 0, buf, fmt.Errorf("%w: %v", errBadRecord, err)
	}
	r := Row{
		RequestID: rec.RequestID, TenantID: rec.TenantID, KeyID: rec.KeyID,
		Model: rec.Model, Upstream: rec.Upstream, Status: rec.Status,
		StartedAt: rec.StartedAt.UTC(), FirstByte: time.Duration(rec.FirstByteNanos),
		Total: time.Duration(rec.TotalNanos), PromptTokens: rec.PromptTokens,
		CompletionTokens: rec.CompletionTokens, CostMicros: rec.CostMicros,
		GuardAction: rec.GuardAction, Attempts: rec.Attempts, ReplyBytes: fromOptInt(rec.ReplyBytes),
		EndUser: rec.EndUser, Cache: rec.Cache, SavedMicros: rec.SavedMicros,
	}
	if rec.Kinds != nil {
		r.Kinds = kindsOf(*rec.Kinds)
	}
	return r, recordHeaderSize + int64(size), buf, nil
}

// spool is the append-only file of rows waiting for Postgres. It is used by
// one goroutine at a time (the Writer's loop, or New before starting it).
type spool struct {
	path string
	f    *os.File // O_APPEND
	size int64    // bytes of whole records
	buf  []byte   // encoding buffer, reused

	// What openSpool cut off the end of the file, for New to log.
	cut       int64
	cutReason error
}

// openSpool opens (creating if missing) the spool in dir. A bad record
// (a torn tail from a crash mid-append) ends the valid part: the file is
// truncated to the records before it, and cut and cutReason say how many
// bytes were cut off and why.
func openSpool(dir string) (*spool, error) {
	path := filepath.Join(dir, SpoolFileName)
	_, statErr := os.Stat(path)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening the spool: %w", err)
	}
	s := &spool{path: path, f: f}
	if err := s.check(errors.Is(statErr, os.ErrNotExist)); err != nil {
		f.Close()
		return nil, err
	}
	return s, nil
}

// check makes a newly created file's directory entry durable, then finds
// the valid records and cuts off what follows them.
func (s *spool) check(created bool) error {
	if created {
		if err := syncDir(filepath.Dir(s.path)); err != nil {
			return err
		}
	}
	fi, err := s.f.Stat()
	if err != nil {
		return fmt.Errorf("reading the spool's size: %w", err)
	}
	s.size = fi.Size()
	br := bufio.NewReaderSize(io.NewSectionReader(s.f, 0, s.size), 64<<10)
	var valid int64
	var buf []byte
	for {
		_, n, b, err := readRecord(br, buf)
		buf = b
		switch {
		case err == io.EOF:
			return nil
		case errors.Is(err, errBadRecord):
			s.cut, s.cutReason = s.size-valid, err
			return s.truncate(valid)
		case err != nil:
			return fmt.Errorf("reading the spool %s: %w", s.path, err)
		}
		valid += n
	}
}

// append adds rows with one write and one fsync. On error the file is cut
// back to its previous size, so a failed append leaves no partial record
// behind that later appends would follow.
func (s *spool) append(rows []Row) error {
	s.buf = s.buf[:0]
	for i := range rows {
		s.buf = appendRecord(s.buf, &rows[i])
	}
	_, err := s.f.Write(s.buf)
	if err == nil {
		err = s.f.Sync()
	}
	if err != nil {
		if terr := s.truncate(s.size); terr != nil {
			err = errors.Join(err, terr)
		}
		return fmt.Errorf("appending %d rows to the spool %s: %w", len(rows), s.path, err)
	}
	s.size += int64(len(s.buf))
	if cap(s.buf) > 1<<20 {
		s.buf = nil // do not keep a huge buffer after a large batch
	}
	return nil
}

// read returns up to max rows from byte offset off, and the offset after
// each. It stops early at a bad record, returning the rows before it and
// the error.
func (s *spool) read(off int64, max int) ([]Row, []int64, error) {
	if off >= s.size {
		return nil, nil, nil
	}
	br := bufio.NewReaderSize(io.NewSectionReader(s.f, off, s.size-off), 64<<10)
	var rows []Row
	var ends []int64
	var buf []byte
	for len(rows) < max {
		r, n, b, err := readRecord(br, buf)
		buf = b
		if err == io.EOF {
			break
		}
		if err != nil {
			return rows, ends, fmt.Errorf("spool %s at byte %d: %w", s.path, off, err)
		}
		off += n
		rows = append(rows, r)
		ends = append(ends, off)
	}
	return rows, ends, nil
}

// truncate cuts the file to size bytes and syncs it.
func (s *spool) truncate(size int64) error {
	if err := s.f.Truncate(size); err != nil {
		return fmt.Errorf("truncating the spool %s: %w", s.path, err)
	}
	if err := s.f.Sync(); err != nil {
		return fmt.Errorf("syncing the spool %s: %w", s.path, err)
	}
	s.size = size
	return nil
}

// close syncs and closes the file, and removes it if it is empty.
func (s *spool) close() error {
	err := s.f.Sync()
	if cerr := s.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("closing the spool %s: %w", s.path, err)
	}
	if s.size == 0 {
		if err := os.Remove(s.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("removing the empty spool: %w", err)
		}
	}
	return nil
}

// syncDir fsyncs a directory, making the entries created in it durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("opening the spool directory: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("syncing the spool directory %s: %w", dir, err)
	}
	return nil
}

// optInt keeps "unknown" (< 0) out of the spool record.
func optInt(v int64) *int64 {
	if v < 0 {
		return nil
	}
	return &v
}

func fromOptInt(v *int64) int64 {
	if v == nil {
		return -1
	}
	return *v
}
