// Package attachment holds the use-cases of retained email attachments
// (docs/attachments.md): the parser ceilings enforced while a message's
// parts stream into private object storage (internal/blob), the records
// committed with their event, manifests and downloads for runtimes and
// operators, and the retention and orphan sweeps. It holds business rules
// only: no SQL, no HTTP, no MIME parsing (the channels parse and call
// Upload as each part's bytes pass).
package attachment

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/access"
	"github.com/agentowl/agentowl/internal/blob"
	"github.com/agentowl/agentowl/internal/work"
)

// Service implements retained attachments.
type Service struct {
	store agentowl.Store
	blobs *blob.Store
	clock agentowl.Clock
	cfg   Config
	log   *slog.Logger
}

// New returns a Service keeping bytes in blobs.
func New(st agentowl.Store, blobs *blob.Store, clock agentowl.Clock, cfg Config, log *slog.Logger) (*Service, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if blobs == nil {
		return nil, errors.New("attachment: an object store is required")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Service{store: st, blobs: blobs, clock: clock, cfg: cfg, log: log}, nil
}

// Config returns the effective configuration (defaults applied): channels
// read the ceilings, MaxMessageBytes among them, from it.
func (s *Service) Config() Config { return s.cfg }

// storeUnavailable is the answer when the object store fails: the caller
// retries (a channel answers its temporary-failure code). The cause is
// logged, never shown.
func (s *Service) storeUnavailable(op string, err error) error {
	s.log.Error("object store failed", "op", op, "store", s.blobs.Kind(), "err", err)
	return &agentowl.Error{Code: agentowl.ECodeUnavailable, Message: "The attachment store cannot be reached now; retry shortly.",
		RetryAfter: 5 * time.Second}
}

// ---- what events and manifests show

// Entry is one attachment as events carry it and manifests list it.
type Entry struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Size int64  `json:"size"`
	// SHA256 is the lowercase hex SHA-256 of the bytes; absent when
	// blocked (none were kept).
	SHA256 string `json:"sha256,omitempty"`
	// ContentID is the part's Content-ID without its angle brackets: what
	// cid: URLs of the HTML body name.
	ContentID string `json:"content_id,omitempty"`
	// ContentType is the type the sender declared; SniffedType what the
	// bytes look like. Downloads are always application/octet-stream.
	ContentType  string `json:"content_type"`
	SniffedType  string `json:"sniffed_type"`
	Inline       bool   `json:"inline"`
	ExpiresAt    string `json:"expires_at"`
	Availability string `json:"availability"`
	// BlockedReason says why a blocked part was not kept.
	BlockedReason string `json:"blocked_reason,omitempty"`
}

// EntryOf is a as shown at now.
func EntryOf(a *agentowl.Attachment, now time.Time) Entry {
	e := Entry{ID: a.ID, Name: a.Name, Size: a.Size, ContentID: a.ContentID, ContentType: a.DeclaredType,
		SniffedType: a.SniffedType, Inline: a.Inline, ExpiresAt: a.ExpiresAt.UTC().Format(time.RFC3339),
		Availability: string(a.Availability(now)), BlockedReason: a.Blocked}
	if a.SHA256 != nil {
		e.SHA256 = hex.EncodeToString(a.SHA256)
	}
	return e
}

// Manifest is the attachments of one event, with their availability at
// the moment it was read.
type Manifest struct {
	EventID string
	// WorkID is set for a runtime's manifest.
	WorkID string
	Items  []*agentowl.Attachment
	At     time.Time
}

// Entries are the manifest's items as shown.
func (m *Manifest) Entries() []Entry {
	out := make([]Entry, 0, len(m.Items))
	for _, a := range m.Items {
		out = append(out, EntryOf(a, m.At))
	}
	return out
}

func entriesJSON(as []*agentowl.Attachment, at time.Time) (json.RawMessage, error) {
	m := Manifest{Items: as, At: at}
	return json.Marshal(m.Entries())
}

// ---- runtimes

// noWork is the answer for work that is not the credential's endpoint's:
// another endpoint's or tenant's work does not show.
func noWork(id string) error {
	return agentowl.Errorf(agentowl.ECodeNotFound, "No work %q for this runtime credential's endpoint.", id)
}

func noAttachment(id string) error {
	return agentowl.Errorf(agentowl.ECodeNotFound, "No attachment %q here.", id)
}

