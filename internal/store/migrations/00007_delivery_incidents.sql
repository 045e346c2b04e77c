-- +goose Up
-- Incidents for deliveries that exhausted their retries (docs/attention.md):
-- the outbox message an incident reports, at most one incident per message.
ALTER TABLE attention_items ADD COLUMN message_id TEXT;
CREATE UNIQUE INDEX attention_message ON attention_items (message_id) WHERE message_id IS NOT NULL;

-- +goose Down
DROP INDEX attention_message;
ALTER TABLE attention_items DROP COLUMN message_id;
