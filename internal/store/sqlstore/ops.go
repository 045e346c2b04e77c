package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"time"

	"github.com/agentowl/agentowl"
)

// SQL of operating AgentOwl (agentowl.OperationStore): redrive, the outbox as
// work-outbox and ingress-publications show it, and work-doctor's counts.

// qualified prefixes each column of a column list with alias.
func qualified(cols, alias string) string {
	parts := strings.Split(cols, ",")
	for i, c := range parts {
		parts[i] = alias + "." + strings.TrimSpace(c)
	}
	return strings.Join(parts, ", ")
}

// outboxEntryFrom joins a message (o) to what it delivers: its work (w) when
// the subject is a work ID, its event (e) — the work's, or the subject when
// that is an event ID — and the event's binding (b). IDs of different kinds
// never collide (work_…, evt_…, UUIDs), so a subject that is neither finds
// no row.
const outboxEntryFrom = ` FROM outbox o
	LEFT JOIN work w ON w.id = o.subject
	LEFT JOIN events e ON e.id = COALESCE(w.event_id, o.subject)
	LEFT JOIN bindings b ON b.id = e.binding_id`

// outboxEntryCols are the entry's columns after the message's.
const outboxEntryCols = `, COALESCE(w.id, ''), COALESCE(e.id, ''), COALESCE(e.binding_id, ''), COALESCE(e.channel, ''),
	COALESCE(w.endpoint_id, b.endpoint_id, '')`

func scanOutboxEntry(s scanner) (*agentowl.OutboxEntry, error) {
	var v agentowl.OutboxEntry
	m, err := scanMessage(scannerFunc(func(dest ...any) error {
		return s.Scan(append(dest, &v.WorkID, &v.EventID, &v.BindingID, &v.Channel, &v.EndpointID)...)
	}))
	v.Message = m
	return &v, err
}

func (t *tx) OutboxFind(ctx context.Context, p agentowl.OutboxFindParams) ([]*agentowl.OutboxEntry, error) {
	if len(p.Kinds) == 0 {
		return nil, nil
	}
	where, args := []string{"o.tenant_id = ?", "o.kind IN (" + marks(len(p.Kinds)) + ")"}, append([]any{p.TenantID}, anys(p.Kinds)...)
	where, args = eq(where, args, "o.state", p.State)
	where, args = eq(where, args, "COALESCE(w.endpoint_id, b.endpoint_id)", p.EndpointID)
	where, args = eq(where, args, "e.id", p.EventID)
	where, args = eq(where, args, "e.binding_id", p.BindingID)
	where, args = eq(where, args, "w.id", p.WorkID)
	if !p.CreatedBefore.IsZero() {
		where, args = append(where, "o.created_at <= ?"), append(args, ts(p.CreatedBefore))
	}
	rows, err := t.query(ctx, `SELECT `+messageSelectO+outboxEntryCols+outboxEntryFrom+
		` WHERE `+strings.Join(where, " AND ")+` ORDER BY o.created_at DESC, o.id LIMIT ?`, append(args, listLimit(p.Limit))...)
	return all(rows, err, scanOutboxEntry)
}

func (t *tx) OutboxGet(ctx context.Context, id string) (*agentowl.OutboxEntry, error) {
	return one(t.queryRow(ctx, `SELECT `+messageSelectO+outboxEntryCols+outboxEntryFrom+` WHERE o.id = ?`, id),
		scanOutboxEntry)
}

func (t *tx) MessageRedrive(ctx context.Context, p agentowl.RedriveParams) (*agentowl.OutboxMessage, error) {
	if len(p.From) == 0 {
		return nil, agentowl.ErrConflict
	}
	args := []any{ts(p.Now), ts(p.Now), ts(p.DeadlineAt), p.ID}
	for _, s := range p.From {
		args = append(args, string(s))
	}
	m, err := one(t.queryRow(ctx, `UPDATE outbox SET state = 'pending', next_attempt_at = ?, due_since = ?, deadline_at = ?,
		lease_owner = NULL, lease_until = NULL, last_status = NULL, last_error = NULL, ended_at = NULL, retain_until = NULL,
		attempt_base = attempts, redrives = redrives + 1
		WHERE id = ? AND state IN (?`+strings.Repeat(", ?", len(p.From)-1)+`) RETURNING `+messageSelectCols, args...), scanMessage)
	if errors.Is(err, agentowl.ErrNotFound) {
		// Tell a message in another state from no message at all.
		if _, gerr := t.MessageGet(ctx, p.ID); gerr == nil {
			return nil, agentowl.ErrConflict
		}
	}
	return m, err
}

