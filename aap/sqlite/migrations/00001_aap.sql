-- +goose Up
CREATE TABLE aap_registrations (
    id          TEXT PRIMARY KEY,
    secret      TEXT NOT NULL,
    instance_id TEXT,
    confirmed   INTEGER NOT NULL DEFAULT 0 CHECK (confirmed IN (0, 1)),
    created_at  BIGINT NOT NULL,
    CHECK (confirmed = 0 OR instance_id IS NOT NULL)
);
CREATE INDEX aap_registrations_instance ON aap_registrations (instance_id);

CREATE TABLE aap_events (
    id              TEXT PRIMARY KEY,
    instance_id     TEXT NOT NULL,
    request_id      TEXT NOT NULL,
    registration_id TEXT NOT NULL,
    created_at      BIGINT NOT NULL,
    received_at     BIGINT NOT NULL,
    keep_until      BIGINT NOT NULL,
    body            TEXT NOT NULL,
    acked_at        BIGINT,
    lease_until     BIGINT NOT NULL DEFAULT 0,
    attempts        INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX aap_events_waiting ON aap_events (lease_until, received_at) WHERE acked_at IS NULL;
CREATE INDEX aap_events_keep ON aap_events (keep_until);

CREATE TABLE aap_executions (
    exec_key        TEXT PRIMARY KEY,
    tool            TEXT NOT NULL,
    arguments       TEXT NOT NULL,
    timeout         TEXT NOT NULL,
    agent_reasoning TEXT NOT NULL DEFAULT '',
    context         TEXT,
    request_id      TEXT UNIQUE,
    state           TEXT NOT NULL CHECK (state IN ('submitting', 'waiting', 'started', 'finished', 'not_run', 'abandoned')),
    reason          TEXT NOT NULL DEFAULT '',
    result          TEXT,
    error           TEXT NOT NULL DEFAULT '',
    cancel_done     INTEGER NOT NULL DEFAULT 0 CHECK (cancel_done IN (0, 1)),
    created_at      BIGINT NOT NULL,
    updated_at      BIGINT NOT NULL,
    -- Only a submission may lack its request ID (an abandoned one too).
    CHECK (request_id IS NOT NULL OR state IN ('submitting', 'abandoned', 'not_run'))
);
CREATE INDEX aap_executions_state ON aap_executions (state, created_at);

-- +goose Down
DROP TABLE aap_executions;
DROP TABLE aap_events;
DROP TABLE aap_registrations;
