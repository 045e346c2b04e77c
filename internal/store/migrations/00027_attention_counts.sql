-- +goose Up
-- Needs attention's counts per kind and status (docs/console.md): a
-- covering index, so that counting a tenant's unresolved items, and those
-- that expire soon, reads the index alone however many there are.
CREATE INDEX attention_counts ON attention_items (tenant_id, status, kind, expires_at);

-- +goose Down
DROP INDEX attention_counts;
