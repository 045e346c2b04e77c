package sqlstore

import (
	"context"
	"database/sql"
	"strings"
	"time"

	"github.com/agentowl/agentowl"
)

// SQL of attention items and decisions (agentowl.AttentionStore).

const attentionCols = `id, tenant_id, kind, status, resolution, work_id, endpoint_id, request_id, revision, prompt,
	allowed_decisions, action_description, action_digest, expires_at, content_hash, request, summary, assignee,
	acknowledged_at, resolved_at, created_at, updated_at, message_id, overdue_rule, overdue_sequence`

func scanAttention(s scanner) (*agentowl.AttentionItem, error) {
	var v agentowl.AttentionItem
	var status string
	var resolution, requestID, prompt, allowed, actionDesc, actionDigest, request, summary, assignee, message, rule sql.NullString
	var revision, expires, acked, resolved, overdueSeq sql.NullInt64
	var created, updated int64
	if err := s.Scan(&v.ID, &v.TenantID, &v.Kind, &status, &resolution, &v.WorkID, &v.EndpointID, &requestID, &revision,
		&prompt, &allowed, &actionDesc, &actionDigest, &expires, &v.ContentHash, &request, &summary, &assignee,
		&acked, &resolved, &created, &updated, &message, &rule, &overdueSeq); err != nil {
		return nil, err
	}
	v.Status, v.Resolution, v.RequestID, v.Revision = agentowl.AttentionStatus(status), resolution.String, requestID.String, revision.Int64
	v.Prompt, v.ActionDescription, v.ActionDigest = prompt.String, actionDesc.String, actionDigest.String
	v.AllowedDecisions = strings.Fields(allowed.String)
	if request.Valid {
		v.Request = []byte(request.String)
	}
	v.Summary, v.Assignee, v.MessageID = summary.String, assignee.String, message.String
	v.OverdueRule, v.OverdueSequence = rule.String, overdueSeq.Int64
	v.ExpiresAt, v.AcknowledgedAt, v.ResolvedAt = fromNullTS(expires), fromNullTS(acked), fromNullTS(resolved)
	v.CreatedAt, v.UpdatedAt = fromTS(created), fromTS(updated)
	return &v, nil
}

func nullRevision(v int64, valid bool) any {
	if !valid {
		return nil
	}
	return v
}

func (t *tx) AttentionCreate(ctx context.Context, v *agentowl.AttentionItem) error {
	isRequest := v.RequestID != ""
	var request any
	if v.Request != nil {
		request = string(v.Request)
	}
	return t.execLater(ctx, nil, `INSERT INTO attention_items (`+attentionCols+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		v.ID, v.TenantID, v.Kind, string(v.Status), nullStr(v.Resolution), v.WorkID, v.EndpointID, nullStr(v.RequestID),
		nullRevision(v.Revision, isRequest), nullStr(v.Prompt), nullStr(strings.Join(v.AllowedDecisions, " ")),
		nullStr(v.ActionDescription), nullStr(v.ActionDigest), nullTS(v.ExpiresAt), nullBytes(v.ContentHash), request,
		nullStr(v.Summary), nullStr(v.Assignee), nullTS(v.AcknowledgedAt), nullTS(v.ResolvedAt), ts(v.CreatedAt), ts(v.UpdatedAt), nullStr(v.MessageID),
		nullStr(v.OverdueRule), nullRevision(v.OverdueSequence, v.OverdueRule != ""))
}

func (t *tx) AttentionGet(ctx context.Context, id string) (*agentowl.AttentionItem, error) {
	return one(t.queryRow(ctx, `SELECT `+attentionCols+` FROM attention_items WHERE id = ?`, id), scanAttention)
}

func (t *tx) AttentionUpdate(ctx context.Context, v *agentowl.AttentionItem) error {
	return t.execLater(ctx, mustExist, `UPDATE attention_items SET status = ?, resolution = ?, assignee = ?, acknowledged_at = ?,
		resolved_at = ?, updated_at = ? WHERE id = ?`,
		string(v.Status), nullStr(v.Resolution), nullStr(v.Assignee), nullTS(v.AcknowledgedAt), nullTS(v.ResolvedAt),
		ts(v.UpdatedAt), v.ID)
}

