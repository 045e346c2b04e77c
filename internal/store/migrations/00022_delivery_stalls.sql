-- +goose Up
-- The stall detector (docs/operating.md, "Delivery stalls").
--
-- outbox.due_since: since when a pending message has been due for an
-- attempt: its creation, its last recorded attempt's retry time, or its
-- redrive. A deferral (a destination or account limit held an attempt back)
-- moves next_attempt_at and keeps due_since, so a message that limits keep
-- deferring shows how long it has waited without an attempt.
ALTER TABLE outbox ADD COLUMN due_since BIGINT;
UPDATE outbox SET due_since = next_attempt_at WHERE state = 'pending';
CREATE INDEX outbox_due_since ON outbox (due_since) WHERE state = 'pending';

-- delivery_engines: each running delivery engine's view of itself, written
-- every few seconds (delivery.Engine heartbeat) and removed when it stops
-- cleanly, so that work-doctor and maintenance status on any replica can
-- report a replica whose slots are held without an attempt.
CREATE TABLE delivery_engines (
  owner         TEXT PRIMARY KEY,
  started_at    BIGINT NOT NULL,
  seen_at       BIGINT NOT NULL,
  attempts      INTEGER NOT NULL,
  slots_busy    INTEGER NOT NULL,
  slots_idle    INTEGER NOT NULL,
  slots_stale   INTEGER NOT NULL,
  slots_reclaimed BIGINT NOT NULL
);

-- +goose Down
DROP TABLE delivery_engines;
DROP INDEX outbox_due_since;
ALTER TABLE outbox DROP COLUMN due_since;
