-- Cache eviction: every committed write to plans, tenants, api_keys or
-- model_prices, by any client (the gateway's admin API, psql, a script),
-- sends NOTIFY on channel tollgate_evict so every gateway drops what it cached.
-- Notifications are delivered when the writing transaction commits, never for
-- a rolled-back one; identical payloads of one transaction arrive once.
--
-- Payload format: "<kind>:<value>", split at the first colon; value is the
-- rest, verbatim (it may itself contain colons).
--
--   key:<hash>     api_keys row changed; <hash> is the lowercase hex of
--                  key_hash (64 characters). Sent for the old and the new
--                  row's hash of an UPDATE (once if they are equal).
--   tenant:<id>    tenants row changed (status, plan); evict every snapshot
--                  of that tenant. Old and new id of an UPDATE.
--   plan:<id>      plans row changed; evict every snapshot on that plan.
--   price:<model>  model_prices row of that model changed.
--   all            evict everything: sent by TRUNCATE of any of the four
--                  tables, and by store/pg.Listen itself after each
--                  (re)connection, since notifications sent while no
--                  listener was connected are lost.
--
-- Consumers must treat a payload they do not understand as "all", so new
-- kinds can be added without breaking older gateways.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION tollgate_notify_evict() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    old_payload text;
    new_payload text;
BEGIN
    IF TG_LEVEL = 'STATEMENT' THEN -- TRUNCATE
        PERFORM pg_notify('tollgate_evict', 'all');
        RETURN NULL;
    END IF;
    -- Each table in its own branch: PL/pgSQL resolves OLD.x and NEW.x
    -- against the row type of the table that fired the trigger.
    IF TG_TABLE_NAME = 'api_keys' THEN
        IF TG_OP <> 'INSERT' THEN old_payload := 'key:' || encode(OLD.key_hash, 'hex'); END IF;
        IF TG_OP <> 'DELETE' THEN new_payload := 'key:' || encode(NEW.key_hash, 'hex'); END IF;
    ELSIF TG_TABLE_NAME = 'model_prices' THEN
        IF TG_OP <> 'INSERT' THEN old_payload := 'price:' || OLD.model; END IF;
        IF TG_OP <> 'DELETE' THEN new_payload := 'price:' || NEW.model; END IF;
    ELSIF TG_TABLE_NAME = 'tenants' THEN
        IF TG_OP <> 'INSERT' THEN old_payload := 'tenant:' || OLD.id; END IF;
        IF TG_OP <> 'DELETE' THEN new_payload := 'tenant:' || NEW.id; END IF;
    ELSIF TG_TABLE_NAME = 'plans' THEN
        IF TG_OP <> 'INSERT' THEN old_payload := 'plan:' || OLD.id; END IF;
        IF TG_OP <> 'DELETE' THEN new_payload := 'plan:' || NEW.id; END IF;
    ELSE
        old_payload := 'all';
    END IF;
    IF old_payload IS NOT NULL THEN
        PERFORM pg_notify('tollgate_evict', old_payload);
    END IF;
    IF new_payload IS NOT NULL AND new_payload IS DISTINCT FROM old_payload THEN
        PERFORM pg_notify('tollgate_evict', new_payload);
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER plans_notify_evict AFTER INSERT OR UPDATE OR DELETE ON plans
    FOR EACH ROW EXECUTE FUNCTION tollgate_notify_evict();
CREATE TRIGGER tenants_notify_evict AFTER INSERT OR UPDATE OR DELETE ON tenants
    FOR EACH ROW EXECUTE FUNCTION tollgate_notify_evict();
CREATE TRIGGER api_keys_notify_evict AFTER INSERT OR UPDATE OR DELETE ON api_keys
    FOR EACH ROW EXECUTE FUNCTION tollgate_notify_evict();
CREATE TRIGGER model_prices_notify_evict AFTER INSERT OR UPDATE OR DELETE ON model_prices
    FOR EACH ROW EXECUTE FUNCTION tollgate_notify_evict();

CREATE TRIGGER plans_notify_evict_truncate AFTER TRUNCATE ON plans
    FOR EACH STATEMENT EXECUTE FUNCTION tollgate_notify_evict();
CREATE TRIGGER tenants_notify_evict_truncate AFTER TRUNCATE ON tenants
    FOR EACH STATEMENT EXECUTE FUNCTION tollgate_notify_evict();
CREATE TRIGGER api_keys_notify_evict_truncate AFTER TRUNCATE ON api_keys
    FOR EACH STATEMENT EXECUTE FUNCTION tollgate_notify_evict();
CREATE TRIGGER model_prices_notify_evict_truncate AFTER TRUNCATE ON model_prices
    FOR EACH STATEMENT EXECUTE FUNCTION tollgate_notify_evict();

-- +goose Down
DROP TRIGGER model_prices_notify_evict_truncate ON model_prices;
DROP TRIGGER api_keys_notify_evict_truncate ON api_keys;
DROP TRIGGER tenants_notify_evict_truncate ON tenants;
DROP TRIGGER plans_notify_evict_truncate ON plans;
DROP TRIGGER model_prices_notify_evict ON model_prices;
DROP TRIGGER api_keys_notify_evict ON api_keys;
DROP TRIGGER tenants_notify_evict ON tenants;
DROP TRIGGER plans_notify_evict ON plans;
DROP FUNCTION tollgate_notify_evict();
