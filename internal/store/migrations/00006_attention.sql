-- +goose Up
-- Questions and approvals (docs/attention.md). Every revision of a runtime
-- request is one attention item; incidents (failed work) are items without
-- a request. At most one decision wins per item (decisions_item). Times
-- are Unix microseconds (UTC).
CREATE TABLE attention_items (
  id                 TEXT PRIMARY KEY,
  tenant_id          TEXT NOT NULL REFERENCES tenants(id),
  kind               TEXT NOT NULL CHECK (kind IN ('question', 'approval', 'incident')),
  status             TEXT NOT NULL CHECK (status IN ('open', 'acknowledged', 'resolved')),
  resolution         TEXT,
  work_id            TEXT NOT NULL REFERENCES work(id),
  endpoint_id        TEXT NOT NULL,
  request_id         TEXT,
  revision           BIGINT,
  prompt             TEXT,
  allowed_decisions  TEXT,
  action_description TEXT,
  action_digest      TEXT,
  expires_at         BIGINT,
  content_hash       BYTEA,
  request            TEXT,
  summary            TEXT,
  assignee           TEXT,
  acknowledged_at    BIGINT,
  resolved_at        BIGINT,
  created_at         BIGINT NOT NULL,
  updated_at         BIGINT NOT NULL,
  CHECK ((kind = 'incident') = (request_id IS NULL))
);
CREATE UNIQUE INDEX attention_request ON attention_items (work_id, request_id, revision) WHERE request_id IS NOT NULL;
CREATE INDEX attention_tenant_status ON attention_items (tenant_id, status, created_at);
CREATE INDEX attention_expiry ON attention_items (expires_at) WHERE status <> 'resolved' AND expires_at IS NOT NULL;

CREATE TABLE work_decisions (
  work_id                TEXT NOT NULL REFERENCES work(id),
  id                     TEXT NOT NULL,
  tenant_id              TEXT NOT NULL REFERENCES tenants(id),
  attention_id           TEXT NOT NULL UNIQUE REFERENCES attention_items(id),
  request_id             TEXT NOT NULL,
  revision               BIGINT NOT NULL,
  decision               TEXT NOT NULL,
  answer                 TEXT,
  expected_action_digest TEXT,
  content_hash           BYTEA NOT NULL,
  body                   BYTEA NOT NULL,
  decided_by             TEXT NOT NULL,
  decided_at             BIGINT NOT NULL,
  message_id             TEXT,
  receipt_at             BIGINT,
  receipt_via            TEXT,
  PRIMARY KEY (work_id, id)
);

-- +goose Down
DROP TABLE work_decisions;
DROP TABLE attention_items;
