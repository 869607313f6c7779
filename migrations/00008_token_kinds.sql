-- Pricing by kind of token, and the ledger's record of the kinds.
--
-- model_prices gains a rate per kind of token (USD micros per million; NULL
-- falls back to the price catalog's rate for the model, else to the input
-- or output rate) and the bounds of a request to the model (NULL: the
-- catalog's, else unknown): context_window (input tokens), max_output_tokens
-- (of a reply without max_tokens), image_tokens (the most input tokens one
-- image counts for), reasoning (NULL or false: as the catalog says; true:
-- the model's replies may hold hidden reasoning tokens).
--
-- call_log gains the kinds of each request's tokens as the upstream
-- reported them (parts of prompt_tokens and completion_tokens; NULL: not
-- reported), so the ledger shows what a cost was made of. Adding nullable
-- columns is instant on every partition.

-- +goose Up
ALTER TABLE model_prices
    ADD COLUMN cached_input_micros_per_mtok bigint CHECK (cached_input_micros_per_mtok >= 0),
    ADD COLUMN cache_write_micros_per_mtok  bigint CHECK (cache_write_micros_per_mtok >= 0),
    ADD COLUMN audio_input_micros_per_mtok  bigint CHECK (audio_input_micros_per_mtok >= 0),
    ADD COLUMN image_input_micros_per_mtok  bigint CHECK (image_input_micros_per_mtok >= 0),
    ADD COLUMN reasoning_micros_per_mtok    bigint CHECK (reasoning_micros_per_mtok >= 0),
    ADD COLUMN audio_output_micros_per_mtok bigint CHECK (audio_output_micros_per_mtok >= 0),
    ADD COLUMN image_output_micros_per_mtok bigint CHECK (image_output_micros_per_mtok >= 0),
    ADD COLUMN context_window               bigint CHECK (context_window >= 0),
    ADD COLUMN max_output_tokens            bigint CHECK (max_output_tokens >= 0),
    ADD COLUMN image_tokens                 bigint CHECK (image_tokens >= 0),
    ADD COLUMN reasoning                    boolean;

ALTER TABLE call_log
    ADD COLUMN cached_input_tokens bigint,
    ADD COLUMN cache_write_tokens  bigint,
    ADD COLUMN audio_input_tokens  bigint,
    ADD COLUMN image_input_tokens  bigint,
    ADD COLUMN reasoning_tokens    bigint,
    ADD COLUMN audio_output_tokens bigint,
    ADD COLUMN image_output_tokens bigint;

-- +goose Down
ALTER TABLE call_log
    DROP COLUMN cached_input_tokens,
    DROP COLUMN cache_write_tokens,
    DROP COLUMN audio_input_tokens,
    DROP COLUMN image_input_tokens,
    DROP COLUMN reasoning_tokens,
    DROP COLUMN audio_output_tokens,
    DROP COLUMN image_output_tokens;

ALTER TABLE model_prices
    DROP COLUMN cached_input_micros_per_mtok,
    DROP COLUMN cache_write_micros_per_mtok,
    DROP COLUMN audio_input_micros_per_mtok,
    DROP COLUMN image_input_micros_per_mtok,
    DROP COLUMN reasoning_micros_per_mtok,
    DROP COLUMN audio_output_micros_per_mtok,
    DROP COLUMN image_output_micros_per_mtok,
    DROP COLUMN context_window,
    DROP COLUMN max_output_tokens,
    DROP COLUMN image_tokens,
    DROP COLUMN reasoning;