// runtimeWork reads work of c's endpoint.
func runtimeWork(ctx context.Context, tx agentowl.Tx, c *agentowl.RuntimeCredential, workID string) (*agentowl.Work, error) {
	w, err := tx.WorkGet(ctx, workID)
	if errors.Is(err, agentowl.ErrNotFound) || (err == nil && (w.EndpointID != c.EndpointID || w.TenantID != c.TenantID)) {
		return nil, noWork(workID)
	}
	return w, err
}

// WorkManifest lists the attachments of the event that work workID handles,
// for runtime credential c (attachments:read) of the work's endpoint. Work
// replayed from the same event shows the same manifest.
func (s *Service) WorkManifest(ctx context.Context, c *agentowl.RuntimeCredential, workID string) (*Manifest, error) {
	if err := work.RequireScope(c, work.ScopeAttachments); err != nil {
		return nil, err
	}
	m := &Manifest{WorkID: workID}
	err := s.store.Read(ctx, func(tx agentowl.Tx) error {
		w, err := runtimeWork(ctx, tx, c, workID)
		if err != nil {
			return err
		}
		m.EventID = w.EventID
		m.Items, err = tx.AttachmentListByEvent(ctx, w.EventID)
		return err
	})
	m.At = s.clock.Now()
	return m, err
}

// WorkAttachment returns attachment id of work workID's event for runtime
// credential c, if its bytes can be downloaded now: otherwise
// attachment_blocked, attachment_expired or attachment_missing.
func (s *Service) WorkAttachment(ctx context.Context, c *agentowl.RuntimeCredential, workID, id string) (*agentowl.Attachment, error) {
	if err := work.RequireScope(c, work.ScopeAttachments); err != nil {
		return nil, err
	}
	var a *agentowl.Attachment
	err := s.store.Read(ctx, func(tx agentowl.Tx) error {
		w, err := runtimeWork(ctx, tx, c, workID)
		if err != nil {
			return err
		}
		a, err = eventAttachment(ctx, tx, w.EventID, id)
		return err
	})
	if err != nil {
		return nil, err
	}
	return a, downloadable(a, s.clock.Now())
}

func eventAttachment(ctx context.Context, tx agentowl.Tx, eventID, id string) (*agentowl.Attachment, error) {
	a, err := tx.AttachmentGet(ctx, id)
	if errors.Is(err, agentowl.ErrNotFound) || (err == nil && a.EventID != eventID) {
		return nil, noAttachment(id)
	}
	return a, err
}

// downloadable reports why a's bytes cannot be served at now, if so.
func downloadable(a *agentowl.Attachment, now time.Time) error {
	switch a.Availability(now) {
	case agentowl.AttachmentBlocked:
		return agentowl.Errorf(agentowl.ECodeAttachmentBlocked, "Attachment %q was blocked when the message arrived (%s): no bytes were kept.",
			a.ID, a.Blocked)
	case agentowl.AttachmentExpired:
		return agentowl.Errorf(agentowl.ECodeAttachmentExpired, "Attachment %q expired at %s.", a.ID,
			a.ExpiresAt.UTC().Format(time.RFC3339))
	case agentowl.AttachmentMissing:
		return agentowl.Errorf(agentowl.ECodeAttachmentMissing, "The bytes of attachment %q are missing from the attachment store.", a.ID)
	}
	return nil
}

// ---- operators

func notFound(m *agentowl.Membership, what, id string) error {
	return agentowl.Errorf(agentowl.ECodeNotFound, "No %s %q in tenant %q.", what, id, m.TenantName)
}

func tenantEvent(ctx context.Context, tx agentowl.Tx, m *agentowl.Membership, id string) (*agentowl.Event, error) {
	ev, err := tx.EventGet(ctx, id)
	if errors.Is(err, agentowl.ErrNotFound) || (err == nil && ev.TenantID != m.TenantID) {
		return nil, notFound(m, "event", id)
	}
	return ev, err
}

// EventManifest lists an event's attachments. Members may.
func (s *Service) EventManifest(ctx context.Context, p *access.Principal, tenant, eventID string) (*Manifest, error) {
	return s.manifest(ctx, p, tenant, &Manifest{EventID: eventID}, func(tx agentowl.Tx, m *agentowl.Membership) (string, error) {
		_, err := tenantEvent(ctx, tx, m, eventID)
		return eventID, err
	})
}

