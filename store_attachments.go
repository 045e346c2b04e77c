package agentowl

import (
	"context"
	"time"
)

// Persistence of retained attachments (docs/attachments.md). The records
// are the domain's (attachment.go at the module root); the rules of
// ceilings and quota live in internal/attachment.

// Attachments is the persistence of retained attachments, implemented by
// Tx. Callers are internal/attachment (and ingress through it).
type AttachmentStore interface {
	// AttachmentCreate inserts an attachment; ErrConflict if its event
	// already has one at its position, or its blob key is taken.
	AttachmentCreate(ctx context.Context, a *Attachment) error
	AttachmentGet(ctx context.Context, id string) (*Attachment, error)
	// AttachmentListByEvent returns an event's attachments by position.
	AttachmentListByEvent(ctx context.Context, eventID string) ([]*Attachment, error)
	// AttachmentSetMissing records that a stored attachment's bytes are
	// gone, if not recorded yet.
	AttachmentSetMissing(ctx context.Context, id string, at time.Time) error
	// AttachmentDue returns up to limit attachments whose bytes are stored
	// and not deleted and whose expiry is at or before now, earliest first.
	AttachmentDue(ctx context.Context, now time.Time, limit int) ([]*Attachment, error)
	// AttachmentSetDeleted records that retention deleted the bytes;
	// ErrNotFound if they were already recorded deleted (another sweep won).
	AttachmentSetDeleted(ctx context.Context, id string, at time.Time) error

	AttachmentUploadCreate(ctx context.Context, u *AttachmentUpload) error
	// AttachmentUploadCommit removes an upload whose event commits in this
	// transaction; ErrNotFound if it is gone or abandoned.
	AttachmentUploadCommit(ctx context.Context, id string) error
	// AttachmentUploadAbandon marks an upload abandoned; ErrNotFound if it
	// is gone (its event committed) or already abandoned.
	AttachmentUploadAbandon(ctx context.Context, id string, at time.Time) error
	// AttachmentUploadDelete removes an abandoned upload once its bytes are
	// deleted; ErrNotFound if it is gone.
	AttachmentUploadDelete(ctx context.Context, id string) error
	// AttachmentUploadStale returns up to limit uploads started before
	// before or abandoned, oldest first.
	AttachmentUploadStale(ctx context.Context, before time.Time, limit int) ([]*AttachmentUpload, error)

	// RetainedBytes returns the bytes a tenant retains (0 if none).
	RetainedBytes(ctx context.Context, tenantID string) (int64, error)
	// RetainedBytesReserve adds n to a tenant's retained bytes if the
	// total stays at most limit, and reports whether it did. Concurrent
	// reservations of one tenant are serialized.
	RetainedBytesReserve(ctx context.Context, tenantID string, n, limit int64) (bool, error)
	// RetainedBytesRelease subtracts n from a tenant's retained bytes,
	// never below zero.
	RetainedBytesRelease(ctx context.Context, tenantID string, n int64) error
}
