-- +goose Up
-- The tamper-evident audit log (internal/auditchain): each tenant's entries
-- form a hash chain, numbered from 1 (seq), each holding the hash it
-- chains to (prev_hash) and its own (hash); a signed checkpoint of the
-- chain head every N entries or T minutes.
--
-- agentowl_audit_hash is the chain's canonical form (auditchain.Sum, the
-- reference; the conformance suite checks that the two agree):
-- SHA-256 of "agentowl.audit.v1" 0x00, the predecessor's hash, seq (8
-- bytes), then the fields, each text as its UTF-8 length (4 bytes) and
-- bytes, at as 8 bytes, all big-endian.
-- +goose StatementBegin
CREATE FUNCTION agentowl_audit_str(s text) RETURNS bytea
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$ SELECT int4send(octet_length(convert_to(s, 'UTF8'))) || convert_to(s, 'UTF8') $$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE FUNCTION agentowl_audit_hash(prev bytea, seq bigint, tenant_id text, at bigint, actor text, action text,
  target text, request_id text, details text) RETURNS bytea
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$ SELECT sha256('\x6167656e746f776c2e61756469742e763100'::bytea || prev || int8send(seq)
  || agentowl_audit_str(tenant_id) || int8send(at) || agentowl_audit_str(actor) || agentowl_audit_str(action)
  || agentowl_audit_str(target) || agentowl_audit_str(request_id) || agentowl_audit_str(details)) $$;
-- +goose StatementEnd

ALTER TABLE audit_log ADD COLUMN seq BIGINT;
ALTER TABLE audit_log ADD COLUMN prev_hash BYTEA;
ALTER TABLE audit_log ADD COLUMN hash BYTEA;

-- One row per tenant with entries: the newest entry's seq and hash (head)
-- and the hash before it (prev). Every append updates it in its own
-- transaction, so appends of one tenant serialize on this row.
CREATE TABLE audit_chain_heads (
  tenant_id TEXT PRIMARY KEY REFERENCES tenants(id),
  seq       BIGINT NOT NULL,
  prev      BYTEA NOT NULL,
  head      BYTEA NOT NULL
);

CREATE TABLE audit_checkpoints (
  tenant_id TEXT NOT NULL REFERENCES tenants(id),
  seq       BIGINT NOT NULL,
  head      BYTEA NOT NULL,
  at        BIGINT NOT NULL,
  jws       TEXT NOT NULL,
  PRIMARY KEY (tenant_id, seq)
);

-- The entries written before this version join the chain in the order
-- they were written (id).
UPDATE audit_log a SET seq = o.n
FROM (SELECT id, row_number() OVER (PARTITION BY tenant_id ORDER BY id) AS n FROM audit_log) o
WHERE a.id = o.id;
CREATE UNIQUE INDEX audit_log_chain ON audit_log (tenant_id, seq);
WITH RECURSIVE c (id, tenant_id, seq, prev, hash) AS (
  SELECT a.id, a.tenant_id, a.seq, '\x0000000000000000000000000000000000000000000000000000000000000000'::bytea,
    agentowl_audit_hash('\x0000000000000000000000000000000000000000000000000000000000000000'::bytea, a.seq,
      a.tenant_id, a.at, a.actor, a.action, a.target, a.request_id, a.details)
  FROM audit_log a WHERE a.seq = 1
  UNION ALL
  SELECT a.id, a.tenant_id, a.seq, c.hash,
    agentowl_audit_hash(c.hash, a.seq, a.tenant_id, a.at, a.actor, a.action, a.target, a.request_id, a.details)
  FROM c JOIN audit_log a ON a.tenant_id = c.tenant_id AND a.seq = c.seq + 1
)
UPDATE audit_log a SET prev_hash = c.prev, hash = c.hash FROM c WHERE a.id = c.id;
INSERT INTO audit_chain_heads (tenant_id, seq, prev, head)
SELECT a.tenant_id, a.seq, a.prev_hash, a.hash FROM audit_log a
WHERE a.seq = (SELECT max(b.seq) FROM audit_log b WHERE b.tenant_id = a.tenant_id);

-- +goose Down
DROP TABLE audit_checkpoints;
DROP TABLE audit_chain_heads;
DROP INDEX audit_log_chain;
ALTER TABLE audit_log DROP COLUMN hash;
ALTER TABLE audit_log DROP COLUMN prev_hash;
ALTER TABLE audit_log DROP COLUMN seq;
DROP FUNCTION agentowl_audit_hash(bytea, bigint, text, bigint, text, text, text, text, text);
DROP FUNCTION agentowl_audit_str(text);