func (t *tx) AttentionList(ctx context.Context, p agentowl.AttentionListParams) ([]*agentowl.AttentionItem, error) {
	where, args := []string{"tenant_id = ?"}, []any{p.TenantID}
	switch p.Status {
	case "":
	case agentowl.AttentionUnresolved:
		where = append(where, "status <> 'resolved'")
	default:
		where, args = append(where, "status = ?"), append(args, string(p.Status))
	}
	where, args = eq(where, args, "work_id", p.WorkID)
	return listNewest(ctx, t, attentionCols, "attention_items", where, args, p.After, p.Limit, scanAttention)
}

func (t *tx) AttentionForDecision(ctx context.Context, tenantID, attentionID, decisionID string, forUpdate bool) (*agentowl.DecisionCheck, error) {
	// Each statement finds the item's work by the item, within the tenant,
	// so that all of them go at once.
	const work = `(SELECT work_id FROM attention_items WHERE id = ? AND tenant_id = ?)`
	lock := ""
	if forUpdate {
		lock = t.db.dialect.ForUpdate
	}
	c := &agentowl.DecisionCheck{}
	// The work first: once it is locked, the item and the rest are read as
	// its last writer left them (a callback that ended the work resolved
	// its items).
	err := t.readGroup(ctx,
		oneRow(&c.Work, scanWork, `SELECT `+workCols+` FROM work WHERE id = `+work+lock, attentionID, tenantID),
		oneRow(&c.Item, scanAttention, `SELECT `+attentionCols+` FROM attention_items WHERE id = ?`, attentionID),
		oneRow(&c.Endpoint, t.scanEndpoint, `SELECT `+endpointCols+` FROM endpoints
			WHERE id = (SELECT endpoint_id FROM attention_items WHERE id = ? AND tenant_id = ?)`, attentionID, tenantID),
		oneRow(&c.ByID, scanWorkDecision, `SELECT `+decisionCols+` FROM work_decisions WHERE work_id = `+work+` AND id = ?`,
			attentionID, tenantID, decisionID),
		oneRow(&c.Decided, scanWorkDecision, `SELECT `+decisionCols+` FROM work_decisions WHERE attention_id = ? AND tenant_id = ?`,
			attentionID, tenantID),
		oneRow(&c.Push, scanMessage, `SELECT `+messageSelectCols+` FROM outbox
			WHERE id = (SELECT message_id FROM work_decisions WHERE attention_id = ? AND tenant_id = ?)`, attentionID, tenantID),
		allRows(&c.Revisions, scanAttention, `SELECT `+attentionCols+` FROM attention_items WHERE work_id = `+work+`
			AND request_id = (SELECT request_id FROM attention_items WHERE id = ?)`, attentionID, tenantID, attentionID))
	if err != nil {
		return nil, err
	}
	if c.Item != nil && c.Item.TenantID != tenantID {
		return &agentowl.DecisionCheck{Item: c.Item}, nil
	}
	return c, nil
}

func (t *tx) DecisionForReceipt(ctx context.Context, workID, decisionID string) (*agentowl.Work, *agentowl.WorkDecision, *agentowl.AttentionItem, error) {
	var w *agentowl.Work
	var d *agentowl.WorkDecision
	var it *agentowl.AttentionItem
	err := t.readGroup(ctx,
		oneRow(&w, scanWork, t.workByIDForUpdate(), workID),
		oneRow(&d, scanWorkDecision, `SELECT `+decisionCols+` FROM work_decisions WHERE work_id = ? AND id = ?`, workID, decisionID),
		oneRow(&it, scanAttention, `SELECT `+attentionCols+` FROM attention_items
			WHERE id = (SELECT attention_id FROM work_decisions WHERE work_id = ? AND id = ?)`, workID, decisionID))
	if err == nil && w == nil {
		err = agentowl.ErrNotFound
	}
	if err != nil || d == nil {
		return w, nil, nil, err
	}
	return w, d, it, nil
}

func (t *tx) AttentionExpire(ctx context.Context, now time.Time) (int, error) {
	res, err := t.exec(ctx, `UPDATE attention_items SET status = 'resolved', resolution = 'expired', resolved_at = ?,
		updated_at = ? WHERE status <> 'resolved' AND expires_at IS NOT NULL AND expires_at <= ?`, ts(now), ts(now), ts(now))
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	return int(n), err
}

