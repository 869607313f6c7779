-- The rate limiter takes at most 60,000,000 requests a minute (one per
-- microsecond, limiter.MaxRPM). A higher limit used to be stored without
-- complaint and then refused by the limiter on every request, which the
-- ratelimit plugin, failing open, turned into no limit at all. Refuse it
-- where it is written instead. NOT VALID: rows written before are not
-- rechecked (the limiter still refuses them, loudly, in the gateway's log).

-- +goose Up
ALTER TABLE plans ADD CONSTRAINT plans_rpm_max CHECK (rpm <= 60000000) NOT VALID;
ALTER TABLE api_keys ADD CONSTRAINT api_keys_rpm_max CHECK (rpm <= 60000000) NOT VALID;

-- +goose Down
ALTER TABLE api_keys DROP CONSTRAINT api_keys_rpm_max;
ALTER TABLE plans DROP CONSTRAINT plans_rpm_max;
