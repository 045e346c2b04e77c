-- +goose Up
-- Email threading (docs/channels.md): the Message-ID of each email event,
-- by receiving binding, names the conversation it joined, so that a reply's
-- In-Reply-To and References find it; and each email conversation's
-- participants (the addresses of its messages' From, To, Cc and Reply-To),
-- whom a reply must be from to continue it.
CREATE TABLE email_messages (
  binding_id      TEXT NOT NULL REFERENCES bindings(id),
  message_id      TEXT NOT NULL,
  tenant_id       TEXT NOT NULL REFERENCES tenants(id),
  conversation_id TEXT NOT NULL REFERENCES conversations(id),
  event_id        TEXT NOT NULL REFERENCES events(id),
  PRIMARY KEY (binding_id, message_id)
);
CREATE INDEX email_messages_conversation ON email_messages (conversation_id);

CREATE TABLE conversation_participants (
  conversation_id TEXT NOT NULL REFERENCES conversations(id),
  address         TEXT NOT NULL,
  PRIMARY KEY (conversation_id, address)
);

-- +goose Down
DROP TABLE conversation_participants;
DROP TABLE email_messages;