func (t *tx) MessagesFailedWithoutIncident(ctx context.Context, kinds []string, limit int) ([]*agentowl.OutboxMessage, error) {
	if len(kinds) == 0 {
		return nil, nil
	}
	rows, err := t.query(ctx, `SELECT `+messageSelectO+` FROM outbox o WHERE o.state = 'failed'
		AND o.kind IN (`+marks(len(kinds))+`)
		AND NOT EXISTS (SELECT 1 FROM attention_items a WHERE a.message_id = o.id)
		ORDER BY o.ended_at, o.id LIMIT ?`, append(anys(kinds), listLimit(limit))...)
	return all(rows, err, scanMessage)
}

// ---- decisions

const decisionCols = `work_id, id, tenant_id, attention_id, request_id, revision, decision, answer, expected_action_digest,
	content_hash, body, decided_by, decided_at, message_id, receipt_at, receipt_via`

func scanWorkDecision(s scanner) (*agentowl.WorkDecision, error) {
	var v agentowl.WorkDecision
	var answer, digest, message, via sql.NullString
	var decided int64
	var receipt sql.NullInt64
	if err := s.Scan(&v.WorkID, &v.ID, &v.TenantID, &v.AttentionID, &v.RequestID, &v.Revision, &v.Decision, &answer, &digest,
		&v.ContentHash, &v.Body, &v.DecidedBy, &decided, &message, &receipt, &via); err != nil {
		return nil, err
	}
	v.Answer, v.ExpectedActionDigest, v.MessageID, v.ReceiptVia = answer.String, digest.String, message.String, via.String
	v.DecidedAt, v.ReceiptAt = fromTS(decided), fromNullTS(receipt)
	return &v, nil
}

func (t *tx) WorkDecisionCreate(ctx context.Context, v *agentowl.WorkDecision) error {
	return t.execLater(ctx, nil, `INSERT INTO work_decisions (`+decisionCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		v.WorkID, v.ID, v.TenantID, v.AttentionID, v.RequestID, v.Revision, v.Decision, nullStr(v.Answer),
		nullStr(v.ExpectedActionDigest), v.ContentHash, v.Body, v.DecidedBy, ts(v.DecidedAt), nullStr(v.MessageID),
		nullTS(v.ReceiptAt), nullStr(v.ReceiptVia))
}

func (t *tx) WorkDecisionGet(ctx context.Context, workID, id string) (*agentowl.WorkDecision, error) {
	return one(t.queryRow(ctx, `SELECT `+decisionCols+` FROM work_decisions WHERE work_id = ? AND id = ?`, workID, id), scanWorkDecision)
}

func (t *tx) WorkDecisionGetByAttention(ctx context.Context, attentionID string) (*agentowl.WorkDecision, error) {
	return one(t.queryRow(ctx, `SELECT `+decisionCols+` FROM work_decisions WHERE attention_id = ?`, attentionID), scanWorkDecision)
}

func (t *tx) WorkDecisionsByAttention(ctx context.Context, attentionIDs []string) ([]*agentowl.WorkDecision, error) {
	var out []*agentowl.WorkDecision
	for _, ids := range chunks(attentionIDs) {
		rows, err := t.query(ctx, `SELECT `+decisionCols+` FROM work_decisions WHERE attention_id IN (`+marks(len(ids))+`)`, anys(ids)...)
		got, err := all(rows, err, scanWorkDecision)
		if err != nil {
			return nil, err
		}
		out = append(out, got...)
	}
	return out, nil
}

func (t *tx) WorkDecisionList(ctx context.Context, workID string) ([]*agentowl.WorkDecision, error) {
	rows, err := t.query(ctx, `SELECT `+decisionCols+` FROM work_decisions WHERE work_id = ? ORDER BY decided_at, id`, workID)
	return all(rows, err, scanWorkDecision)
}

func (t *tx) DecisionSetReceipt(ctx context.Context, workID, id string, at time.Time, via string) error {
	return t.execLater(ctx, nil, `UPDATE work_decisions SET receipt_at = ?, receipt_via = ? WHERE work_id = ? AND id = ?
		AND receipt_at IS NULL`, ts(at), via, workID, id)
}
