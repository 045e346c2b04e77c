package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/agentowl/agentowl"
)

// ---- attachments

const attachmentCols = `id, tenant_id, event_id, position, name, size, sha256, content_id, declared_type, sniffed_type, inline,
	blob_key, blocked, created_at, expires_at, deleted_at, missing_at`

func scanAttachment(s scanner) (*agentowl.Attachment, error) {
	var v agentowl.Attachment
	var blobKey, blocked sql.NullString
	var inline int
	var created, expires int64
	var deleted, missing sql.NullInt64
	if err := s.Scan(&v.ID, &v.TenantID, &v.EventID, &v.Position, &v.Name, &v.Size, &v.SHA256, &v.ContentID, &v.DeclaredType,
		&v.SniffedType, &inline, &blobKey, &blocked, &created, &expires, &deleted, &missing); err != nil {
		return nil, err
	}
	v.Inline, v.BlobKey, v.Blocked = inline != 0, blobKey.String, blocked.String
	v.CreatedAt, v.ExpiresAt, v.DeletedAt, v.MissingAt = fromTS(created), fromTS(expires), fromNullTS(deleted), fromNullTS(missing)
	return &v, nil
}

func (t *tx) AttachmentCreate(ctx context.Context, v *agentowl.Attachment) error {
	_, err := t.exec(ctx, `INSERT INTO attachments (`+attachmentCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		v.ID, v.TenantID, v.EventID, v.Position, v.Name, v.Size, nullBytes(v.SHA256), v.ContentID, v.DeclaredType, v.SniffedType,
		boolInt(v.Inline), nullStr(v.BlobKey), nullStr(v.Blocked), ts(v.CreatedAt), ts(v.ExpiresAt), nullTS(v.DeletedAt),
		nullTS(v.MissingAt))
	return err
}

func (t *tx) AttachmentGet(ctx context.Context, id string) (*agentowl.Attachment, error) {
	return one(t.queryRow(ctx, `SELECT `+attachmentCols+` FROM attachments WHERE id = ?`, id), scanAttachment)
}

func (t *tx) AttachmentListByEvent(ctx context.Context, eventID string) ([]*agentowl.Attachment, error) {
	rows, err := t.query(ctx, `SELECT `+attachmentCols+` FROM attachments WHERE event_id = ? ORDER BY position`, eventID)
	return all(rows, err, scanAttachment)
}

func (t *tx) AttachmentSetMissing(ctx context.Context, id string, at time.Time) error {
	_, err := t.exec(ctx, `UPDATE attachments SET missing_at = ? WHERE id = ? AND blob_key IS NOT NULL AND missing_at IS NULL`,
		ts(at), id)
	return err
}

func (t *tx) AttachmentDue(ctx context.Context, now time.Time, limit int) ([]*agentowl.Attachment, error) {
	rows, err := t.query(ctx, `SELECT `+attachmentCols+` FROM attachments
		WHERE blob_key IS NOT NULL AND deleted_at IS NULL AND expires_at <= ? ORDER BY expires_at LIMIT ?`, ts(now), limit)
	return all(rows, err, scanAttachment)
}

func (t *tx) AttachmentSetDeleted(ctx context.Context, id string, at time.Time) error {
	return t.execOne(ctx, `UPDATE attachments SET deleted_at = ? WHERE id = ? AND blob_key IS NOT NULL AND deleted_at IS NULL`,
		ts(at), id)
}

// ---- uploads

func (t *tx) AttachmentUploadCreate(ctx context.Context, v *agentowl.AttachmentUpload) error {
	_, err := t.exec(ctx, `INSERT INTO attachment_uploads (id, tenant_id, started_at) VALUES (?, ?, ?)`,
		v.ID, v.TenantID, ts(v.StartedAt))
	return err
}

// AttachmentUploadCommit and AttachmentUploadAbandon each change the row
// only in the state the other requires: on PostgreSQL the second waits for
// the first's row lock and then finds nothing to change.
func (t *tx) AttachmentUploadCommit(ctx context.Context, id string) error {
	return t.execOne(ctx, `DELETE FROM attachment_uploads WHERE id = ? AND abandoned_at IS NULL`, id)
}

func (t *tx) AttachmentUploadAbandon(ctx context.Context, id string, at time.Time) error {
	return t.execOne(ctx, `UPDATE attachment_uploads SET abandoned_at = ? WHERE id = ? AND abandoned_at IS NULL`, ts(at), id)
}

func (t *tx) AttachmentUploadDelete(ctx context.Context, id string) error {
	return t.execOne(ctx, `DELETE FROM attachment_uploads WHERE id = ?`, id)
}

func (t *tx) AttachmentUploadStale(ctx context.Context, before time.Time, limit int) ([]*agentowl.AttachmentUpload, error) {
	rows, err := t.query(ctx, `SELECT id, tenant_id, started_at, abandoned_at FROM attachment_uploads
		WHERE started_at < ? OR abandoned_at IS NOT NULL ORDER BY started_at LIMIT ?`, ts(before), limit)
	return all(rows, err, func(s scanner) (*agentowl.AttachmentUpload, error) {
		var v agentowl.AttachmentUpload
		var started int64
		var abandoned sql.NullInt64
		if err := s.Scan(&v.ID, &v.TenantID, &started, &abandoned); err != nil {
			return nil, err
		}
		v.StartedAt, v.AbandonedAt = fromTS(started), fromNullTS(abandoned)
		return &v, nil
	})
}

// ---- usage

func (t *tx) RetainedBytes(ctx context.Context, tenantID string) (int64, error) {
	var n int64
	err := t.queryRow(ctx, `SELECT retained_bytes FROM attachment_usage WHERE tenant_id = ?`, tenantID).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return n, err
}

// RetainedBytesReserve is one upsert: the conflict's row lock serializes
// concurrent reservations of a tenant on PostgreSQL (SQLite has one writer),
// and its WHERE refuses an increase past the limit.
func (t *tx) RetainedBytesReserve(ctx context.Context, tenantID string, n, limit int64) (bool, error) {
	if n < 0 || n > limit {
		return false, nil
	}
	var total int64
	err := t.queryRow(ctx, `INSERT INTO attachment_usage (tenant_id, retained_bytes) VALUES (?, ?)
		ON CONFLICT (tenant_id) DO UPDATE SET retained_bytes = attachment_usage.retained_bytes + excluded.retained_bytes
		WHERE attachment_usage.retained_bytes + excluded.retained_bytes <= ?
		RETURNING retained_bytes`, tenantID, n, limit).Scan(&total)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

func (t *tx) RetainedBytesRelease(ctx context.Context, tenantID string, n int64) error {
	_, err := t.exec(ctx, `UPDATE attachment_usage SET retained_bytes = CASE WHEN retained_bytes > ? THEN retained_bytes - ? ELSE 0 END
		WHERE tenant_id = ?`, n, n, tenantID)
	return err
}
