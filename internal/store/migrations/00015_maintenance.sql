-- +goose Up
-- Maintenance (docs/maintenance.md). Times are Unix microseconds (UTC).
--
-- maintenance_leases: the scheduler's leader, one row per lease name. A
-- replica holds the lease until lease_until and renews it while alive; once
-- it lapses (the replica died) another replica takes it over.
CREATE TABLE maintenance_leases (
  name        TEXT PRIMARY KEY,
  owner       TEXT NOT NULL,
  acquired_at BIGINT NOT NULL,
  lease_until BIGINT NOT NULL
);

-- maintenance_jobs: each periodic job's last run, whichever replica ran it.
CREATE TABLE maintenance_jobs (
  name        TEXT PRIMARY KEY,
  owner       TEXT NOT NULL,
  started_at  BIGINT NOT NULL,
  duration_us BIGINT NOT NULL CHECK (duration_us >= 0),
  outcome     TEXT NOT NULL CHECK (outcome IN ('ok', 'error', 'skipped')),
  error       TEXT,
  affected    BIGINT NOT NULL,
  runs        BIGINT NOT NULL,
  failures    BIGINT NOT NULL,
  last_ok_at  BIGINT
);

-- Per-endpoint overdue expectations: NULL keeps the server's default, 0
-- turns a duration rule off (input_expiry: 0 off, 1 on).
ALTER TABLE endpoints ADD COLUMN overdue_accept_within BIGINT CHECK (overdue_accept_within >= 0);
ALTER TABLE endpoints ADD COLUMN overdue_report_interval BIGINT CHECK (overdue_report_interval >= 0);
ALTER TABLE endpoints ADD COLUMN overdue_input_expiry BIGINT CHECK (overdue_input_expiry IN (0, 1));

-- Overdue incidents: the rule a work broke and the sequence it had then. One
-- incident per work, rule and sequence, however often the scan runs.
ALTER TABLE attention_items ADD COLUMN overdue_rule TEXT;
ALTER TABLE attention_items ADD COLUMN overdue_sequence BIGINT;
CREATE UNIQUE INDEX attention_overdue ON attention_items (work_id, overdue_rule, overdue_sequence) WHERE overdue_rule IS NOT NULL;

-- The overdue scan walks open work; retention walks ended records by age.
CREATE INDEX work_open ON work (id) WHERE status IN ('pending', 'accepted', 'running', 'needs_input');
CREATE INDEX work_ended ON work (ended_at) WHERE ended_at IS NOT NULL;
CREATE INDEX work_replay_of ON work (replay_of) WHERE replay_of IS NOT NULL;
CREATE INDEX attention_work ON attention_items (work_id);
CREATE INDEX events_received ON events (received_at);
CREATE INDEX conversations_last_event ON conversations (last_event_at);
CREATE INDEX audit_log_at ON audit_log (at);
CREATE INDEX outbox_retention ON outbox (retain_until) WHERE state <> 'pending';
CREATE INDEX outbox_lease ON outbox (lease_until) WHERE state = 'pending' AND lease_until IS NOT NULL;

-- +goose Down
DROP INDEX outbox_lease;
DROP INDEX outbox_retention;
DROP INDEX audit_log_at;
DROP INDEX conversations_last_event;
DROP INDEX events_received;
DROP INDEX attention_work;
DROP INDEX work_replay_of;
DROP INDEX work_ended;
DROP INDEX work_open;
DROP INDEX attention_overdue;
ALTER TABLE attention_items DROP COLUMN overdue_sequence;
ALTER TABLE attention_items DROP COLUMN overdue_rule;
ALTER TABLE endpoints DROP COLUMN overdue_input_expiry;
ALTER TABLE endpoints DROP COLUMN overdue_report_interval;
ALTER TABLE endpoints DROP COLUMN overdue_accept_within;
DROP TABLE maintenance_jobs;
DROP TABLE maintenance_leases;
