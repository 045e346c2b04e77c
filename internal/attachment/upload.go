package attachment

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/blob"
)

// What a ceiling does (docs/attachments.md):
//
//   - a file over MaxFileBytes is recorded blocked (file_too_large) and
//     the message kept: the sender's text and other files still reach the
//     agent, and the manifest says what was left out and why;
//   - a part that would take the tenant past TenantRetainedBytes is
//     recorded blocked (quota) and the message kept: the tenant's storage
//     is not the sender's doing;
//   - more than MaxDecodedBytes decoded, and the whole message is refused
//     (request_too_large) with the channel's answer, nothing of it stored:
//     it bounds the work on one message, and keeping part of it would drop
//     content its sender believes delivered; so do the email channels'
//     own ceilings, enforced by their parser before any of this: the
//     complete message (MaxMessageBytes here lowers it) and the number of
//     MIME parts.

// Upload receives the parts of one inbound message as the channel's parser
// decodes them, streaming attachment bytes to the object store while
// enforcing the ceilings, and records them with the message's event. It is
// used by one goroutine, in this order:
//
//	u := svc.NewUpload(tenantID)
//	for each attachment part:   w := u.Begin(…); w.Write(p) for each decoded chunk; w.End(ctx)
//	other parts' decoded bytes: u.Decoded(n)
//	in the event's transaction: u.PrepareTx before EventCreate, u.RecordTx after it
//	after the transaction:      u.Finish(ctx, committed)
//
// An error from Decoded, Begin, Write or End that is a refusal
// (request_too_large) or unavailable means the message must not be
// accepted: call Finish(ctx, false) and answer the sender (refusal:
// permanent; unavailable: try again later).
type Upload struct {
	s        *Service
	tenantID string
	// id is the upload's ID, set when its first attachment begins: its row
	// exists from then until Finish or the orphan sweep.
	id      string
	parts   []*part
	decoded int64
	// usage is the tenant's retained bytes when the first attachment began;
	// stored is what this upload stored since.
	usage, stored int64
	// refused is the first refusal: every later call returns it.
	refused error
	// records are the prepared records of PrepareTx.
	records  []*agentowl.Attachment
	open     *PartWriter
	finished bool
}

type part struct {
	rec *agentowl.Attachment // without EventID and ExpiresAt until PrepareTx
}

// NewUpload starts receiving a message for tenantID.
func (s *Service) NewUpload(tenantID string) *Upload {
	return &Upload{s: s, tenantID: tenantID}
}

// Part describes a MIME part as the channel's parser found it, its header
// values already decoded (RFC 2047, RFC 2231).
type Part struct {
	// Filename is the sender's file name (Content-Disposition filename,
	// else Content-Type name); only its safe form is ever kept.
	Filename string
	// ContentType is the Content-Type as sent.
	ContentType string
	// ContentID is the Content-ID, with or without its angle brackets.
	ContentID string
	// Inline is true for Content-Disposition: inline (or a part with a
	// Content-ID and no disposition).
	Inline bool
}

// Decoded counts n decoded bytes of a part that is not an attachment:
// every decoded byte counts toward MaxDecodedBytes.
func (u *Upload) Decoded(n int) error {
	if u.refused != nil {
		return u.refused
	}
	u.decoded += int64(n)
	if u.decoded > u.s.cfg.MaxDecodedBytes {
		u.refused = agentowl.Errorf(agentowl.ECodeTooLarge, "The message decodes to more than %d bytes.", u.s.cfg.MaxDecodedBytes)
	}
	return u.refused
}

// start creates the upload's row, before its first byte is stored, and
// reads the tenant's retained bytes.
func (u *Upload) start(ctx context.Context) error {
	id := agentowl.NewID("upl")
	err := u.s.store.Write(ctx, func(tx agentowl.Tx) error {
		return tx.AttachmentUploadCreate(ctx, &agentowl.AttachmentUpload{ID: id, TenantID: u.tenantID, StartedAt: u.s.clock.Now()})
	})
	if err != nil {
		return err
	}
	u.id = id
	return u.s.store.Read(ctx, func(tx agentowl.Tx) (err error) {
		u.usage, err = tx.RetainedBytes(ctx, u.tenantID)
		return err
	})
}

