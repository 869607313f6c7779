-- The response cache's part in each request. cache: NULL when no cache
-- took part, 'hit' when the reply was served from the cache, 'miss' when
-- the cache was consulted and the reply came from the upstream, 'bypass'
-- when the client or a policy said not to use it. saved_micros: for a hit,
-- what the stored reply would have cost at the price in force when it was
-- served, in USD micros (the spend the hit avoided); 0 for every other row.
--
-- call_log is partitioned by month. Columns and constraints added to the
-- parent apply to every partition: the existing ones get them here, the
-- ones tollgate_ensure_call_log_partition creates later copy the parent.
--
-- Cost on a large call_log: adding the columns rewrites nothing (a NULL
-- column and a constant default live in the catalog). The CHECK
-- constraints are added NOT VALID, so Postgres does not read the existing
-- partitions to verify them (a full read of each, under the ALTER's lock,
-- which holds every write back: 0.1-0.15 s per million rows, measured on a
-- shared 2-core machine). They are enforced on every row inserted or
-- updated from now on, in old and new partitions alike; and every row that
-- exists when they are added holds cache NULL and saved_micros 0, which
-- satisfy them, so skipping the verification skips nothing. ALTER TABLE
-- call_log VALIDATE CONSTRAINT call_log_cache_check (and the other two)
-- would mark them validated, with a read that does not hold writes back.

-- A violation names its constraint, which is how the gateway's writer tells
-- a rejected row from a missing partition (both SQLSTATE 23514). The writer
-- refuses such rows itself (calllog.ErrInvalidRow); the constraints hold
-- for every other writer, and for a spool replayed from disk.
--
-- The partial index holds only the hits (tenant, time, what each saved), so
-- that a tenant's or the fleet's savings over a window is an index-only
-- read, and costs the insert of any other row nothing. Building it reads
-- every partition (0.15-0.25 s per million rows measured, writes held back
-- meanwhile), without CONCURRENTLY since goose runs each migration in a
-- transaction: on a large call_log, build it by hand with CREATE INDEX
-- CONCURRENTLY on each partition first, or migrate in a quiet hour.

-- +goose Up
ALTER TABLE call_log
    ADD COLUMN cache text NULL,
    ADD COLUMN saved_micros bigint NOT NULL DEFAULT 0,
    ADD CONSTRAINT call_log_cache_check
        CHECK (cache IS NULL OR cache IN ('hit', 'miss', 'bypass')) NOT VALID,
    ADD CONSTRAINT call_log_saved_micros_check CHECK (saved_micros >= 0) NOT VALID,
    -- Only a hit saves anything. (cache = 'hit' would be NULL, and pass,
    -- for a row no cache took part in.)
    ADD CONSTRAINT call_log_saved_micros_hit_check
        CHECK (saved_micros = 0 OR cache IS NOT DISTINCT FROM 'hit') NOT VALID;

CREATE INDEX call_log_cache_hit_idx ON call_log (tenant_id, started_at) INCLUDE (saved_micros)
    WHERE cache = 'hit';

-- +goose Down
-- Dropping the columns drops their constraints and the index with them.
ALTER TABLE call_log
    DROP COLUMN saved_micros,
    DROP COLUMN cache;
