-- +goose Up
-- Retained email attachments (docs/attachments.md). Each row is one part of
-- an inbound message: stored (blob_key set, bytes in the object store) or
-- blocked at ingest (blocked holds the reason, no bytes were kept).
-- expires_at is fixed when the file is recorded: later retention settings
-- never move it. deleted_at is when retention deleted the bytes; missing_at
-- is when the bytes were found gone without that. Availability is derived:
-- blocked, else expired from expires_at (whether or not the bytes are
-- deleted yet), else missing, else available.
CREATE TABLE attachments (
  id            TEXT PRIMARY KEY,
  tenant_id     TEXT NOT NULL REFERENCES tenants(id),
  event_id      TEXT NOT NULL REFERENCES events(id),
  position      BIGINT NOT NULL CHECK (position >= 0),
  name          TEXT NOT NULL,
  size          BIGINT NOT NULL CHECK (size >= 0),
  sha256        BYTEA,
  content_id    TEXT NOT NULL,
  declared_type TEXT NOT NULL,
  sniffed_type  TEXT NOT NULL,
  inline        BIGINT NOT NULL CHECK (inline IN (0, 1)),
  blob_key      TEXT UNIQUE,
  blocked       TEXT,
  created_at    BIGINT NOT NULL,
  expires_at    BIGINT NOT NULL,
  deleted_at    BIGINT,
  missing_at    BIGINT,
  UNIQUE (event_id, position),
  CHECK ((blocked IS NULL) = (blob_key IS NOT NULL)),
  CHECK ((blob_key IS NULL) = (sha256 IS NULL)),
  CHECK (blob_key IS NOT NULL OR (deleted_at IS NULL AND missing_at IS NULL)),
  CHECK (expires_at > created_at)
);
-- The retention sweep: stored bytes not yet deleted, by expiry.
CREATE INDEX attachments_due ON attachments (expires_at) WHERE blob_key IS NOT NULL AND deleted_at IS NULL;

-- One row per message whose parts are being written to the object store,
-- from before the first byte until its event commits (deleted in the same
-- transaction) or the message is refused. A row older than the orphan
-- grace names bytes of a message that never committed (a crash). Whoever
-- deletes abandoned bytes first sets abandoned_at, and a commit deletes
-- only a row without it: so either the event commits with its bytes, or
-- the bytes are deleted and the event never commits. The row goes after
-- its bytes, so a sweep interrupted half-way is finished by the next.
CREATE TABLE attachment_uploads (
  id           TEXT PRIMARY KEY,
  tenant_id    TEXT NOT NULL REFERENCES tenants(id),
  started_at   BIGINT NOT NULL,
  abandoned_at BIGINT
);
CREATE INDEX attachment_uploads_started ON attachment_uploads (started_at);

-- Bytes each tenant retains in the object store, against its quota.
CREATE TABLE attachment_usage (
  tenant_id      TEXT PRIMARY KEY REFERENCES tenants(id),
  retained_bytes BIGINT NOT NULL CHECK (retained_bytes >= 0)
);

-- +goose Down
DROP TABLE attachment_usage;
DROP TABLE attachment_uploads;
DROP TABLE attachments;
