package pg

import "github.com/jackc/pgx/v5/pgxpool"

// Pool is the store's connection pool.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }
