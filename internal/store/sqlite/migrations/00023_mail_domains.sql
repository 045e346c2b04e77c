-- +goose Up
-- Mail domains belong to tenants (docs/channels.md, "Mail domains"): an
-- smtp binding's address must be under a domain assigned to its tenant
-- (or be assigned itself), or be generated at the server's SMTP domain.
-- domain is a lower-case host name, or one lower-case address.
CREATE TABLE mail_domains (
  domain      TEXT PRIMARY KEY,
  tenant_id   TEXT NOT NULL REFERENCES tenants(id),
  created_at  INTEGER NOT NULL
);
CREATE INDEX mail_domains_tenant ON mail_domains (tenant_id, domain);

-- Existing bindings keep working. Each domain that the live smtp bindings
-- of exactly one tenant use is assigned to that tenant, since its first
-- binding there; a domain several tenants use stays unassigned, and
-- work-doctor lists its bindings (check bindings_outside_mail_domains).
-- Generated addresses (agent- and 13 characters, at the server's SMTP
-- domain) do not count as use: every tenant may have them.
INSERT INTO mail_domains (domain, tenant_id, created_at)
  SELECT domain, min(tenant_id), min(created_at) FROM (
    SELECT substr(address, instr(address, '@') + 1) AS domain, tenant_id, created_at FROM bindings
    WHERE channel = 'smtp' AND deleted_at IS NULL AND address IS NOT NULL
      AND NOT (substr(address, 1, 6) = 'agent-' AND instr(address, '@') = 20)
  ) used
  GROUP BY domain HAVING count(DISTINCT tenant_id) = 1;

-- +goose Down
DROP TABLE mail_domains;
