package store

import (
	"context"
	"time"
)

// Records of retained attachments (docs/attachments.md): the parts of an
// inbound message, their bytes in the object store (internal/blob), the
// uploads in progress and each tenant's retained bytes. The rules (ceilings,
// quota, expiry) live in internal/attachment.

// Attachment is one part of an inbound message: stored, or blocked at
// ingest with a reason and no bytes.
type Attachment struct {
	ID       string // att_…
	TenantID string
	EventID  string
	// Position orders the parts of one message, from 0.
	Position int
	// Name is the safe display name (internal/attachment.SafeName), never
	// used as a key or a path.
	Name string
	// Size is the decoded size in bytes (for a blocked part, what the
	// parser decoded of it).
	Size int64
	// SHA256 of the stored bytes; nil when blocked.
	SHA256    []byte
	ContentID string
	// DeclaredType is the sender's Content-Type; SniffedType is what the
	// first bytes look like (http.DetectContentType).
	DeclaredType string
	SniffedType  string
	// Inline is true for a part meant to show in the body (an image with a
	// Content-ID, Content-Disposition: inline).
	Inline bool
	// BlobKey is the object's key; "" when blocked.
	BlobKey string
	// Blocked is why the part was not kept ("" when stored).
	Blocked   string
	CreatedAt time.Time
	// ExpiresAt is fixed when the file is recorded; changed retention
	// settings never move it.
	ExpiresAt time.Time
	// DeletedAt is when retention deleted the bytes.
	DeletedAt *time.Time
	// MissingAt is when the bytes were found gone before their expiry.
	MissingAt *time.Time
}

// Availability is whether an attachment's bytes can be downloaded.
type Availability string

// Availabilities, in the order they are decided: a blocked part never had
// bytes; an expired one is refused from its expiry instant, even while its
// bytes await deletion; a missing one lost its bytes before expiry.
const (
	Available Availability = "available"
	Expired   Availability = "expired"
	Blocked   Availability = "blocked"
	Missing   Availability = "missing"
)

// Availability is a's availability at now.
func (a *Attachment) Availability(now time.Time) Availability {
	switch {
	case a.Blocked != "":
		return Blocked
	case !now.Before(a.ExpiresAt):
		return Expired
	case a.MissingAt != nil || a.DeletedAt != nil:
		return Missing
	}
	return Available
}

// AttachmentUpload is a message whose parts are being written to the object
// store: created before the first byte, deleted in the transaction that
// commits its event, or abandoned (a refused message, a crash) and deleted
// after its bytes.
type AttachmentUpload struct {
	ID        string // upl_…
	TenantID  string
	StartedAt time.Time
	// AbandonedAt is set once its bytes are being deleted: its event can no
	// longer commit.
	AbandonedAt *time.Time
}

// Attachments is the persistence of retained attachments, implemented by
// Tx. Callers are internal/attachment (and ingress through it).
type Attachments interface {
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
