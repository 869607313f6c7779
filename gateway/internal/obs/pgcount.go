package obs

import (
	"context"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// StatementCounter is the pgx tracer of a pool: it counts the statements
// the pool runs (a batch's each, a COPY as one) for
// tollgate_postgres_statements_total, and hands every trace call on to
// Next, an optional tracer of the caller's (WithPGTracer), as if it were
// the pool's own.
type StatementCounter struct {
	n atomic.Int64
	// Next is the caller's tracer (nil: none); set it before the pool
	// is opened.
	Next pgx.QueryTracer
}

// Count is the number of statements counted so far.
func (c *StatementCounter) Count() int64 { return c.n.Load() }

var (
	_ pgx.QueryTracer       = (*StatementCounter)(nil)
	_ pgx.BatchTracer       = (*StatementCounter)(nil)
	_ pgx.CopyFromTracer    = (*StatementCounter)(nil)
	_ pgx.PrepareTracer     = (*StatementCounter)(nil)
	_ pgx.ConnectTracer     = (*StatementCounter)(nil)
	_ pgxpool.AcquireTracer = (*StatementCounter)(nil)
	_ pgxpool.ReleaseTracer = (*StatementCounter)(nil)
)

func (c *StatementCounter) TraceQueryStart(ctx context.Context, conn *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	if c.Next != nil {
		return c.Next.TraceQueryStart(ctx, conn, d)
	}
	return ctx
}

func (c *StatementCounter) TraceQueryEnd(ctx context.Context, conn *pgx.Conn, d pgx.TraceQueryEndData) {
	if c.Next != nil {
		c.Next.TraceQueryEnd(ctx, conn, d)
	}
}

func (c *StatementCounter) TraceBatchStart(ctx context.Context, conn *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	if t, ok := c.Next.(pgx.BatchTracer); ok {
		return t.TraceBatchStart(ctx, conn, d)
	}
	return ctx
}

func (c *StatementCounter) TraceBatchQuery(ctx context.Context, conn *pgx.Conn, d pgx.TraceBatchQueryData) {
	c.n.Add(1)
	if t, ok := c.Next.(pgx.BatchTracer); ok {
		t.TraceBatchQuery(ctx, conn, d)
	}
}

func (c *StatementCounter) TraceBatchEnd(ctx context.Context, conn *pgx.Conn, d pgx.TraceBatchEndData) {
	if t, ok := c.Next.(pgx.BatchTracer); ok {
		t.TraceBatchEnd(ctx, conn, d)
	}
}

func (c *StatementCounter) TraceCopyFromStart(ctx context.Context, conn *pgx.Conn, d pgx.TraceCopyFromStartData) context.Context {
	c.n.Add(1)
	if t, ok := c.Next.(pgx.CopyFromTracer); ok {
		return t.TraceCopyFromStart(ctx, conn, d)
	}
	return ctx
}

func (c *StatementCounter) TraceCopyFromEnd(ctx context.Context, conn *pgx.Conn, d pgx.TraceCopyFromEndData) {
	if t, ok := c.Next.(pgx.CopyFromTracer); ok {
		t.TraceCopyFromEnd(ctx, conn, d)
	}
}

func (c *StatementCounter) TracePrepareStart(ctx context.Context, conn *pgx.Conn, d pgx.TracePrepareStartData) context.Context {
	if t, ok := c.Next.(pgx.PrepareTracer); ok {
		return t.TracePrepareStart(ctx, conn, d)
	}
	return ctx
}

func (c *StatementCounter) TracePrepareEnd(ctx context.Context, conn *pgx.Conn, d pgx.TracePrepareEndData) {
	if t, ok := c.Next.(pgx.PrepareTracer); ok {
		t.TracePrepareEnd(ctx, conn, d)
	}
}

func (c *StatementCounter) TraceConnectStart(ctx context.Context, d pgx.TraceConnectStartData) context.Context {
	if t, ok := c.Next.(pgx.ConnectTracer); ok {
		return t.TraceConnectStart(ctx, d)
	}
	return ctx
}

func (c *StatementCounter) TraceConnectEnd(ctx context.Context, d pgx.TraceConnectEndData) {
	if t, ok := c.Next.(pgx.ConnectTracer); ok {
		t.TraceConnectEnd(ctx, d)
	}
}

func (c *StatementCounter) TraceAcquireStart(ctx context.Context, p *pgxpool.Pool, d pgxpool.TraceAcquireStartData) context.Context {
	if t, ok := c.Next.(pgxpool.AcquireTracer); ok {
		return t.TraceAcquireStart(ctx, p, d)
	}
	return ctx
}

func (c *StatementCounter) TraceAcquireEnd(ctx context.Context, p *pgxpool.Pool, d pgxpool.TraceAcquireEndData) {
	if t, ok := c.Next.(pgxpool.AcquireTracer); ok {
		t.TraceAcquireEnd(ctx, p, d)
	}
}

func (c *StatementCounter) TraceRelease(p *pgxpool.Pool, d pgxpool.TraceReleaseData) {
	if t, ok := c.Next.(pgxpool.ReleaseTracer); ok {
		t.TraceRelease(p, d)
	}
}
