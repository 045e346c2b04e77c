-- +goose Up
-- Redrive of ended deliveries (docs/operating.md, `agentowl work-outbox
-- redrive`): an operator starts a new attempt series of a failed message,
-- with the same event ID and body. redrives counts the series started by
-- hand; attempt_base is how many attempts the earlier series made, so the
-- new series' backoff starts over while attempt numbers keep counting.
ALTER TABLE outbox ADD COLUMN redrives BIGINT NOT NULL DEFAULT 0;
ALTER TABLE outbox ADD COLUMN attempt_base BIGINT NOT NULL DEFAULT 0;
-- Failed messages are few: work-outbox and work-doctor find a tenant's
-- without reading its delivered ones, and the index holds no row of a
-- message that has not failed.
CREATE INDEX outbox_tenant_failed ON outbox (tenant_id, ended_at) WHERE state = 'failed';
-- Decisions the runtime has not confirmed (work-doctor's "pushes without
-- receipts"); a receipt takes the row out of the index.
CREATE INDEX work_decisions_awaiting ON work_decisions (tenant_id, decided_at) WHERE receipt_at IS NULL;

-- +goose Down
DROP INDEX work_decisions_awaiting;
DROP INDEX outbox_tenant_failed;
ALTER TABLE outbox DROP COLUMN attempt_base;
ALTER TABLE outbox DROP COLUMN redrives;