// WorkFiles lists the attachments of the event that work workID of the
// tenant handles: the retained files a Needs-attention item about that
// work links to. Members may.
func (s *Service) WorkFiles(ctx context.Context, p *access.Principal, tenant, workID string) (*Manifest, error) {
	return s.manifest(ctx, p, tenant, &Manifest{WorkID: workID}, func(tx agentowl.Tx, m *agentowl.Membership) (string, error) {
		w, err := tx.WorkGet(ctx, workID)
		if errors.Is(err, agentowl.ErrNotFound) || (err == nil && w.TenantID != m.TenantID) {
			return "", notFound(m, "work", workID)
		}
		if err != nil {
			return "", err
		}
		return w.EventID, nil
	})
}

// manifest completes out with the attachments of the tenant's event that
// eventOf finds (an error for anything not the member's to see), for a
// member of the tenant.
func (s *Service) manifest(ctx context.Context, p *access.Principal, tenant string, out *Manifest,
	eventOf func(tx agentowl.Tx, m *agentowl.Membership) (string, error)) (*Manifest, error) {
	m, err := p.Tenant(tenant, agentowl.RoleMember)
	if err != nil {
		return nil, err
	}
	err = s.store.Read(ctx, func(tx agentowl.Tx) error {
		eventID, err := eventOf(tx, m)
		if err != nil {
			return err
		}
		out.EventID = eventID
		out.Items, err = tx.AttachmentListByEvent(ctx, eventID)
		return err
	})
	out.At = s.clock.Now()
	return out, err
}