func (t *tx) OutboxHealth(ctx context.Context, tenantID string, stuckBefore time.Time) ([]*agentowl.EndpointOutboxHealth, error) {
	const stuck = `o.state = 'pending' AND o.due_since <= ?`
	b := ts(stuckBefore)
	rows, err := t.query(ctx, `SELECT COALESCE(w.endpoint_id, b.endpoint_id, '') AS ep,
			SUM(CASE WHEN o.state = 'pending' AND o.last_error IS NOT NULL THEN 1 ELSE 0 END),
			SUM(CASE WHEN o.state = 'failed' AND (a.status IS NULL OR a.status <> 'resolved') THEN 1 ELSE 0 END),
			SUM(CASE WHEN `+stuck+` THEN 1 ELSE 0 END),
			MIN(CASE WHEN `+stuck+` THEN o.due_since END)`+outboxEntryFrom+`
		LEFT JOIN attention_items a ON a.message_id = o.id
		WHERE o.tenant_id = ? AND o.state IN ('pending', 'failed')
		GROUP BY COALESCE(w.endpoint_id, b.endpoint_id, '') ORDER BY 1`, b, b, tenantID)
	hs, err := all(rows, err, func(s scanner) (*agentowl.EndpointOutboxHealth, error) {
		var h agentowl.EndpointOutboxHealth
		var oldest sql.NullInt64
		err := s.Scan(&h.EndpointID, &h.Failing, &h.Failed, &h.Stuck, &oldest)
		h.OldestStuck = fromNullTS(oldest)
		return &h, err
	})
	out := hs[:0]
	for _, h := range hs {
		if h.Failing+h.Failed+h.Stuck > 0 {
			out = append(out, h)
		}
	}
	return out, err
}

func (t *tx) DecisionsAwaitingReceipt(ctx context.Context, tenantID string, decidedBefore time.Time, limit int) ([]*agentowl.AwaitingReceipt, error) {
	rows, err := t.query(ctx, `SELECT `+qualified(decisionCols, "d")+`, w.endpoint_id, COALESCE(o.state, '')
		FROM work_decisions d JOIN work w ON w.id = d.work_id LEFT JOIN outbox o ON o.id = d.message_id
		WHERE d.tenant_id = ? AND d.receipt_at IS NULL AND d.decided_at <= ? AND w.ended_at IS NULL
		ORDER BY d.decided_at, d.id LIMIT ?`, tenantID, ts(decidedBefore), listLimit(limit))
	return all(rows, err, func(s scanner) (*agentowl.AwaitingReceipt, error) {
		var v agentowl.AwaitingReceipt
		var state string
		d, err := scanWorkDecision(scannerFunc(func(dest ...any) error { return s.Scan(append(dest, &v.EndpointID, &state)...) }))
		v.Decision, v.PushState = d, agentowl.MessageState(state)
		return &v, err
	})
}

func (t *tx) WorkByCallbacks(ctx context.Context, tenantID string, min, limit int) ([]*agentowl.Work, error) {
	rows, err := t.query(ctx, `SELECT `+workCols+` FROM work WHERE tenant_id = ? AND ended_at IS NULL AND callbacks >= ?
		ORDER BY callbacks DESC, id LIMIT ?`, tenantID, min, listLimit(limit))
	return all(rows, err, scanWork)
}

func (t *tx) AttentionByMessage(ctx context.Context, messageID string) (*agentowl.AttentionItem, error) {
	return one(t.queryRow(ctx, `SELECT `+attentionCols+` FROM attention_items WHERE message_id = ?`, messageID), scanAttention)
}

func (t *tx) AttentionDetachMessage(ctx context.Context, itemID string) error {
	return t.execOne(ctx, `UPDATE attention_items SET message_id = NULL WHERE id = ?`, itemID)
}

func (t *tx) CounterGet(ctx context.Context, key string, windowStart time.Time) (int64, error) {
	n, err := one(t.queryRow(ctx, `SELECT count FROM rate_counters WHERE key = ? AND window_start = ?`, key, ts(windowStart)),
		func(s scanner) (n int64, err error) { return n, s.Scan(&n) })
	if errors.Is(err, agentowl.ErrNotFound) {
		return 0, nil // nothing counted in that window
	}
	return n, err
}
