-- +goose Up
-- An operator's acknowledgement (assignment) of a pending AAP approval
-- request in the Needs-attention inbox. It goes with its request.
CREATE TABLE aap_acks (
  request_id      TEXT PRIMARY KEY REFERENCES approval_requests(id) ON DELETE CASCADE,
  tenant_id       TEXT NOT NULL,
  assignee        TEXT NOT NULL,
  acknowledged_at BIGINT NOT NULL
);

-- +goose Down
DROP TABLE aap_acks;
