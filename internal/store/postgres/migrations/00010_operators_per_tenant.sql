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
CREATE TABLE operator_id_map (legacy_id TEXT NOT NULL, tenant_id TEXT NOT NULL, id TEXT NOT NULL, PRIMARY KEY (legacy_id, tenant_id));
INSERT INTO operator_id_map (legacy_id, tenant_id, id)
SELECT m.operator_id, m.tenant_id,
  CASE WHEN m.tenant_id = (SELECT min(m2.tenant_id) FROM memberships m2 WHERE m2.operator_id = m.operator_id)
    THEN m.operator_id ELSE gen_random_uuid()::text END
FROM memberships m;

ALTER TABLE tokens DROP CONSTRAINT tokens_operator_id_fkey;
ALTER TABLE operators DROP CONSTRAINT operators_name_key;
ALTER TABLE operators ADD COLUMN tenant_id TEXT REFERENCES tenants(id);
ALTER TABLE operators ADD COLUMN role TEXT CHECK (role IN ('admin', 'member'));

INSERT INTO operators (id, tenant_id, name, role, created_at)
SELECT map.id, m.tenant_id, o.name, m.role, o.created_at
FROM memberships m JOIN operators o ON o.id = m.operator_id
JOIN operator_id_map map ON map.legacy_id = m.operator_id AND map.tenant_id = m.tenant_id
WHERE map.id <> map.legacy_id;
UPDATE operators o SET tenant_id = m.tenant_id, role = m.role
FROM memberships m JOIN operator_id_map map ON map.legacy_id = m.operator_id AND map.tenant_id = m.tenant_id
WHERE map.id = map.legacy_id AND o.id = map.legacy_id;

UPDATE tokens SET revoked_at = (extract(epoch FROM now()) * 1000000)::bigint WHERE kind = 'operator' AND revoked_at IS NULL
  AND operator_id IN (SELECT operator_id FROM memberships GROUP BY operator_id HAVING count(*) > 1);
DELETE FROM tokens t WHERE t.kind = 'operator' AND NOT EXISTS (
  SELECT 1 FROM operator_id_map map WHERE map.legacy_id = t.operator_id AND map.tenant_id = t.tenant_id);
UPDATE tokens t SET operator_id = map.id FROM operator_id_map map
WHERE t.kind = 'operator' AND map.legacy_id = t.operator_id AND map.tenant_id = t.tenant_id;

DROP TABLE memberships;
DROP TABLE operator_id_map;
DELETE FROM operators WHERE tenant_id IS NULL;
ALTER TABLE operators ALTER COLUMN tenant_id SET NOT NULL, ALTER COLUMN role SET NOT NULL;
ALTER TABLE operators ADD CONSTRAINT operators_tenant_name UNIQUE (tenant_id, name);
ALTER TABLE operators ADD CONSTRAINT operators_id_tenant UNIQUE (id, tenant_id);
ALTER TABLE tokens ADD CONSTRAINT tokens_operator_tenant FOREIGN KEY (operator_id, tenant_id) REFERENCES operators (id, tenant_id);

-- The tenant whose admins may create tenants: the first one created (any
-- admin could create a tenant named default before, so the name proves nothing).
ALTER TABLE tenants ADD COLUMN system BOOLEAN NOT NULL DEFAULT FALSE;
UPDATE tenants SET system = TRUE WHERE id = (SELECT id FROM tenants ORDER BY created_at, id LIMIT 1);
CREATE UNIQUE INDEX tenants_one_system ON tenants (system) WHERE system;

-- +goose Down
SELECT * FROM the_per_tenant_identity_model_cannot_be_migrated_down;
