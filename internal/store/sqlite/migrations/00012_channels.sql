-- +goose Up
-- Channels (docs/channels.md): bindings of the smtp, cloudflare-email, sms
-- and voice channels beside webhook, and conversations an operator can end.
--
-- bindings: an smtp binding has a receiving address (stored lower-case,
-- unique among live bindings) and no URL token; cloudflare-email, sms and
-- voice bindings have a provider secret (the Worker's shared secret, the
-- Twilio auth token), sealed by internal/secret for (bindings,
-- provider_secret, id). Only webhook bindings have a signing secret.
--
-- conversations: status 'ended' with ended_at replaces the unused 'closed'
-- (a reset ends the session; the next event starts a new conversation);
-- channel is the binding's channel, for listing; key is the channel's
-- thread identity (the webhook's conversation key, the SMS remote number,
-- the voice CallSid), at most one open conversation per binding and key.
--
-- SQLite cannot change a CHECK in place, so both tables are rebuilt. Rows
-- of events and work refer to them: with deferred foreign keys, dropping a
-- parent counts its children as violations and inserting the rows back
-- under the same name settles them before the commit.
PRAGMA defer_foreign_keys = ON;

CREATE TABLE conversations_v11 AS SELECT * FROM conversations;
CREATE TABLE bindings_v11 AS SELECT * FROM bindings;
DROP TABLE conversations;
DROP TABLE bindings;

CREATE TABLE bindings (
  id              TEXT PRIMARY KEY,
  tenant_id       TEXT NOT NULL REFERENCES tenants(id),
  channel         TEXT NOT NULL CHECK (channel IN ('webhook', 'smtp', 'cloudflare-email', 'sms', 'voice')),
  name            TEXT NOT NULL,
  endpoint_id     TEXT NOT NULL REFERENCES endpoints(id),
  token_hash      BLOB UNIQUE,
  signing_secret  BLOB,
  address         TEXT,
  provider_secret BLOB,
  created_at      INTEGER NOT NULL,
  deleted_at      INTEGER,
  CHECK ((channel = 'smtp') = (token_hash IS NULL)),
  CHECK ((channel = 'smtp') = (address IS NOT NULL)),
  CHECK ((channel IN ('cloudflare-email', 'sms', 'voice')) = (provider_secret IS NOT NULL)),
  CHECK (signing_secret IS NULL OR channel = 'webhook')
);
INSERT INTO bindings (id, tenant_id, channel, name, endpoint_id, token_hash, signing_secret, created_at, deleted_at)
  SELECT id, tenant_id, channel, name, endpoint_id, token_hash, signing_secret, created_at, deleted_at FROM bindings_v11;
CREATE INDEX bindings_tenant ON bindings (tenant_id, created_at);
CREATE INDEX bindings_endpoint ON bindings (endpoint_id) WHERE deleted_at IS NULL;
CREATE UNIQUE INDEX bindings_live_address ON bindings (address) WHERE deleted_at IS NULL AND address IS NOT NULL;

CREATE TABLE conversations (
  id                 TEXT PRIMARY KEY,
  tenant_id          TEXT NOT NULL REFERENCES tenants(id),
  binding_id         TEXT NOT NULL REFERENCES bindings(id),
  channel            TEXT NOT NULL,
  key                TEXT,
  status             TEXT NOT NULL CHECK (status IN ('open', 'ended')),
  runtime_session_id TEXT,
  created_at         INTEGER NOT NULL,
  last_event_at      INTEGER NOT NULL,
  ended_at           INTEGER,
  CHECK ((status = 'ended') = (ended_at IS NOT NULL))
);
INSERT INTO conversations (id, tenant_id, binding_id, channel, key, status, runtime_session_id, created_at, last_event_at, ended_at)
  SELECT c.id, c.tenant_id, c.binding_id, b.channel, c.key,
    CASE c.status WHEN 'open' THEN 'open' ELSE 'ended' END, c.runtime_session_id, c.created_at, c.last_event_at,
    CASE c.status WHEN 'open' THEN NULL ELSE c.last_event_at END
  FROM conversations_v11 c JOIN bindings b ON b.id = c.binding_id;
-- A key names at most one open conversation of a binding.
CREATE UNIQUE INDEX conversations_open_key ON conversations (binding_id, key) WHERE status = 'open' AND key IS NOT NULL;
CREATE INDEX conversations_tenant ON conversations (tenant_id, last_event_at);
CREATE INDEX conversations_binding ON conversations (binding_id, last_event_at);

DROP TABLE conversations_v11;
DROP TABLE bindings_v11;

-- +goose Down
-- Refused (CHECK) while a binding of another channel exists: delete those
-- bindings first.
PRAGMA defer_foreign_keys = ON;

CREATE TABLE conversations_v12 AS SELECT * FROM conversations;
CREATE TABLE bindings_v12 AS SELECT * FROM bindings;
DROP TABLE conversations;
DROP TABLE bindings;

CREATE TABLE bindings (
  id             TEXT PRIMARY KEY,
  tenant_id      TEXT NOT NULL REFERENCES tenants(id),
  channel        TEXT NOT NULL CHECK (channel IN ('webhook')),
  name           TEXT NOT NULL,
  endpoint_id    TEXT NOT NULL REFERENCES endpoints(id),
  token_hash     BLOB NOT NULL UNIQUE,
  signing_secret BLOB,
  created_at     INTEGER NOT NULL,
  deleted_at     INTEGER
);
INSERT INTO bindings (id, tenant_id, channel, name, endpoint_id, token_hash, signing_secret, created_at, deleted_at)
  SELECT id, tenant_id, channel, name, endpoint_id, token_hash, signing_secret, created_at, deleted_at FROM bindings_v12;
CREATE INDEX bindings_tenant ON bindings (tenant_id, created_at);
CREATE INDEX bindings_endpoint ON bindings (endpoint_id) WHERE deleted_at IS NULL;

CREATE TABLE conversations (
  id                 TEXT PRIMARY KEY,
  tenant_id          TEXT NOT NULL REFERENCES tenants(id),
  binding_id         TEXT NOT NULL REFERENCES bindings(id),
  key                TEXT,
  status             TEXT NOT NULL CHECK (status IN ('open', 'closed')),
  runtime_session_id TEXT,
  created_at         INTEGER NOT NULL,
  last_event_at      INTEGER NOT NULL
);
INSERT INTO conversations (id, tenant_id, binding_id, key, status, runtime_session_id, created_at, last_event_at)
  SELECT id, tenant_id, binding_id, key, CASE status WHEN 'open' THEN 'open' ELSE 'closed' END, runtime_session_id,
    created_at, last_event_at FROM conversations_v12;
CREATE UNIQUE INDEX conversations_open_key ON conversations (binding_id, key) WHERE status = 'open' AND key IS NOT NULL;

DROP TABLE conversations_v12;
DROP TABLE bindings_v12;
