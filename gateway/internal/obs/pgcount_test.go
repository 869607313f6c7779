package obs

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// innerTracer is a caller's tracer with the query and acquire hooks only.
type innerTracer struct{ queries, acquires int }

func (t *innerTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	t.queries++
	return ctx
}
func (t *innerTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (t *innerTracer) TraceAcquireStart(ctx context.Context, _ *pgxpool.Pool, _ pgxpool.TraceAcquireStartData) context.Context {
	t.acquires++
	return ctx
}
func (t *innerTracer) TraceAcquireEnd(context.Context, *pgxpool.Pool, pgxpool.TraceAcquireEndData) {}

// The statement counter counts queries, each statement of a batch and a
// COPY, and hands the calls the caller's tracer implements on to it.
func TestStatementCounter(t *testing.T) {
	for _, next := range []*innerTracer{nil, {}} {
		c := &StatementCounter{}
		if next != nil {
			c.Next = next
		}
		ctx := context.Background()
		c.TraceQueryEnd(c.TraceQueryStart(ctx, nil, pgx.TraceQueryStartData{SQL: "SELECT 1"}), nil, pgx.TraceQueryEndData{})
		ctx = c.TraceBatchStart(ctx, nil, pgx.TraceBatchStartData{})
		c.TraceBatchQuery(ctx, nil, pgx.TraceBatchQueryData{})
		c.TraceBatchQuery(ctx, nil, pgx.TraceBatchQueryData{})
		c.TraceBatchEnd(ctx, nil, pgx.TraceBatchEndData{})
		c.TraceCopyFromEnd(c.TraceCopyFromStart(ctx, nil, pgx.TraceCopyFromStartData{}), nil, pgx.TraceCopyFromEndData{})
		c.TraceAcquireEnd(c.TraceAcquireStart(ctx, nil, pgxpool.TraceAcquireStartData{}), nil, pgxpool.TraceAcquireEndData{})
		c.TracePrepareEnd(c.TracePrepareStart(ctx, nil, pgx.TracePrepareStartData{}), nil, pgx.TracePrepareEndData{})
		c.TraceConnectEnd(c.TraceConnectStart(ctx, pgx.TraceConnectStartData{}), pgx.TraceConnectEndData{})
		c.TraceRelease(nil, pgxpool.TraceReleaseData{})
		if got := c.Count(); got != 4 {
			t.Errorf("counted %d statements, want 4", got)
		}
		if next != nil && (next.queries != 1 || next.acquires != 1) {
			t.Errorf("the caller's tracer saw %d queries, %d acquires; want 1, 1", next.queries, next.acquires)
		}
	}
}
