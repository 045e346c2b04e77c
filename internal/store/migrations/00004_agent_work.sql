-- +goose Up
-- Agent work (docs/agent-work.md). Times are Unix microseconds (UTC);
-- booleans are 0/1 integers so the SQL is shared with PostgreSQL. Secrets
-- are stored sealed by internal/work, tokens as SHA-256. work.delivery_id
-- names an outbox row without a foreign key: outbox rows are purged after
-- their retention, the work record is kept.
CREATE TABLE endpoints (
  id              TEXT PRIMARY KEY,
  tenant_id       TEXT NOT NULL REFERENCES tenants(id),
  name            TEXT NOT NULL,
  url             TEXT NOT NULL,
  agent_work      BIGINT NOT NULL CHECK (agent_work IN (0, 1)),
  signing_secret  BYTEA NOT NULL,
  decision_url    TEXT,
  decision_secret BYTEA,
  created_at      BIGINT NOT NULL,
  updated_at      BIGINT NOT NULL,
  deleted_at      BIGINT,
  CHECK ((decision_url IS NULL) = (decision_secret IS NULL))
);
CREATE INDEX endpoints_tenant ON endpoints (tenant_id, created_at);
CREATE UNIQUE INDEX endpoints_live_name ON endpoints (tenant_id, name) WHERE deleted_at IS NULL;

CREATE TABLE runtime_credentials (
  id          TEXT PRIMARY KEY,
  tenant_id   TEXT NOT NULL REFERENCES tenants(id),
  endpoint_id TEXT NOT NULL REFERENCES endpoints(id),
  hash        BYTEA NOT NULL UNIQUE,
  label       TEXT NOT NULL,
  scopes      TEXT NOT NULL,
  created_at  BIGINT NOT NULL,
  expires_at  BIGINT NOT NULL,
  revoked_at  BIGINT,
  CHECK (expires_at > created_at)
);
CREATE INDEX runtime_credentials_endpoint ON runtime_credentials (endpoint_id, created_at);

CREATE TABLE bindings (
  id             TEXT PRIMARY KEY,
  tenant_id      TEXT NOT NULL REFERENCES tenants(id),
  channel        TEXT NOT NULL CHECK (channel IN ('webhook')),
  name           TEXT NOT NULL,
  endpoint_id    TEXT NOT NULL REFERENCES endpoints(id),
  token_hash     BYTEA NOT NULL UNIQUE,
  signing_secret BYTEA,
  created_at     BIGINT NOT NULL,
  deleted_at     BIGINT
);
CREATE INDEX bindings_tenant ON bindings (tenant_id, created_at);
CREATE INDEX bindings_endpoint ON bindings (endpoint_id) WHERE deleted_at IS NULL;

CREATE TABLE conversations (
  id                 TEXT PRIMARY KEY,
  tenant_id          TEXT NOT NULL REFERENCES tenants(id),
  binding_id         TEXT NOT NULL REFERENCES bindings(id),
  key                TEXT,
  status             TEXT NOT NULL CHECK (status IN ('open', 'closed')),
  runtime_session_id TEXT,
  created_at         BIGINT NOT NULL,
  last_event_at      BIGINT NOT NULL
);
-- A key names at most one open conversation of a binding.
CREATE UNIQUE INDEX conversations_open_key ON conversations (binding_id, key) WHERE status = 'open' AND key IS NOT NULL;

CREATE TABLE events (
  id              TEXT PRIMARY KEY,
  tenant_id       TEXT NOT NULL REFERENCES tenants(id),
  binding_id      TEXT NOT NULL REFERENCES bindings(id),
  conversation_id TEXT NOT NULL REFERENCES conversations(id),
  channel         TEXT NOT NULL,
  sender          TEXT NOT NULL,
  received_at     BIGINT NOT NULL,
  headers         TEXT NOT NULL,
  payload         BYTEA NOT NULL,
  attachments     TEXT NOT NULL,
  dedupe_key      TEXT,
  follow_up       BIGINT NOT NULL CHECK (follow_up IN (0, 1))
);
CREATE UNIQUE INDEX events_dedupe ON events (binding_id, dedupe_key) WHERE dedupe_key IS NOT NULL;
CREATE INDEX events_conversation ON events (conversation_id, received_at);

CREATE TABLE work (
  id                 TEXT PRIMARY KEY,
  tenant_id          TEXT NOT NULL REFERENCES tenants(id),
  endpoint_id        TEXT NOT NULL REFERENCES endpoints(id),
  conversation_id    TEXT NOT NULL REFERENCES conversations(id),
  event_id           TEXT NOT NULL REFERENCES events(id),
  generation         BIGINT NOT NULL CHECK (generation >= 1),
  replay_of          TEXT REFERENCES work(id),
  delivery_id        TEXT NOT NULL,
  credential_id      TEXT,
  status             TEXT NOT NULL CHECK (status IN ('pending', 'accepted', 'running', 'needs_input', 'completed', 'failed', 'cancelled')),
  sequence           BIGINT NOT NULL CHECK (sequence >= 0),
  runtime_session_id TEXT,
  result_summary     TEXT,
  result_url         TEXT,
  requests           TEXT,
  error              TEXT,
  callbacks          BIGINT NOT NULL CHECK (callbacks >= 0),
  created_at         BIGINT NOT NULL,
  updated_at         BIGINT NOT NULL,
  ended_at           BIGINT,
  UNIQUE (event_id, endpoint_id, generation),
  CHECK ((status IN ('completed', 'failed', 'cancelled')) = (ended_at IS NOT NULL)),
  CHECK (status = 'pending' OR sequence > 0),
  CHECK (result_url IS NULL OR status = 'completed')
);
CREATE INDEX work_tenant ON work (tenant_id, created_at);
CREATE INDEX work_tenant_status ON work (tenant_id, status, created_at);
CREATE INDEX work_conversation ON work (conversation_id, created_at);
CREATE INDEX work_event ON work (event_id, endpoint_id);

CREATE TABLE work_callbacks (
  work_id            TEXT NOT NULL REFERENCES work(id),
  callback_id        TEXT NOT NULL,
  sequence           BIGINT NOT NULL CHECK (sequence >= 1),
  status             TEXT NOT NULL CHECK (status IN ('accepted', 'running', 'needs_input', 'completed', 'failed', 'cancelled')),
  occurred_at        TEXT NOT NULL,
  runtime_session_id TEXT,
  body               BYTEA NOT NULL,
  body_hash          BYTEA NOT NULL,
  stale              BIGINT NOT NULL CHECK (stale IN (0, 1)),
  work_status        TEXT NOT NULL,
  credential_id      TEXT NOT NULL,
  recorded_at        BIGINT NOT NULL,
  -- seq orders callbacks recorded in the same instant.
  seq                BIGINT NOT NULL,
  PRIMARY KEY (work_id, callback_id),
  UNIQUE (work_id, sequence)
);
CREATE INDEX work_callbacks_order ON work_callbacks (work_id, seq);

-- +goose Down
DROP TABLE work_callbacks;
DROP TABLE work;
DROP TABLE events;
DROP TABLE conversations;
DROP TABLE bindings;
DROP TABLE runtime_credentials;
DROP TABLE endpoints;
