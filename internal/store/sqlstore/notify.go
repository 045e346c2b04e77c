package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"time"

	"github.com/agentowl/agentowl"
)

// SQL of in-app notifications and console sessions (agentowl.NotificationStore,
// agentowl.ConsoleSessionStore).

const notificationCols = `id, tenant_id, operator_id, cause_key, kind, cause, subject, endpoint_id, title, created_at, read_at`

func scanNotification(s scanner) (*agentowl.Notification, error) {
	var v agentowl.Notification
	var created int64
	var read sql.NullInt64
	if err := s.Scan(&v.ID, &v.TenantID, &v.OperatorID, &v.CauseKey, &v.Kind, &v.Cause, &v.Subject, &v.EndpointID, &v.Title,
		&created, &read); err != nil {
		return nil, err
	}
	v.CreatedAt, v.ReadAt = fromTS(created), fromNullTS(read)
	return &v, nil
}

// NotificationFanOut is one statement whatever the number of recipients:
// the recipients are selected, filtered by their mutes and inserted
// together, and the unique (operator_id, cause_key) drops those who have
// the notice already. Each row's ID is the fan-out's random prefix and the
// recipient's position.
func (t *tx) NotificationFanOut(ctx context.Context, f *agentowl.NotificationFanOut, added *int) error {
	insert := `INSERT INTO notifications (` + notificationCols + `)
		SELECT ? || CAST(row_number() OVER (ORDER BY o.id) AS TEXT), o.tenant_id, o.id, ?, ?, ?, ?, ?, ?, ?, NULL
		FROM operators o WHERE o.tenant_id = ? AND NOT EXISTS (SELECT 1 FROM notification_mutes m
			WHERE m.operator_id = o.id AND ((m.scope = 'kind' AND m.value = ?) OR (m.scope = 'endpoint' AND m.value = ?)))
		ON CONFLICT DO NOTHING`
	args := []any{f.IDPrefix, f.CauseKey, f.Kind, f.Cause, f.Subject, f.EndpointID, f.Title, ts(f.CreatedAt), f.TenantID, f.Kind, f.EndpointID}
	if added == nil {
		added = new(int)
	}
	if _, ok := t.pg.(*pgTx); ok {
		// Held back with the next statement; the count arrives with it.
		return t.queryRowLater(ctx, func(r row) error { return r.Scan(added) },
			`WITH added AS (`+insert+` RETURNING 1) SELECT count(*) FROM added`, args...)
	}
	res, err := t.exec(ctx, insert, args...)
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	*added = int(n)
	return err
}

func (t *tx) NotificationList(ctx context.Context, p agentowl.NotificationListParams) ([]*agentowl.Notification, error) {
	where, args := []string{"operator_id = ?"}, []any{p.OperatorID}
	if p.UnreadOnly {
		where = append(where, "read_at IS NULL")
	}
	return listNewest(ctx, t, notificationCols, "notifications", where, args, p.After, p.Limit, scanNotification)
}

func (t *tx) NotificationGet(ctx context.Context, operatorID, id string) (*agentowl.Notification, error) {
	return one(t.queryRow(ctx, `SELECT `+notificationCols+` FROM notifications WHERE operator_id = ? AND id = ?`, operatorID, id),
		scanNotification)
}

func (t *tx) NotificationUnread(ctx context.Context, operatorID string) (int, error) {
	var n int
	err := t.queryRow(ctx, `SELECT count(*) FROM notifications WHERE operator_id = ? AND read_at IS NULL`, operatorID).Scan(&n)
	return n, err
}

func (t *tx) NotificationMarkRead(ctx context.Context, operatorID string, ids []string, at time.Time) (int, error) {
	q, args := `UPDATE notifications SET read_at = ? WHERE operator_id = ? AND read_at IS NULL`, []any{ts(at), operatorID}
	if ids != nil {
		if len(ids) == 0 {
			return 0, nil
		}
		q += ` AND id IN (?` + strings.Repeat(", ?", len(ids)-1) + `)`
		for _, id := range ids {
			args = append(args, id)
		}
	}
	res, err := t.exec(ctx, q, args...)
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	return int(n), err
}

