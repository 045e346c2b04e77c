-- +goose Up
-- Times are Unix microseconds (UTC). CHECK constraints encode the state machine.
CREATE TABLE tenants (
  id         TEXT PRIMARY KEY,
  name       TEXT NOT NULL UNIQUE,
  created_at BIGINT NOT NULL
);

CREATE TABLE operators (
  id         TEXT PRIMARY KEY,
  name       TEXT NOT NULL UNIQUE,
  created_at BIGINT NOT NULL
);

CREATE TABLE memberships (
  operator_id TEXT NOT NULL REFERENCES operators(id),
  tenant_id   TEXT NOT NULL REFERENCES tenants(id),
  role        TEXT NOT NULL CHECK (role IN ('admin', 'member')),
  PRIMARY KEY (operator_id, tenant_id)
);

CREATE TABLE instances (
  id                        TEXT PRIMARY KEY,
  tenant_id                 TEXT NOT NULL REFERENCES tenants(id),
  name                      TEXT NOT NULL,
  provisioner_token_id      TEXT NOT NULL,
  delivery_type             TEXT,
  delivery_url              TEXT,
  delivery_registration_id  TEXT,
  delivery_secret           TEXT,
  approval_validity_seconds BIGINT NOT NULL CHECK (approval_validity_seconds > 0),
  created_at                BIGINT NOT NULL,
  deleted_at                BIGINT,
  CHECK ((delivery_type IS NULL) = (delivery_url IS NULL))
);
CREATE INDEX instances_tenant ON instances (tenant_id, created_at);

CREATE TABLE tokens (
  id          TEXT PRIMARY KEY,
  kind        TEXT NOT NULL CHECK (kind IN ('operator', 'provisioner', 'instance')),
  hash        BYTEA NOT NULL UNIQUE,
  tenant_id   TEXT NOT NULL REFERENCES tenants(id),
  operator_id TEXT REFERENCES operators(id),
  instance_id TEXT REFERENCES instances(id),
  label       TEXT NOT NULL,
  created_at  BIGINT NOT NULL,
  expires_at  BIGINT,
  revoked_at  BIGINT,
  CHECK ((kind = 'operator') = (operator_id IS NOT NULL)),
  CHECK ((kind = 'instance') = (instance_id IS NOT NULL))
);
CREATE INDEX tokens_tenant ON tokens (tenant_id, kind, created_at);
CREATE INDEX tokens_instance ON tokens (instance_id);

CREATE TABLE idempotency_keys (
  scope        TEXT NOT NULL,
  operation    TEXT NOT NULL,
  key          TEXT NOT NULL,
  input_hash   BYTEA NOT NULL,
  resource_id  TEXT NOT NULL,
  response     BYTEA NOT NULL,
  created_at   BIGINT NOT NULL,
  retain_until BIGINT NOT NULL,
  PRIMARY KEY (scope, operation, key)
);

CREATE TABLE approval_requests (
  id                  TEXT PRIMARY KEY,
  tenant_id           TEXT NOT NULL REFERENCES tenants(id),
  instance_id         TEXT NOT NULL REFERENCES instances(id),
  idempotency_key     TEXT NOT NULL,
  input_hash          BYTEA NOT NULL,
  tool                TEXT NOT NULL,
  arguments           TEXT NOT NULL,
  timeout             TEXT NOT NULL,
  agent_reasoning     TEXT,
  context             TEXT,
  status              TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'denied', 'expired', 'cancelled')),
  created_at          BIGINT NOT NULL,
  deadline_at         BIGINT NOT NULL,
  decided_at          BIGINT,
  decision_note       TEXT,
  decision_expires_at BIGINT,
  decided_by          TEXT,
  retain_until        BIGINT,
  UNIQUE (instance_id, idempotency_key),
  CHECK ((status = 'pending') = (decided_at IS NULL)),
  CHECK ((status = 'approved') = (decision_expires_at IS NOT NULL)),
  CHECK (decision_expires_at IS NULL OR decision_expires_at > decided_at)
);
CREATE INDEX approval_requests_tenant ON approval_requests (tenant_id, created_at);
CREATE INDEX approval_requests_pending ON approval_requests (deadline_at) WHERE status = 'pending';
CREATE INDEX approval_requests_instance_pending ON approval_requests (instance_id) WHERE status = 'pending';
CREATE INDEX approval_requests_retention ON approval_requests (retain_until) WHERE retain_until IS NOT NULL;

CREATE TABLE policies (
  id          TEXT PRIMARY KEY,
  tenant_id   TEXT NOT NULL REFERENCES tenants(id),
  instance_id TEXT REFERENCES instances(id),
  name        TEXT NOT NULL,
  tool        TEXT NOT NULL,
  condition   TEXT NOT NULL,
  effect      TEXT NOT NULL CHECK (effect IN ('approve', 'deny')),
  note        TEXT NOT NULL,
  priority    BIGINT NOT NULL,
  created_at  BIGINT NOT NULL,
  -- seq orders rules created in the same instant by creation.
  seq         BIGINT NOT NULL
);
CREATE INDEX policies_tenant ON policies (tenant_id, priority, created_at, seq);

CREATE TABLE audit_log (
  id         BIGSERIAL PRIMARY KEY,
  tenant_id  TEXT NOT NULL REFERENCES tenants(id),
  at         BIGINT NOT NULL,
  actor      TEXT NOT NULL,
  action     TEXT NOT NULL,
  target     TEXT NOT NULL,
  request_id TEXT NOT NULL,
  details    TEXT NOT NULL
);
CREATE INDEX audit_log_tenant ON audit_log (tenant_id, id);

-- +goose Down
DROP TABLE audit_log;
DROP TABLE policies;
DROP TABLE approval_requests;
DROP TABLE idempotency_keys;
DROP TABLE tokens;
DROP TABLE instances;
DROP TABLE memberships;
DROP TABLE operators;
DROP TABLE tenants;