// Begin starts an attachment part; its decoded bytes go to the returned
// writer's Write, then End.
func (u *Upload) Begin(ctx context.Context, p Part) (*PartWriter, error) {
	if u.open != nil {
		return nil, errors.New("attachment: Begin before the previous part's End")
	}
	if u.refused != nil {
		return nil, u.refused
	}
	if u.id == "" {
		if err := u.start(ctx); err != nil {
			return nil, err
		}
	}
	pos := len(u.parts)
	rec := &agentowl.Attachment{ID: agentowl.NewID("att"), TenantID: u.tenantID, Position: pos, Name: SafeName(p.Filename, pos),
		ContentID: headerValue(strings.Trim(p.ContentID, "<> ")), DeclaredType: declaredType(p.ContentType), Inline: p.Inline}
	w := &PartWriter{u: u, rec: rec}
	if u.usage+u.stored >= u.s.cfg.TenantRetainedBytes {
		w.blocked = BlockedQuota
	} else {
		rec.BlobKey = blob.Key(u.tenantID, u.id, rec.ID)
		bw, err := u.s.blobs.Create(ctx, rec.BlobKey)
		if err != nil {
			return nil, u.s.storeUnavailable("create", err)
		}
		w.w = bw
	}
	u.open = w
	return w, nil
}

// sniffLen is how much of a part http.DetectContentType looks at.
const sniffLen = 512

// PartWriter receives one attachment's decoded bytes.
type PartWriter struct {
	u       *Upload
	rec     *agentowl.Attachment
	w       *blob.Writer // nil once blocked
	size    int64
	sniff   []byte
	blocked string
}

// Write stores p, counting it toward the ceilings. A file that passes
// MaxFileBytes, or would pass the tenant's quota, stops being stored (its
// bytes so far are discarded) and is recorded blocked: Write still accepts
// its bytes, so the parser reads on. An error refuses the message.
func (w *PartWriter) Write(p []byte) (int, error) {
	if err := w.u.Decoded(len(p)); err != nil {
		w.drop("")
		return 0, err
	}
	w.size += int64(len(p))
	if n := min(sniffLen-len(w.sniff), len(p)); n > 0 {
		w.sniff = append(w.sniff, p[:n]...)
	}
	switch cfg := w.u.s.cfg; {
	case w.w == nil:
		return len(p), nil
	case w.size > cfg.MaxFileBytes:
		w.drop(BlockedFileTooLarge)
		return len(p), nil
	case w.u.usage+w.u.stored+w.size > cfg.TenantRetainedBytes:
		w.drop(BlockedQuota)
		return len(p), nil
	}
	if _, err := w.w.Write(p); err != nil {
		w.drop("")
		return 0, w.u.s.storeUnavailable("write", err)
	}
	return len(p), nil
}

// drop abandons the part's object (nothing of it stays stored) and, with a
// reason, records the part blocked.
func (w *PartWriter) drop(reason string) {
	if w.w != nil {
		w.w.Abort()
		w.w = nil
	}
	if reason != "" && w.blocked == "" {
		w.blocked = reason
	}
}

// End finishes the part: a stored part's bytes are closed and read back to
// check their SHA-256 before anything records them.
func (w *PartWriter) End(ctx context.Context) error {
	u := w.u
	if u.open != w {
		return errors.New("attachment: End of a part that is not open")
	}
	u.open = nil
	if u.refused != nil {
		w.drop("")
		return u.refused
	}
	rec := w.rec
	rec.Size, rec.SniffedType = w.size, http.DetectContentType(w.sniff)
	if w.w != nil {
		sum, err := w.w.Close()
		w.w = nil
		if err != nil {
			return u.s.storeUnavailable("close", err)
		}
		if err := u.s.blobs.Verify(ctx, rec.BlobKey, w.size, sum); err != nil {
			return u.s.storeUnavailable("verify", err)
		}
		rec.SHA256 = sum
		u.stored += w.size
	} else {
		if w.blocked == "" {
			w.blocked = BlockedQuota // blocked at Begin
		}
		rec.BlobKey, rec.Blocked = "", w.blocked
	}
	u.parts = append(u.parts, &part{rec: rec})
	return nil
}

