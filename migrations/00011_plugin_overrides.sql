-- Plans' and tenants' settings for the policy's plugins: a JSON object by
-- plugin name of {"enabled": bool, "config": {...}}, where config is a JSON
-- merge patch (RFC 7386) over the plugin's config in the policy and either
-- key may be absent (docs/POLICY.md, "Chains: guards per route, plan and
-- tenant"). The gateway applies the tenant's over the plan's. Read with the
-- key lookup's one statement; a write to either row already sends its
-- eviction (00005). Plugin names and configs are checked by the admin API
-- against the running policy, not here: the policy may change under them.

-- +goose Up
ALTER TABLE plans ADD COLUMN plugins jsonb NOT NULL DEFAULT '{}'
    CONSTRAINT plans_plugins_object CHECK (jsonb_typeof(plugins) = 'object');
ALTER TABLE tenants ADD COLUMN plugins jsonb NOT NULL DEFAULT '{}'
    CONSTRAINT tenants_plugins_object CHECK (jsonb_typeof(plugins) = 'object');

-- +goose Down
ALTER TABLE tenants DROP COLUMN plugins;
ALTER TABLE plans DROP COLUMN plugins;
