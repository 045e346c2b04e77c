package agentowl

import "time"

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

// Availability is whether an attachment's bytes can be downloaded. It is
// not stored: Attachment.Availability derives it from the record and the
// time, and CanBecome says how it may change.
type Availability string

// Availabilities, in the order they are decided: a blocked part never had
// bytes; an expired one is refused from its expiry instant, even while its
// bytes await deletion; a missing one lost its bytes before expiry.
const (
	// AttachmentAvailable: stored at ingest (internal/attachment's upload)
	// and not expired. Left at its expiry instant, or when a download
	// finds the bytes gone (internal/attachment.Open records MissingAt).
	AttachmentAvailable Availability = "available"
	// AttachmentExpired: from ExpiresAt on, which is fixed when the file is
	// recorded. Final: the retention sweep (SweepExpired) deletes the
	// bytes afterwards and the part stays expired, not missing.
	AttachmentExpired Availability = "expired"
	// AttachmentBlocked: recorded blocked at ingest (too large, over
	// quota), with no bytes. Final: it never becomes anything else, its
	// expiry included.
	AttachmentBlocked Availability = "blocked"
	// AttachmentMissing: its bytes were found gone before its expiry.
	// Left only at its expiry instant: nothing restores the bytes.
	AttachmentMissing Availability = "missing"
)

// Expired reports whether a's retention has ended at now: from its expiry
// instant on, downloads refuse it and the retention sweep may delete its
// bytes.
func (a *Attachment) Expired(now time.Time) bool { return !now.Before(a.ExpiresAt) }

// Availability is a's availability at now.
func (a *Attachment) Availability(now time.Time) Availability {
	switch {
	case a.Blocked != "":
		return AttachmentBlocked
	case a.Expired(now):
		return AttachmentExpired
	case a.MissingAt != nil || a.DeletedAt != nil:
		return AttachmentMissing
	}
	return AttachmentAvailable
}

// CanBecome reports whether an attachment whose availability is s may
// later have availability next, so that a reader knows which answers of
// a download can change: an available part may become missing or
// expired, a missing one expired; blocked and expired are final. No
// availability becomes itself (nothing sets it again), and an unknown one
// is legal on neither side.
func (s Availability) CanBecome(next Availability) bool {
	switch s {
	case AttachmentAvailable:
		return next == AttachmentMissing || next == AttachmentExpired
	case AttachmentMissing:
		return next == AttachmentExpired
	}
	return false
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
