-- The outbox of budget alerts: one row per threshold a budget's spend
-- reached in a period, written by the gateway that saw the crossing and
-- delivered by whichever gateway claims it (FOR UPDATE SKIP LOCKED) to the
-- policy's alerts webhook (gateway/internal/alerts).
--
-- The unique key makes a repeat a no-op: the same crossing reported twice
-- (a refusal of an exhausted budget after its 100% crossing, two replicas,
-- a retried enqueue) is one row and one delivery. id is derived from the
-- same fields, so receivers see the same id on every attempt.
--
-- Money is USD micros. next_attempt_at is both the retry schedule and the
-- claim's lease: a gateway that claims a row pushes it past its delivery
-- timeout, so a gateway that dies mid-delivery leaves the row to another
-- once the lease ends. A row is pending while delivered_at and gave_up_at
-- are both NULL; gave_up_at is set when a failed attempt finds the row
-- older than the policy's alerts.max_age.

-- +goose Up
CREATE TABLE budget_alerts (
    id              text PRIMARY KEY,
    tenant_id       text NOT NULL,
    scope_kind      text NOT NULL CHECK (scope_kind IN ('tenant', 'key', 'user')),
    scope_id        text NOT NULL,
    scope_window    text NOT NULL CHECK (scope_window IN ('month', 'day')),
    period          text NOT NULL,
    threshold       integer NOT NULL CHECK (threshold > 0),
    reason          text NOT NULL CHECK (reason IN ('crossed', 'refused')),
    spent_micros    bigint NOT NULL,
    limit_micros    bigint NOT NULL,
    crossed_at      timestamptz NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    attempts        integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    delivered_at    timestamptz,
    gave_up_at      timestamptz,
    last_error      text,
    CONSTRAINT budget_alerts_once UNIQUE (tenant_id, scope_kind, scope_id, period, threshold)
);

CREATE INDEX budget_alerts_due ON budget_alerts (next_attempt_at)
    WHERE delivered_at IS NULL AND gave_up_at IS NULL;

-- The gateways delete finished rows some weeks old (alerts.Prune): by then
-- their period is over, so no repeat can come that the key must stop.
CREATE INDEX budget_alerts_finished ON budget_alerts (created_at)
    WHERE delivered_at IS NOT NULL OR gave_up_at IS NOT NULL;

-- +goose Down
DROP TABLE budget_alerts;