// Parts is how many attachments the message had so far.
func (u *Upload) Parts() int { return len(u.parts) }

// PrepareTx, in the transaction that stores event ev and before
// EventCreate, fixes each attachment's record: its event, its expiry
// (received time plus the retention in force now, never moved later) and
// its share of the tenant's quota, reserved now (a part that no longer fits
// is recorded blocked: quota). It sets ev.Attachments to the attachments as
// the event carries them. It may run again if the transaction is retried.
func (u *Upload) PrepareTx(ctx context.Context, tx agentowl.Tx, ev *agentowl.Event) error {
	if u.open != nil || u.refused != nil {
		return errors.New("attachment: PrepareTx of an unfinished or refused upload")
	}
	u.records = u.records[:0]
	var want int64
	for _, p := range u.parts {
		want += p.rec.Size * boolInt(p.rec.BlobKey != "")
	}
	limit := u.s.cfg.TenantRetainedBytes
	all, err := tx.RetainedBytesReserve(ctx, u.tenantID, want, limit)
	if err != nil {
		return err
	}
	for _, p := range u.parts {
		rec := *p.rec
		rec.EventID, rec.CreatedAt, rec.ExpiresAt = ev.ID, ev.ReceivedAt, ev.ReceivedAt.Add(u.s.cfg.Retention)
		if rec.BlobKey != "" && !all {
			// Another message of the tenant took the room while this one
			// streamed: keep what still fits, in order.
			ok, err := tx.RetainedBytesReserve(ctx, u.tenantID, rec.Size, limit)
			if err != nil {
				return err
			}
			if !ok {
				rec.BlobKey, rec.SHA256, rec.Blocked = "", nil, BlockedQuota
			}
		}
		u.records = append(u.records, &rec)
	}
	ev.Attachments, err = entriesJSON(u.records, ev.ReceivedAt)
	return err
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// RecordTx, in the same transaction after EventCreate, stores the
// attachment records and closes the upload. If the orphan sweep abandoned
// the upload meanwhile (the message took longer than the grace), it fails
// and the event must not commit: its bytes are being deleted.
func (u *Upload) RecordTx(ctx context.Context, tx agentowl.Tx) error {
	for _, rec := range u.records {
		if err := tx.AttachmentCreate(ctx, rec); err != nil {
			return err
		}
	}
	if u.id == "" {
		return nil
	}
	err := tx.AttachmentUploadCommit(ctx, u.id)
	if errors.Is(err, agentowl.ErrNotFound) {
		return &agentowl.Error{Code: agentowl.ECodeUnavailable, Message: "The message took too long to store its attachments; send it again.",
			RetryAfter: 5 * time.Second}
	}
	return err
}

// Finish ends the upload after the event's transaction: committed says
// whether the event (with RecordTx) committed. A committed upload deletes
// the bytes of parts PrepareTx blocked for quota; any other deletes all of
// its bytes (a refused or duplicate message), and the orphan sweep retries
// what fails here. Finish logs, never fails: the sender's answer is
// already decided.
func (u *Upload) Finish(ctx context.Context, committed bool) {
	if u.finished {
		return
	}
	u.finished = true
	if u.open != nil {
		u.open.drop("")
		u.open = nil
	}
	if u.id == "" {
		return
	}
	if !committed {
		err := u.s.discard(ctx, &agentowl.AttachmentUpload{ID: u.id, TenantID: u.tenantID}, u.s.clock.Now())
		if err != nil && !errors.Is(err, agentowl.ErrNotFound) {
			u.s.log.Warn("attachment upload not cleared; the orphan sweep will", "upload", u.id, "err", err)
		}
		return
	}
	for i, p := range u.parts {
		if p.rec.BlobKey != "" && i < len(u.records) && u.records[i].BlobKey == "" {
			if err := u.s.blobs.Delete(ctx, p.rec.BlobKey); err != nil {
				u.s.log.Warn("bytes of a part blocked for quota not deleted", "key", p.rec.BlobKey, "err", err)
			}
		}
	}
}
