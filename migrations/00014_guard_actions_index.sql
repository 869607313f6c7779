-- The admin API's guard actions (GET /v1/admin/guard-actions): call_log rows
-- with a guard action, newest first, fleet-wide or of one tenant. A partial
-- index: rows without a guard action (nearly all) are not in it, so it stays
-- small and costs a request's insert nothing unless a guard acted.
--
-- Built without CONCURRENTLY (goose runs each migration in a transaction):
-- on a large call_log, build it by hand with CREATE INDEX CONCURRENTLY on
-- each partition first, or migrate in a quiet hour.

-- +goose Up
CREATE INDEX call_log_guard_action_idx ON call_log (started_at DESC, request_id DESC)
    WHERE guard_action IS NOT NULL;

-- +goose Down
DROP INDEX call_log_guard_action_idx;
