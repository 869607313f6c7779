-- Model prices, in USD micros per million tokens. A price is in force from
-- effective_from until the next row of the same model; prices are never
-- updated in place to change history, a new row is added instead (an update
-- of an existing row is allowed, to fix a mistake).

-- +goose Up
CREATE TABLE model_prices (
    model                  text NOT NULL CHECK (length(model) BETWEEN 1 AND 200),
    input_micros_per_mtok  bigint NOT NULL CHECK (input_micros_per_mtok >= 0),
    output_micros_per_mtok bigint NOT NULL CHECK (output_micros_per_mtok >= 0),
    effective_from         timestamptz NOT NULL,
    -- The primary key's index serves the price lookup:
    -- WHERE model = $1 AND effective_from <= $2 ORDER BY effective_from DESC LIMIT 1.
    PRIMARY KEY (model, effective_from)
);

-- +goose Down
DROP TABLE model_prices;