// EventAttachment is WorkAttachment for an operator: attachment id of an
// event of the tenant. Members may.
func (s *Service) EventAttachment(ctx context.Context, p *access.Principal, tenant, eventID, id string) (*agentowl.Attachment, error) {
	m, err := p.Tenant(tenant, agentowl.RoleMember)
	if err != nil {
		return nil, err
	}
	var a *agentowl.Attachment
	err = s.store.Read(ctx, func(tx agentowl.Tx) error {
		ev, err := tenantEvent(ctx, tx, m, eventID)
		if err != nil {
			return err
		}
		if a, err = eventAttachment(ctx, tx, ev.ID, id); errors.Is(err, agentowl.ErrNotFound) {
			return notFound(m, "attachment", id)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return a, downloadable(a, s.clock.Now())
}

// ---- bytes

// Open reads length bytes (length < 0: to the end) from offset of a, an
// attachment that WorkAttachment or EventAttachment returned. Bytes found
// gone before a's expiry are recorded missing (attachment_missing); past
// its expiry the answer is attachment_expired. Nothing substitutes them.
func (s *Service) Open(ctx context.Context, a *agentowl.Attachment, offset, length int64) (io.ReadCloser, error) {
	r, err := s.blobs.Open(ctx, a.BlobKey, offset, length)
	if err == nil {
		return r, nil
	}
	if !errors.Is(err, blob.ErrNotFound) {
		return nil, s.storeUnavailable("open", err)
	}
	now := s.clock.Now()
	if a.Expired(now) {
		return nil, downloadable(a, now) // deleted by retention: expired, not missing
	}
	if err := s.store.Write(ctx, func(tx agentowl.Tx) error { return tx.AttachmentSetMissing(ctx, a.ID, now) }); err != nil {
		return nil, err
	}
	s.log.Warn("attachment bytes missing", "attachment", a.ID, "event", a.EventID, "key", a.BlobKey)
	a.MissingAt = &now
	return nil, downloadable(a, now)
}

// ---- maintenance

// sweepBatch is how many records one sweep transaction takes.
const sweepBatch = 100

// SweepExpired deletes the bytes of every attachment whose expiry is at or
// before now and releases them from their tenants' retained bytes; it
// returns how many it deleted. Bytes inside their retention are never
// touched. Downloads already refuse an expired file from its expiry
// instant, so the sweep may lag; every replica may run it (each deletion
// is recorded once).
func (s *Service) SweepExpired(ctx context.Context, now time.Time) (int, error) {
	return sweepAll(ctx, now, s.sweepExpired)
}

// sweepAll runs batches of sweepBatch records until one is not full and
// returns how many records they cleared.
func sweepAll(ctx context.Context, now time.Time, batch func(ctx context.Context, now time.Time, limit int) (int, bool, error)) (int, error) {
	n := 0
	for {
		k, full, err := batch(ctx, now, sweepBatch)
		n += k
		if err != nil || !full {
			return n, err
		}
	}
}

// DeleteExpired is the maintenance scheduler's retained-bytes hook (its
// retained_bytes job): one batch of up to limit orphaned uploads
// (SweepOrphans) and of up to limit expired files (SweepExpired). It
// returns how many of both it cleared; the scheduler calls again while
// that reaches limit.
func (s *Service) DeleteExpired(ctx context.Context, now time.Time, limit int) (int, error) {
	orphans, _, err := s.sweepOrphans(ctx, now, limit)
	if err != nil {
		return orphans, err
	}
	expired, _, err := s.sweepExpired(ctx, now, limit)
	return orphans + expired, err
}

// sweepExpired deletes one batch of up to limit expired files; full
// reports that the batch was full (more may be due).
func (s *Service) sweepExpired(ctx context.Context, now time.Time, limit int) (n int, full bool, err error) {
	var due []*agentowl.Attachment
	err = s.store.Read(ctx, func(tx agentowl.Tx) (err error) {
		due, err = tx.AttachmentDue(ctx, now, limit)
		return err
	})
	if err != nil {
		return 0, false, err
	}
	for _, a := range due {
		if !a.Expired(now) {
			return n, false, fmt.Errorf("attachment: %s is inside its retention until %s", a.ID, a.ExpiresAt) // a store defect
		}
		if err := s.blobs.Delete(ctx, a.BlobKey); err != nil {
			return n, false, s.storeUnavailable("delete", err)
		}
		err := s.store.Write(ctx, func(tx agentowl.Tx) error {
			if err := tx.AttachmentSetDeleted(ctx, a.ID, now); err != nil {
				return err
			}
			return tx.RetainedBytesRelease(ctx, a.TenantID, a.Size)
		})
		switch {
		case errors.Is(err, agentowl.ErrNotFound): // another replica recorded it first
		case err != nil:
			return n, false, err
		default:
			n++
		}
	}
	return n, len(due) == limit, nil
}

// SweepOrphans deletes the bytes of uploads whose event never committed
// (the process died between storing bytes and committing, or a refusal's
// clean-up failed): uploads older than the orphan grace at now, and those
// already abandoned. It returns how many uploads it cleared. An upload
// whose event commits meanwhile is left alone: its bytes are the event's.
func (s *Service) SweepOrphans(ctx context.Context, now time.Time) (int, error) {
	return sweepAll(ctx, now, s.sweepOrphans)
}

// sweepOrphans clears one batch of up to limit stale uploads.
func (s *Service) sweepOrphans(ctx context.Context, now time.Time, limit int) (n int, full bool, err error) {
	var stale []*agentowl.AttachmentUpload
	err = s.store.Read(ctx, func(tx agentowl.Tx) (err error) {
		stale, err = tx.AttachmentUploadStale(ctx, now.Add(-s.cfg.OrphanGrace), limit)
		return err
	})
	if err != nil {
		return 0, false, err
	}
	for _, u := range stale {
		switch err := s.discard(ctx, u, now); {
		case errors.Is(err, agentowl.ErrNotFound): // committed meanwhile
		case err != nil:
			return n, false, err
		default:
			n++
		}
	}
	return n, len(stale) == limit, nil
}

// discard deletes an upload's bytes: it marks the upload abandoned first
// (from then on its event cannot commit; ErrNotFound if it committed), then
// deletes the bytes, then the upload.
func (s *Service) discard(ctx context.Context, u *agentowl.AttachmentUpload, now time.Time) error {
	if u.AbandonedAt == nil {
		if err := s.store.Write(ctx, func(tx agentowl.Tx) error { return tx.AttachmentUploadAbandon(ctx, u.ID, now) }); err != nil {
			return err
		}
	}
	if _, err := s.blobs.DeletePrefix(ctx, blob.GroupPrefix(u.TenantID, u.ID)); err != nil {
		return s.storeUnavailable("delete", err)
	}
	err := s.store.Write(ctx, func(tx agentowl.Tx) error { return tx.AttachmentUploadDelete(ctx, u.ID) })
	if errors.Is(err, agentowl.ErrNotFound) {
		return nil // another sweep finished it
	}
	return err
}
