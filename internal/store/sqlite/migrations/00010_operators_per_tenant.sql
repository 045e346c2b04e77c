-- +goose Up
-- Operators belong to exactly one tenant (identity model v2). Before, an
-- operator was a global name with a role per tenant, and a token carried
-- every membership of its operator whichever tenant issued it, so an admin
-- of one tenant could reach another by attaching an existing name.
--
-- Each membership becomes an operator of its own in that tenant, with the
-- role it had there. An operator keeps its ID in its first tenant (the
-- smallest tenant ID it was a member of); its other memberships get new IDs.
-- Operator tokens move to the operator of the tenant that issued them; a
-- token whose operator had no role in its issuing tenant could act only
-- through the old defect and is dropped. The composite key on tokens makes
-- an operator token of one tenant for an operator of another impossible.
--
-- The old defect also let an admin of one tenant mint tokens in another
-- tenant for a name that had a role there; such a token is
-- indistinguishable from a legitimate one. So every operator token of an
-- operator who had roles in more than one tenant is revoked: its owner
-- gets a new one per tenant from that tenant's admin (or admin bootstrap).
--
-- SQLite cannot drop the old global UNIQUE(name) in place, so operators and
-- tokens (the only table referring to operators) are rebuilt.
CREATE TABLE operators_v2 (
  id         TEXT PRIMARY KEY,
  tenant_id  TEXT NOT NULL REFERENCES tenants(id),
  name       TEXT NOT NULL,
  role       TEXT NOT NULL CHECK (role IN ('admin', 'member')),
  created_at INTEGER NOT NULL,
  UNIQUE (tenant_id, name),
  UNIQUE (id, tenant_id)
);

CREATE TABLE operator_id_map (legacy_id TEXT NOT NULL, tenant_id TEXT NOT NULL, id TEXT NOT NULL, PRIMARY KEY (legacy_id, tenant_id));
INSERT INTO operator_id_map (legacy_id, tenant_id, id)
SELECT m.operator_id, m.tenant_id,
  CASE WHEN m.tenant_id = (SELECT min(m2.tenant_id) FROM memberships m2 WHERE m2.operator_id = m.operator_id)
    THEN m.operator_id
    ELSE lower(hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-4' || substr(hex(randomblob(2)), 2) || '-'
      || substr('89ab', 1 + (abs(random()) % 4), 1) || substr(hex(randomblob(2)), 2) || '-' || hex(randomblob(6)))
  END
FROM memberships m;

INSERT INTO operators_v2 (id, tenant_id, name, role, created_at)
SELECT map.id, m.tenant_id, o.name, m.role, o.created_at
FROM memberships m JOIN operators o ON o.id = m.operator_id
JOIN operator_id_map map ON map.legacy_id = m.operator_id AND map.tenant_id = m.tenant_id;

UPDATE tokens SET revoked_at = CAST(strftime('%s', 'now') AS INTEGER) * 1000000 WHERE kind = 'operator' AND revoked_at IS NULL
  AND operator_id IN (SELECT operator_id FROM memberships GROUP BY operator_id HAVING count(*) > 1);
CREATE TABLE tokens_v2 AS SELECT * FROM tokens;
UPDATE tokens_v2 SET operator_id = (SELECT map.id FROM operator_id_map map
  WHERE map.legacy_id = tokens_v2.operator_id AND map.tenant_id = tokens_v2.tenant_id)
WHERE kind = 'operator';
DELETE FROM tokens_v2 WHERE kind = 'operator' AND operator_id IS NULL;

DROP TABLE tokens;
DROP TABLE memberships;
DROP TABLE operators;
DROP TABLE operator_id_map;
ALTER TABLE operators_v2 RENAME TO operators;

CREATE TABLE tokens (
  id          TEXT PRIMARY KEY,
  kind        TEXT NOT NULL CHECK (kind IN ('operator', 'provisioner', 'instance')),
  hash        BLOB NOT NULL UNIQUE,
  tenant_id   TEXT NOT NULL REFERENCES tenants(id),
  operator_id TEXT,
  instance_id TEXT REFERENCES instances(id),
  label       TEXT NOT NULL,
  created_at  INTEGER NOT NULL,
  expires_at  INTEGER,
  revoked_at  INTEGER,
  FOREIGN KEY (operator_id, tenant_id) REFERENCES operators (id, tenant_id),
  CHECK ((kind = 'operator') = (operator_id IS NOT NULL)),
  CHECK ((kind = 'instance') = (instance_id IS NOT NULL))
);
INSERT INTO tokens (id, kind, hash, tenant_id, operator_id, instance_id, label, created_at, expires_at, revoked_at)
SELECT id, kind, hash, tenant_id, operator_id, instance_id, label, created_at, expires_at, revoked_at FROM tokens_v2;
DROP TABLE tokens_v2;
CREATE INDEX tokens_tenant ON tokens (tenant_id, kind, created_at);
CREATE INDEX tokens_instance ON tokens (instance_id);

-- The tenant whose admins may create tenants: the first one created (any
-- admin could create a tenant named default before, so the name proves nothing).
ALTER TABLE tenants ADD COLUMN system INTEGER NOT NULL DEFAULT 0 CHECK (system IN (0, 1));
UPDATE tenants SET system = 1 WHERE id = (SELECT id FROM tenants ORDER BY created_at, id LIMIT 1);
CREATE UNIQUE INDEX tenants_one_system ON tenants (system) WHERE system = 1;

-- +goose Down
SELECT * FROM the_per_tenant_identity_model_cannot_be_migrated_down;
