-- +goose Up
-- The durable outbox of the delivery engine: one row per outbound message
-- (event ID, exact body bytes, retry deadline), written in the transaction of
-- the change that caused it. destination names where it goes ("instance:<id>")
-- and is resolved to a URL and secret at every attempt, so a replaced
-- receiver gets the queued messages.
CREATE TABLE outbox (
  id              TEXT PRIMARY KEY,
  tenant_id       TEXT NOT NULL REFERENCES tenants(id),
  kind            TEXT NOT NULL,
  destination     TEXT NOT NULL,
  subject         TEXT NOT NULL,
  body            BYTEA NOT NULL,
  created_at      BIGINT NOT NULL,
  deadline_at     BIGINT NOT NULL,
  state           TEXT NOT NULL CHECK (state IN ('pending', 'delivered', 'failed', 'cancelled')),
  attempts        BIGINT NOT NULL DEFAULT 0,
  next_attempt_at BIGINT NOT NULL,
  lease_owner     TEXT,
  lease_until     BIGINT,
  last_status     BIGINT,
  last_error      TEXT,
  ended_at        BIGINT,
  retain_until    BIGINT,
  CHECK ((state = 'pending') = (ended_at IS NULL))
);
CREATE INDEX outbox_due ON outbox (next_attempt_at) WHERE state = 'pending';
CREATE INDEX outbox_destination ON outbox (destination) WHERE state = 'pending';
CREATE INDEX outbox_subject ON outbox (subject);
CREATE INDEX outbox_tenant ON outbox (tenant_id, created_at);

CREATE TABLE outbox_attempts (
  event_id    TEXT NOT NULL REFERENCES outbox(id) ON DELETE CASCADE,
  n           BIGINT NOT NULL,
  url         TEXT NOT NULL,
  started_at  BIGINT NOT NULL,
  ended_at    BIGINT NOT NULL,
  status_code BIGINT,
  error       TEXT,
  PRIMARY KEY (event_id, n)
);

-- +goose Down
DROP TABLE outbox_attempts;
DROP TABLE outbox;
