-- +goose Up
-- In-app notifications (docs/console.md): one row per cause and recipient.
-- The unique (operator_id, cause_key) is what makes a notice logical: the
-- fan-out inserts with ON CONFLICT DO NOTHING, so duplicate callbacks,
-- transport retries and concurrent sweeps leave one notice per recipient.
-- Times are Unix microseconds (UTC).
CREATE TABLE notifications (
  id          TEXT PRIMARY KEY,
  tenant_id   TEXT NOT NULL REFERENCES tenants(id),
  operator_id TEXT NOT NULL,
  cause_key   TEXT NOT NULL,
  kind        TEXT NOT NULL CHECK (kind IN ('result', 'failure', 'input')),
  cause       TEXT NOT NULL,
  subject     TEXT NOT NULL,
  endpoint_id TEXT NOT NULL,
  title       TEXT NOT NULL,
  created_at  BIGINT NOT NULL,
  read_at     BIGINT,
  FOREIGN KEY (operator_id, tenant_id) REFERENCES operators (id, tenant_id),
  UNIQUE (operator_id, cause_key)
);
CREATE INDEX notifications_recipient ON notifications (operator_id, created_at);
CREATE INDEX notifications_unread ON notifications (operator_id) WHERE read_at IS NULL;

-- A recipient's preferences: what they muted, by cause kind or by endpoint.
-- No row means notified.
CREATE TABLE notification_mutes (
  operator_id TEXT NOT NULL,
  tenant_id   TEXT NOT NULL,
  scope       TEXT NOT NULL CHECK (scope IN ('kind', 'endpoint')),
  value       TEXT NOT NULL,
  PRIMARY KEY (operator_id, scope, value),
  FOREIGN KEY (operator_id, tenant_id) REFERENCES operators (id, tenant_id)
);

-- Web console sessions and one-time login links. Only the SHA-256 of the
-- secret is stored. Each is vouched for by an operator token (token_id): the
-- one signed in with, or the one that issued the login link; a session is
-- valid only while that token is.
CREATE TABLE console_sessions (
  id           TEXT PRIMARY KEY,
  kind         TEXT NOT NULL CHECK (kind IN ('session', 'link')),
  hash         BYTEA NOT NULL UNIQUE,
  tenant_id    TEXT NOT NULL REFERENCES tenants(id),
  operator_id  TEXT NOT NULL,
  token_id     TEXT NOT NULL REFERENCES tokens(id),
  created_at   BIGINT NOT NULL,
  last_seen_at BIGINT NOT NULL,
  expires_at   BIGINT NOT NULL,
  used_at      BIGINT,
  revoked_at   BIGINT,
  FOREIGN KEY (operator_id, tenant_id) REFERENCES operators (id, tenant_id)
);
CREATE INDEX console_sessions_expiry ON console_sessions (expires_at);

-- The console's Needs attention lists every status newest first.
CREATE INDEX attention_tenant_created ON attention_items (tenant_id, created_at);

-- +goose Down
DROP INDEX attention_tenant_created;
DROP TABLE console_sessions;
DROP TABLE notification_mutes;
DROP TABLE notifications;
