-- +goose Up
-- Channels (docs/channels.md): bindings of the smtp, cloudflare-email, sms
-- and voice channels beside webhook, and conversations an operator can end.
--
-- bindings: an smtp binding has a receiving address (stored lower-case,
-- unique among live bindings) and no URL token; cloudflare-email, sms and
-- voice bindings have a provider secret (the Worker's shared secret, the
-- Twilio auth token), sealed by internal/secret for (bindings,
-- provider_secret, id). Only webhook bindings have a signing secret.
--
-- conversations: status 'ended' with ended_at replaces the unused 'closed'
-- (a reset ends the session; the next event starts a new conversation);
-- channel is the binding's channel, for listing; key is the channel's
-- thread identity (the webhook's conversation key, the SMS remote number,
-- the voice CallSid), at most one open conversation per binding and key.
ALTER TABLE bindings DROP CONSTRAINT bindings_channel_check;
ALTER TABLE bindings ADD CONSTRAINT bindings_channel_check
  CHECK (channel IN ('webhook', 'smtp', 'cloudflare-email', 'sms', 'voice'));
ALTER TABLE bindings ALTER COLUMN token_hash DROP NOT NULL;
ALTER TABLE bindings ADD COLUMN address TEXT, ADD COLUMN provider_secret BYTEA;
ALTER TABLE bindings ADD CONSTRAINT bindings_smtp_token CHECK ((channel = 'smtp') = (token_hash IS NULL)),
  ADD CONSTRAINT bindings_smtp_address CHECK ((channel = 'smtp') = (address IS NOT NULL)),
  ADD CONSTRAINT bindings_provider_secret CHECK ((channel IN ('cloudflare-email', 'sms', 'voice')) = (provider_secret IS NOT NULL)),
  ADD CONSTRAINT bindings_signing_secret CHECK (signing_secret IS NULL OR channel = 'webhook');
CREATE UNIQUE INDEX bindings_live_address ON bindings (address) WHERE deleted_at IS NULL AND address IS NOT NULL;

ALTER TABLE conversations DROP CONSTRAINT conversations_status_check;
ALTER TABLE conversations ADD COLUMN channel TEXT, ADD COLUMN ended_at BIGINT;
UPDATE conversations c SET channel = b.channel FROM bindings b WHERE b.id = c.binding_id;
UPDATE conversations SET status = 'ended', ended_at = last_event_at WHERE status <> 'open';
ALTER TABLE conversations ALTER COLUMN channel SET NOT NULL;
ALTER TABLE conversations ADD CONSTRAINT conversations_status_check CHECK (status IN ('open', 'ended')),
  ADD CONSTRAINT conversations_ended CHECK ((status = 'ended') = (ended_at IS NOT NULL));
CREATE INDEX conversations_tenant ON conversations (tenant_id, last_event_at);
CREATE INDEX conversations_binding ON conversations (binding_id, last_event_at);

-- +goose Down
-- Refused (CHECK) while a binding of another channel exists: delete those
-- bindings first.
DROP INDEX conversations_binding;
DROP INDEX conversations_tenant;
ALTER TABLE conversations DROP CONSTRAINT conversations_ended, DROP CONSTRAINT conversations_status_check;
UPDATE conversations SET status = 'closed' WHERE status = 'ended';
ALTER TABLE conversations DROP COLUMN ended_at, DROP COLUMN channel;
ALTER TABLE conversations ADD CONSTRAINT conversations_status_check CHECK (status IN ('open', 'closed'));

DROP INDEX bindings_live_address;
ALTER TABLE bindings DROP CONSTRAINT bindings_signing_secret, DROP CONSTRAINT bindings_provider_secret,
  DROP CONSTRAINT bindings_smtp_address, DROP CONSTRAINT bindings_smtp_token;
ALTER TABLE bindings DROP COLUMN provider_secret, DROP COLUMN address;
ALTER TABLE bindings ALTER COLUMN token_hash SET NOT NULL;
ALTER TABLE bindings DROP CONSTRAINT bindings_channel_check;
ALTER TABLE bindings ADD CONSTRAINT bindings_channel_check CHECK (channel IN ('webhook'));
