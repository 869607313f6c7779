package calllog

import (
	"context"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestClassify: only errors Postgres reports about the data blame the
// rows; the rest keep them for later.
func TestClassify(t *testing.T) {
	t.Parallel()
	pgErr := func(code, constraint string) error {
		return fmt.Errorf("batch: %w", &pgconn.PgError{Code: code, ConstraintName: constraint})
	}
	tests := []struct {
		name string
		err  error
		want fault
	}{
		{"no partition", pgErr("23514", ""), faultPartition},
		{"check constraint", pgErr("23514", "cap"), faultRow},
		{"foreign key (unknown tenant)", pgErr("23503", "spend_month_tenant_id_fkey"), faultRow},
		{"invalid byte sequence", pgErr("22021", ""), faultRow},
		{"index row too large", pgErr("54000", ""), faultRow},
		{"deadlock", pgErr("40P01", ""), faultRetry},
		{"serialization", pgErr("40001", ""), faultRetry},
		{"admin shutdown", pgErr("57P01", ""), faultUnavailable},
		{"starting up", pgErr("57P03", ""), faultUnavailable},
		{"too many connections", pgErr("53300", ""), faultUnavailable},
		{"disk full", pgErr("53100", ""), faultUnavailable},
		{"undefined table", pgErr("42P01", ""), faultUnavailable},
		{"connection refused", &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, faultUnavailable},
		{"unexpected EOF", fmt.Errorf("receive: %w", io.ErrUnexpectedEOF), faultUnavailable},
		{"timeout", context.DeadlineExceeded, faultUnavailable},
		{"malformed code", pgErr("2", ""), faultUnavailable},
	}
	for _, tt := range tests {
		if got := classify(tt.err); got != tt.want {
			t.Errorf("%s: classify = %d, want %d", tt.name, got, tt.want)
		}
	}
}

// TestTxSizeBuckets: transactions are counted by powers of two of rows.
func TestTxSizeBuckets(t *testing.T) {
	t.Parallel()
	var c counters
	for _, n := range []int{1, 2, 3, 4, 7, 8, 1023, 1024, 5000} {
		c.committed(n, int64(n))
	}
	want := [TxSizeBuckets]int64{1, 2, 2, 1, 0, 0, 0, 0, 0, 1, 2}
	var got [TxSizeBuckets]int64
	for i := range got {
		got[i] = c.txSizes[i].Load()
	}
	if got != want || c.maxTxRows.Load() != 5000 || c.transactions.Load() != 9 {
		t.Errorf("buckets %v max %d tx %d; want %v, 5000, 9", got, c.maxTxRows.Load(), c.transactions.Load(), want)
	}
}

// TestStoredRowsInANewBatch: a batch first tried without ON CONFLICT that
// meets a row Postgres holds already is written again skipping it: the
// new rows are stored, each cost counted once, in one committed
// transaction, and the duplicates counted.
func TestStoredRowsInANewBatch(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		stored     []Row // committed before the batch
		batch      []Row
		rows, dups int64
		acme       int64 // acme's counter afterwards
	}{
		{"no row stored", nil, []Row{row("a", "acme", 1), row("b", "acme", 2)}, 2, 0, 3},
		{"one stored among new", []Row{row("a", "acme", 1)},
			[]Row{row("x", "acme", 10), row("a", "acme", 1), row("y", "acme", 100)}, 3, 1, 111},
		{"all stored", []Row{row("a", "acme", 1), row("b", "acme", 2)},
			[]Row{row("a", "acme", 1), row("b", "acme", 2)}, 2, 2, 3},
		{"twice in the batch", nil, []Row{row("a", "acme", 5), row("a", "acme", 5), row("b", "acme", 7)}, 3, 1, 12},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			pool := newDB(t)
			if len(tt.stored) > 0 {
				if _, err := commitBatch(t.Context(), pool, tt.stored, insertSQL); err != nil {
					t.Fatal(err)
				}
			}
			w := newWriter(t, pool, Options{})
			if err := w.commit(t.Context(), tt.batch); err != nil {
				t.Fatalf("commit: %v", err)
			}
			s := w.Stats()
			if s.Rows != tt.rows || s.Duplicates != tt.dups || s.Transactions != 1 {
				t.Errorf("rows/duplicates/transactions %d/%d/%d, want %d/%d/1", s.Rows, s.Duplicates, s.Transactions, tt.rows, tt.dups)
			}
			checkLedger(t, pool, thisMonth, map[string]int64{"acme": tt.acme})
		})
	}
}
