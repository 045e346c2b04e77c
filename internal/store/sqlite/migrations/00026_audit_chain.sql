-- +goose Up
-- The tamper-evident audit log (internal/auditchain): each tenant's entries
-- form a hash chain, numbered from 1 (seq), each holding the hash it
-- chains to (prev_hash) and its own (hash); a signed checkpoint of the
-- chain head every N entries or T minutes.
--
-- agentowl_audit_hash is the chain's canonical form, auditchain.Sum,
-- which the store registers with SQLite (auditchain.go of this package).
ALTER TABLE audit_log ADD COLUMN seq INTEGER;
ALTER TABLE audit_log ADD COLUMN prev_hash BLOB;
ALTER TABLE audit_log ADD COLUMN hash BLOB;

-- One row per tenant with entries: the newest entry's seq and hash (head)
-- and the hash before it (prev). Every append updates it in its own
-- transaction.
CREATE TABLE audit_chain_heads (
  tenant_id TEXT PRIMARY KEY REFERENCES tenants(id),
  seq       INTEGER NOT NULL,
  prev      BLOB NOT NULL,
  head      BLOB NOT NULL
);

CREATE TABLE audit_checkpoints (
  tenant_id TEXT NOT NULL REFERENCES tenants(id),
  seq       INTEGER NOT NULL,
  head      BLOB NOT NULL,
  at        INTEGER NOT NULL,
  jws       TEXT NOT NULL,
  PRIMARY KEY (tenant_id, seq)
);

-- The entries written before this version join the chain in the order
-- they were written (id).
UPDATE audit_log SET seq = o.n
FROM (SELECT id, row_number() OVER (PARTITION BY tenant_id ORDER BY id) AS n FROM audit_log) AS o
WHERE audit_log.id = o.id;
CREATE UNIQUE INDEX audit_log_chain ON audit_log (tenant_id, seq);
WITH RECURSIVE c (id, tenant_id, seq, prev, hash) AS (
  SELECT a.id, a.tenant_id, a.seq, zeroblob(32),
    agentowl_audit_hash(zeroblob(32), a.seq, a.tenant_id, a.at, a.actor, a.action, a.target, a.request_id, a.details)
  FROM audit_log a WHERE a.seq = 1
  UNION ALL
  SELECT a.id, a.tenant_id, a.seq, c.hash,
    agentowl_audit_hash(c.hash, a.seq, a.tenant_id, a.at, a.actor, a.action, a.target, a.request_id, a.details)
  FROM c JOIN audit_log a ON a.tenant_id = c.tenant_id AND a.seq = c.seq + 1
)
UPDATE audit_log SET prev_hash = c.prev, hash = c.hash FROM c WHERE audit_log.id = c.id;
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
