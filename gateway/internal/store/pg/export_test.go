package pg

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"
)

// FillPool opens n of the pool's connections at once and hands them back,
// so that the pool holds n idle connections that have just been used.
func (s *Store) FillPool(ctx context.Context, n int) error {
	conns := make([]*pgxpool.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Release()
		}
	}()
	for range n {
		c, err := s.pool.Acquire(ctx)
		if err != nil {
			return err
		}
		conns = append(conns, c)
	}
	return nil
}
