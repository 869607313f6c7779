-- What the client received: the bytes of reply text sent (after any guard
-- held back, replaced or stopped it), and, for a guard's action, that it
-- acted. A stopped stream's row then records exactly what reached the client.
-- Adding a nullable column is instant on every partition.

-- +goose Up
ALTER TABLE call_log ADD COLUMN reply_bytes bigint;

-- +goose Down
ALTER TABLE call_log DROP COLUMN reply_bytes;