func (t *tx) NotificationMutes(ctx context.Context, operatorID string) ([]agentowl.NotificationMute, error) {
	rows, err := t.query(ctx, `SELECT scope, value FROM notification_mutes WHERE operator_id = ? ORDER BY scope, value`, operatorID)
	return all(rows, err, func(s scanner) (agentowl.NotificationMute, error) {
		var m agentowl.NotificationMute
		err := s.Scan(&m.By, &m.Value)
		return m, err
	})
}

func (t *tx) NotificationSetMutes(ctx context.Context, tenantID, operatorID string, mutes []agentowl.NotificationMute) error {
	if _, err := t.exec(ctx, `DELETE FROM notification_mutes WHERE operator_id = ?`, operatorID); err != nil {
		return err
	}
	for _, m := range mutes {
		if _, err := t.exec(ctx, `INSERT INTO notification_mutes (operator_id, tenant_id, scope, value) VALUES (?, ?, ?, ?)
			ON CONFLICT DO NOTHING`, operatorID, tenantID, m.By, m.Value); err != nil {
			return err
		}
	}
	return nil
}

// ---- console sessions

const consoleSessionCols = `id, kind, hash, tenant_id, operator_id, token_id, created_at, last_seen_at, expires_at, used_at, revoked_at`

func consoleSessionFields(v *agentowl.ConsoleSessionRecord) ([]any, func()) {
	var kind string
	var created, seen, expires int64
	var used, revoked sql.NullInt64
	return []any{&v.ID, &kind, &v.Hash, &v.TenantID, &v.OperatorID, &v.TokenID, &created, &seen, &expires, &used, &revoked}, func() {
		v.Kind = agentowl.ConsoleSessionKind(kind)
		v.CreatedAt, v.LastSeenAt, v.ExpiresAt = fromTS(created), fromTS(seen), fromTS(expires)
		v.UsedAt, v.RevokedAt = fromNullTS(used), fromNullTS(revoked)
	}
}

func (t *tx) ConsoleSessionCreate(ctx context.Context, v *agentowl.ConsoleSessionRecord) error {
	_, err := t.exec(ctx, `INSERT INTO console_sessions (`+consoleSessionCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		v.ID, string(v.Kind), v.Hash, v.TenantID, v.OperatorID, v.TokenID, ts(v.CreatedAt), ts(v.LastSeenAt), ts(v.ExpiresAt),
		nullTS(v.UsedAt), nullTS(v.RevokedAt))
	return err
}

// prefixed qualifies each column of a column list with a table alias.
func prefixed(alias, cols string) string {
	parts := strings.Split(cols, ",")
	for i, c := range parts {
		parts[i] = alias + "." + strings.TrimSpace(c)
	}
	return strings.Join(parts, ", ")
}

var sessionWithTokenCols = prefixed("s", consoleSessionCols) + ", " + prefixed("k", tokenCols)

// ConsoleSessionGetByHash reads the session and its vouching token in one
// statement: it runs on every console request.
func (t *tx) ConsoleSessionGetByHash(ctx context.Context, hash []byte) (*agentowl.ConsoleSessionRecord, *agentowl.Token, error) {
	var s agentowl.ConsoleSessionRecord
	var k agentowl.Token
	sd, sessionDone := consoleSessionFields(&s)
	kd, tokenDone := tokenFields(&k)
	err := t.queryRow(ctx, `SELECT `+sessionWithTokenCols+` FROM console_sessions s JOIN tokens k ON k.id = s.token_id
		WHERE s.hash = ?`, hash).Scan(append(sd, kd...)...)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil, agentowl.ErrNotFound
	}
	if err != nil {
		return nil, nil, err
	}
	sessionDone()
	tokenDone()
	return &s, &k, nil
}

func (t *tx) ConsoleSessionTouch(ctx context.Context, id string, at time.Time) error {
	return t.execOne(ctx, `UPDATE console_sessions SET last_seen_at = ? WHERE id = ?`, ts(at), id)
}

func (t *tx) ConsoleSessionUse(ctx context.Context, id string, at time.Time) error {
	res, err := t.exec(ctx, `UPDATE console_sessions SET used_at = ? WHERE id = ? AND used_at IS NULL`, ts(at), id)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n == 0 {
		return agentowl.ErrConflict
	}
	return nil
}

func (t *tx) ConsoleSessionRevoke(ctx context.Context, id string, at time.Time) error {
	return t.revoke(ctx, "console_sessions", "id", id, at)
}
