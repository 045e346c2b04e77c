-- +goose Up
-- A handoff's body need not repeat its event's payload (an email's text can
-- be megabytes): body_event names the event whose payload belongs in the
-- body at byte body_at, and the body is stored without it. The store puts
-- the payload back in every read, so a message's bytes stay exactly those
-- sent on each attempt. An event is kept while a message refers to it
-- (the events retention statement checks outbox_body_event).
ALTER TABLE outbox ADD COLUMN body_event TEXT;
ALTER TABLE outbox ADD COLUMN body_at INTEGER;
CREATE INDEX outbox_body_event ON outbox (body_event) WHERE body_event IS NOT NULL;

-- +goose Down
UPDATE outbox SET body = substr(body, 1, body_at) || (SELECT payload FROM events WHERE id = body_event) || substr(body, body_at + 1)
  WHERE body_event IS NOT NULL;
DROP INDEX outbox_body_event;
ALTER TABLE outbox DROP COLUMN body_at;
ALTER TABLE outbox DROP COLUMN body_event;
