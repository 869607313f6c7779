-- Every write through the admin API leaves one row here, in the same
-- transaction as the write (so a write that commits is never without its
-- entry, and a write rolled back leaves none): who made it (the admin
-- token's id, or "bootstrap" for the environment's token), what (an action
-- such as "plan.update"), on which resource, and the row as it was before
-- and after (JSON images of the row; secrets such as key and token hashes
-- are left out of the images). Read newest first through
-- GET /v1/admin/audit. Rows are never updated; old ones can be deleted by
-- the operator (DELETE FROM admin_audit WHERE at < ...).

-- +goose Up
CREATE TABLE admin_audit (
    id          bigserial PRIMARY KEY,
    at          timestamptz NOT NULL DEFAULT now(),
    actor       text NOT NULL,
    action      text NOT NULL,
    resource    text NOT NULL,
    resource_id text NOT NULL,
    before      jsonb,
    after       jsonb
);
CREATE INDEX admin_audit_resource_idx ON admin_audit (resource, resource_id, id);
CREATE INDEX admin_audit_actor_idx ON admin_audit (actor, id);

-- +goose Down
DROP TABLE admin_audit;
