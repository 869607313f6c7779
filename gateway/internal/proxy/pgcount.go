package proxy

import (
	"context"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// statementCounter is the pgx tracer of a pool: it counts the statements
// the pool runs (a batch's each, a COPY as one) for
// tollgate_postgres_statements_total, and hands every trace call on to
// next, an optional tracer of the caller's (WithPGTracer), as if it were
// the pool's own.
type statementCounter struct {
	n    atomic.Int64
	next pgx.QueryTracer // nil: none
}

var (
	_ pgx.QueryTracer       = (*statementCounter)(nil)
	_ pgx.BatchTracer       = (*statementCounter)(nil)
	_ pgx.CopyFromTracer    = (*statementCounter)(nil)
	_ pgx.PrepareTracer     = (*statementCounter)(nil)
	_ pgx.ConnectTracer     = (*statementCounter)(nil)
	_ pgxpool.AcquireTracer = (*statementCounter)(nil)
	_ pgxpool.ReleaseTracer = (*statementCounter)(nil)
)

func (c *statementCounter) TraceQueryStart(ctx context.Context, conn *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	if c.next != nil {
		return c.next.TraceQueryStart(ctx, conn, d)
	}
	return ctx
}

func (c *statementCounter) TraceQueryEnd(ctx context.Context, conn *pgx.Conn, d pgx.TraceQueryEndData) {
	if c.next != nil {
		c.next.TraceQueryEnd(ctx, conn, d)
	}
}

func (c *statementCounter) TraceBatchStart(ctx context.Context, conn *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	if t, ok := c.next.(pgx.BatchTracer); ok {
		return t.TraceBatchStart(ctx, conn, d)
	}
	return ctx
}

func (c *statementCounter) TraceBatchQuery(ctx context.Context, conn *pgx.Conn, d pgx.TraceBatchQueryData) {
	c.n.Add(1)
	if t, ok := c.next.(pgx.BatchTracer); ok {
		t.TraceBatchQuery(ctx, conn, d)
	}
}

func (c *statementCounter) TraceBatchEnd(ctx context.Context, conn *pgx.Conn, d pgx.TraceBatchEndData) {
	if t, ok := c.next.(pgx.BatchTracer); ok {
		t.TraceBatchEnd(ctx, conn, d)
	}
}

func (c *statementCounter) TraceCopyFromStart(ctx context.Context, conn *pgx.Conn, d pgx.TraceCopyFromStartData) context.Context {
	c.n.Add(1)
	if t, ok := c.next.(pgx.CopyFromTracer); ok {
		return t.TraceCopyFromStart(ctx, conn, d)
	}
	return ctx
}

func (c *statementCounter) TraceCopyFromEnd(ctx context.Context, conn *pgx.Conn, d pgx.TraceCopyFromEndData) {
	if t, ok := c.next.(pgx.CopyFromTracer); ok {
		t.TraceCopyFromEnd(ctx, conn, d)
	}
}

func (c *statementCounter) TracePrepareStart(ctx context.Context, conn *pgx.Conn, d pgx.TracePrepareStartData) context.Context {
	if t, ok := c.next.(pgx.PrepareTracer); ok {
		return t.TracePrepareStart(ctx, conn, d)
	}
	return ctx
}

func (c *statementCounter) TracePrepareEnd(ctx context.Context, conn *pgx.Conn, d pgx.TracePrepareEndData) {
	if t, ok := c.next.(pgx.PrepareTracer); ok {
		t.TracePrepareEnd(ctx, conn, d)
	}
}

func (c *statementCounter) TraceConnectStart(ctx context.Context, d pgx.TraceConnectStartData) context.Context {
	if t, ok := c.next.(pgx.ConnectTracer); ok {
		return t.TraceConnectStart(ctx, d)
	}
	return ctx
}

func (c *statementCounter) TraceConnectEnd(ctx context.Context, d pgx.TraceConnectEndData) {
	if t, ok := c.next.(pgx.ConnectTracer); ok {
		t.TraceConnectEnd(ctx, d)
	}
}

func (c *statementCounter) TraceAcquireStart(ctx context.Context, p *pgxpool.Pool, d pgxpool.TraceAcquireStartData) context.Context {
	if t, ok := c.next.(pgxpool.AcquireTracer); ok {
		return t.TraceAcquireStart(ctx, p, d)
	}
	return ctx
}

func (c *statementCounter) TraceAcquireEnd(ctx context.Context, p *pgxpool.Pool, d pgxpool.TraceAcquireEndData) {
	if t, ok := c.next.(pgxpool.AcquireTracer); ok {
		t.TraceAcquireEnd(ctx, p, d)
	}
}

func (c *statementCounter) TraceRelease(p *pgxpool.Pool, d pgxpool.TraceReleaseData) {
	if t, ok := c.next.(pgxpool.ReleaseTracer); ok {
		t.TraceRelease(p, d)
	}
}
