-- +goose Up
-- One row per key that seals secrets at rest: a check value derived from the
-- key, so a replica started with another key refuses to start instead of
-- failing to open secrets that other replicas sealed.
CREATE TABLE key_checks (
  name        TEXT PRIMARY KEY,
  check_value BYTEA NOT NULL,
  created_at  BIGINT NOT NULL
);

-- +goose Down
DROP TABLE key_checks;
