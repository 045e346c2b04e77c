-- +goose Up
-- In-flight slots per delivery destination (host:port, resolved address),
-- leased by serve processes so that a destination's concurrency limit holds
-- across every process sharing this database. A slot whose lease has lapsed
-- (its process died) is free again.
CREATE TABLE delivery_slots (
  key         TEXT NOT NULL,
  slot        INTEGER NOT NULL,
  owner       TEXT,
  lease_until BIGINT NOT NULL,
  PRIMARY KEY (key, slot)
);
CREATE INDEX delivery_slots_owner ON delivery_slots (owner) WHERE owner IS NOT NULL;

-- +goose Down
DROP TABLE delivery_slots;
