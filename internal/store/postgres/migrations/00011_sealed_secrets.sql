-- +goose Up
-- Every stored secret that must be read back is sealed by internal/secret,
-- bound to its table, column and row, with a format byte first. Before
-- this version an instance's receiver signing secret was stored in plain
-- text (instances.delivery_secret), and endpoint and binding secrets were
-- sealed without a format byte, bound to a purpose string instead. SQL
-- cannot seal, so this migration queues those values in secrets_to_seal
-- and the store seals each in place at start-up, right after migrating and
-- in one transaction with the key check (sqlstore.PrepareSecrets), leaving
-- the queue empty.
CREATE TABLE secrets_to_seal (
  table_name          TEXT NOT NULL,
  column_name         TEXT NOT NULL,
  row_id              TEXT NOT NULL,
  value               BYTEA NOT NULL,
  -- NULL: value is the plaintext; otherwise value was sealed without a
  -- format byte, for this purpose.
  unversioned_purpose TEXT,
  PRIMARY KEY (table_name, column_name, row_id)
);
ALTER TABLE instances ADD COLUMN delivery_secret_sealed BYTEA;
INSERT INTO secrets_to_seal (table_name, column_name, row_id, value)
  SELECT 'instances', 'delivery_secret_sealed', id, convert_to(delivery_secret, 'UTF8') FROM instances WHERE delivery_secret IS NOT NULL;
ALTER TABLE instances DROP COLUMN delivery_secret;
INSERT INTO secrets_to_seal (table_name, column_name, row_id, value, unversioned_purpose)
  SELECT 'endpoints', 'signing_secret', id, signing_secret, 'endpoint:' || id || ':signing' FROM endpoints;
INSERT INTO secrets_to_seal (table_name, column_name, row_id, value, unversioned_purpose)
  SELECT 'endpoints', 'decision_secret', id, decision_secret, 'endpoint:' || id || ':decision' FROM endpoints
  WHERE decision_secret IS NOT NULL;
INSERT INTO secrets_to_seal (table_name, column_name, row_id, value, unversioned_purpose)
  SELECT 'bindings', 'signing_secret', id, signing_secret, 'binding:' || id || ':signing' FROM bindings
  WHERE signing_secret IS NOT NULL;

-- +goose Down
-- Sealed secrets cannot be unsealed in SQL: instances lose their receiver
-- secret (set delivery again), and endpoint and binding secrets stay in the
-- format the earlier version cannot open (rotate them).
ALTER TABLE instances ADD COLUMN delivery_secret TEXT;
ALTER TABLE instances DROP COLUMN delivery_secret_sealed;
DROP TABLE secrets_to_seal;
