-- One row per proxied request, partitioned by month of started_at (UTC).
--
-- Partitions are named call_log_YYYY_MM and created by
-- tollgate_ensure_call_log_partition(month): this migration creates the
-- current and the next month's; the gateway (and every `tollgate migrate`)
-- calls the function ahead of each month. There is no default partition: a
-- row for a month without a partition fails to insert (SQLSTATE 23514, "no
-- partition of relation found"), which the writer answers by ensuring the
-- partition and retrying. Old months are dropped with DROP TABLE call_log_YYYY_MM
-- (or detached first: ALTER TABLE call_log DETACH PARTITION ...).
--
-- No foreign keys: the log is written on every request and must outlive the
-- keys and tenants it names.

-- +goose Up
CREATE TABLE call_log (
    request_id        text NOT NULL,
    tenant_id         text NOT NULL,
    key_id            text,
    model             text NOT NULL,
    upstream          text,
    status            integer NOT NULL,
    started_at        timestamptz NOT NULL,
    first_byte_ms     bigint,
    total_ms          bigint,
    prompt_tokens     bigint,
    completion_tokens bigint,
    cost_micros       bigint,
    guard_action      text,
    attempts          integer NOT NULL DEFAULT 1,
    -- A partitioned table's primary key must include the partition key.
    PRIMARY KEY (request_id, started_at)
) PARTITION BY RANGE (started_at);

-- Per-tenant history and usage queries: WHERE tenant_id = $1 AND started_at ...
CREATE INDEX call_log_tenant_started_idx ON call_log (tenant_id, started_at);

-- tollgate_ensure_call_log_partition creates the partition holding the month
-- of its argument (any day of it) if it does not exist yet, and returns its
-- name. Bounds are UTC month starts. Concurrent callers are serialized by a
-- transaction-scoped advisory lock, so two gateways can call it at once.
-- +goose StatementBegin
CREATE FUNCTION tollgate_ensure_call_log_partition(month date) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    first_day date := date_trunc('month', month)::date;
    part      text := 'call_log_' || to_char(first_day, 'YYYY_MM');
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('tollgate_ensure_call_log_partition'));
    IF to_regclass(quote_ident(part)) IS NULL THEN
        EXECUTE format(
            'CREATE TABLE %I PARTITION OF call_log FOR VALUES FROM (%L) TO (%L)',
            part,
            first_day::timestamp AT TIME ZONE 'UTC',
            (first_day + interval '1 month')::timestamp AT TIME ZONE 'UTC');
    END IF;
    RETURN part;
END
$$;
-- +goose StatementEnd

SELECT tollgate_ensure_call_log_partition((now() AT TIME ZONE 'UTC')::date);
SELECT tollgate_ensure_call_log_partition((date_trunc('month', now() AT TIME ZONE 'UTC') + interval '1 month')::date);

-- +goose Down
-- Dropping the parent drops every partition.
DROP TABLE call_log;
DROP FUNCTION tollgate_ensure_call_log_partition(date);
