-- Admin tokens: the credentials of the admin API besides the environment's
-- token ($TOLLGATE_ADMIN_TOKEN, actor "bootstrap"). A token is
-- "tgadm_" and the base62 digits of 32 random bytes; it is shown once, when
-- created, and stored only as its SHA-256 (hash, unique: the lookup of every
-- admin call, WHERE hash = $1) and a display prefix. scopes is a non-empty
-- subset of read (every GET), write (every other write) and cancel
-- (cancelling requests in flight). A token stops working at expires_at
-- (NULL: never) or once revoked_at is set; rows are never deleted, so the
-- audit log's actors (admin_audit.actor = id) keep their names.

-- +goose Up
CREATE TABLE admin_tokens (
    id         text PRIMARY KEY CHECK (length(id) BETWEEN 1 AND 200),
    name       text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    hash       bytea NOT NULL CHECK (octet_length(hash) = 32),
    prefix     text NOT NULL CHECK (length(prefix) <= 16),
    scopes     text[] NOT NULL CHECK (cardinality(scopes) > 0 AND scopes <@ ARRAY['read', 'write', 'cancel']),
    created_at timestamptz NOT NULL DEFAULT now(),
    created_by text NOT NULL,
    expires_at timestamptz,
    revoked_at timestamptz
);
CREATE UNIQUE INDEX admin_tokens_hash_idx ON admin_tokens (hash);

-- +goose Down
DROP TABLE admin_tokens;
