-- +goose Up
-- Fixed-window event counters shared by every process using this database,
-- so abuse limits hold across replicas.
CREATE TABLE rate_counters (
  key          TEXT NOT NULL,
  window_start BIGINT NOT NULL,
  count        BIGINT NOT NULL,
  PRIMARY KEY (key, window_start)
);

-- +goose Down
DROP TABLE rate_counters;
