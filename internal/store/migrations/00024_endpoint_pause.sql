-- +goose Up
-- Holding handoffs (docs/channels.md, "Fixing a mis-threaded message").
--
-- endpoints.paused_at: set while an operator holds the endpoint's handoffs
-- (agentowl endpoints pause); its queued handoffs wait, held, until resume.
-- bindings.handoff_delay: microseconds each event of the binding waits
-- before its handoff (0 to 10 minutes), a window to re-thread it.
ALTER TABLE endpoints ADD COLUMN paused_at BIGINT;
ALTER TABLE bindings ADD COLUMN handoff_delay BIGINT NOT NULL DEFAULT 0 CHECK (handoff_delay BETWEEN 0 AND 600000000);

-- +goose Down
ALTER TABLE bindings DROP COLUMN handoff_delay;
ALTER TABLE endpoints DROP COLUMN paused_at;
