-- +goose Up
-- Decision attestations (docs/attestations.md).
--
-- attestation_keys: the Ed25519 keys that sign them, shared by replicas.
-- id is the kid; private_key_sealed the 32-byte seed, sealed like every
-- stored secret (sqlstore/secrets.go); public_key the 32-byte public key.
-- The one key with retired_at NULL signs; a retired key stays published
-- (the JWK Set) until every attestation it signed has expired plus the
-- retention setting.
CREATE TABLE attestation_keys (
  id                  TEXT PRIMARY KEY,
  private_key_sealed  BYTEA NOT NULL,
  public_key          BYTEA NOT NULL,
  created_at          BIGINT NOT NULL,
  retired_at          BIGINT
);
CREATE UNIQUE INDEX attestation_keys_active ON attestation_keys ((1)) WHERE retired_at IS NULL;

-- attestations: one per decision (an AAP request's approval or denial, a
-- runtime request's decision), written in the decision's transaction.
-- subject_kind is aap_request (subject_id: the request's UUID) or
-- work_decision (subject_id: "<work ID>/<decision ID>"). token is the
-- compact JWS as issued, id its jti. No foreign keys: an attestation
-- is written on the hot path of every decision.
CREATE TABLE attestations (
  id            TEXT PRIMARY KEY,
  subject_kind  TEXT NOT NULL,
  subject_id    TEXT NOT NULL,
  tenant_id     TEXT NOT NULL,
  key_id        TEXT NOT NULL,
  token         TEXT NOT NULL,
  decided_at    BIGINT NOT NULL,
  expires_at    BIGINT NOT NULL,
  UNIQUE (subject_kind, subject_id)
);
-- The latest expiry per key: which keys the JWK Set still publishes.
CREATE INDEX attestations_key_expiry ON attestations (key_id, expires_at);

-- +goose Down
DROP TABLE attestations;
DROP TABLE attestation_keys;
