-- Spend per tenant and calendar month (UTC), in USD micros: what the budget
-- check compares with plans.monthly_budget_micros. month is the first day of
-- the month.

-- +goose Up
CREATE TABLE spend_month (
    tenant_id   text NOT NULL REFERENCES tenants (id),
    month       date NOT NULL CHECK (extract(day FROM month) = 1),
    cost_micros bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id, month)
);

-- +goose Down
DROP TABLE spend_month;
