-- Budgets per scope and window: a plan's budgets for the tenant, each of its
-- keys and each of its end users, per UTC month or day; a key's own budget;
-- and the end user of each call_log row, with the indexes that sum a key's
-- or an end user's spend in a window (what the budget counter is seeded
-- with, and what the reconcile job recomputes).
--
-- plans.budgets is a JSON array of {"scope": "tenant"|"key"|"user",
-- "window": "month"|"day", "limit_micros": n, "alerts": [percent, ...]},
-- each scope and window at most once. The tenant/month budget's limit stays
-- monthly_budget_micros (its entry in budgets, if any, carries only its
-- alerts), so older gateways and plain SQL keep reading it. A JSON column
-- rather than a table: a plan is one row, read in the key lookup's one
-- statement, and a write to it already sends the plan's eviction (00005).
--
-- The indexes are built without CONCURRENTLY (goose runs each migration in
-- a transaction): on a large call_log, build them by hand with CREATE INDEX
-- CONCURRENTLY on each partition first, or migrate in a quiet hour.

-- +goose Up
ALTER TABLE plans ADD COLUMN budgets jsonb NOT NULL DEFAULT '[]'
    CONSTRAINT plans_budgets_array CHECK (jsonb_typeof(budgets) = 'array');

-- A key's own budget replaces the plan's key budgets for that key; NULL:
-- the plan's apply.
ALTER TABLE api_keys
    ADD COLUMN budget_micros bigint CONSTRAINT api_keys_budget_positive CHECK (budget_micros > 0),
    ADD COLUMN budget_window text CONSTRAINT api_keys_budget_window CHECK (budget_window IN ('month', 'day')),
    ADD CONSTRAINT api_keys_budget_both CHECK ((budget_micros IS NULL) = (budget_window IS NULL));

-- The end user the client named (header, or the body's user /
-- safety_identifier); NULL: none.
ALTER TABLE call_log ADD COLUMN end_user text;

-- Seeding and reconcile of key budgets: WHERE tenant_id = $1 AND key_id = $2
-- AND started_at in the window.
CREATE INDEX call_log_tenant_key_started_idx ON call_log (tenant_id, key_id, started_at);
-- The same for end users; rows without one are not indexed.
CREATE INDEX call_log_tenant_user_started_idx ON call_log (tenant_id, end_user, started_at)
    WHERE end_user IS NOT NULL;

-- +goose Down
DROP INDEX call_log_tenant_user_started_idx;
DROP INDEX call_log_tenant_key_started_idx;
ALTER TABLE call_log DROP COLUMN end_user;
ALTER TABLE api_keys DROP CONSTRAINT api_keys_budget_both,
    DROP COLUMN budget_window,
    DROP COLUMN budget_micros;
ALTER TABLE plans DROP COLUMN budgets;
