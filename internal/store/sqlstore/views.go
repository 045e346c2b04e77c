package sqlstore

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/agentowl/agentowl"
)

// The reads of the operator views (agentowl.OperatorViewStore). Digests cut
// an event's payload in SQL (substr works on SQLite blobs and PostgreSQL
// bytea alike), so a list page never reads whole message bodies.

// digestCols are eventCols of the events alias e with the payload cut and
// no headers.
var digestCols = `e.id, e.tenant_id, e.binding_id, e.conversation_id, e.channel, e.sender, e.received_at, '{}', ` +
	`substr(e.payload, 1, ` + strconv.Itoa(agentowl.EventDigestBytes) + `), e.attachments, e.dedupe_key, e.follow_up`

func (t *tx) EventListEarlier(ctx context.Context, conversationID string, before agentowl.Cursor, limit int) ([]*agentowl.Event, error) {
	rows, err := t.query(ctx, `SELECT `+eventCols+` FROM events WHERE conversation_id = ? AND (received_at, id) < (?, ?)
		ORDER BY received_at DESC, id DESC LIMIT ?`, conversationID, ts(before.At), before.ID, listLimit(limit))
	return all(rows, err, scanEvent)
}

func (t *tx) EventDigestsByWork(ctx context.Context, works []string) (map[string]*agentowl.Event, error) {
	out := map[string]*agentowl.Event{}
	if len(works) == 0 {
		return out, nil
	}
	rows, err := t.query(ctx, `SELECT w.id, `+digestCols+` FROM work w JOIN events e ON e.id = w.event_id
		WHERE w.id IN (`+marks(len(works))+`)`, anys(works)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		ev, err := scanEvent(prefixScanner{rows, &id})
		if err != nil {
			return nil, err
		}
		out[id] = ev
	}
	return out, rows.Err()
}

// prefixScanner scans one leading column into first, then the rest as s.
type prefixScanner struct {
	s     scanner
	first any
}

func (p prefixScanner) Scan(dest ...any) error { return p.s.Scan(append([]any{p.first}, dest...)...) }

func (t *tx) ConversationDigests(ctx context.Context, conversations []string) (map[string]*agentowl.ConversationDigest, error) {
	out := map[string]*agentowl.ConversationDigest{}
	if len(conversations) == 0 {
		return out, nil
	}
	in, args := marks(len(conversations)), anys(conversations)
	rows, err := t.query(ctx, `SELECT `+digestCols+` FROM events e WHERE e.id IN (
		SELECT (SELECT f.id FROM events f WHERE f.conversation_id = c.id ORDER BY f.received_at, f.id LIMIT 1)
		FROM conversations c WHERE c.id IN (`+in+`))`, args...)
	evs, err := all(rows, err, scanEvent)
	if err != nil {
		return nil, err
	}
	for _, ev := range evs {
		out[ev.ConversationID] = &agentowl.ConversationDigest{First: ev}
	}
	rows, err = t.query(ctx, `SELECT conversation_id, count(*) FROM work WHERE conversation_id IN (`+in+`)
		AND status IN ('pending', 'accepted', 'running', 'needs_input') GROUP BY conversation_id`, args...)
	open, err := keyed[string, int](rows, err)
	if err != nil {
		return nil, err
	}
	for id, n := range open {
		if d := out[id]; d != nil {
			d.OpenWork = n
		}
	}
	return out, nil
}

func (t *tx) AttentionCounts(ctx context.Context, tenantID string, soon time.Time) ([]agentowl.AttentionCount, error) {
	rows, err := t.query(ctx, `SELECT kind, status, count(*), coalesce(sum(CASE WHEN expires_at <= ? THEN 1 ELSE 0 END), 0)
		FROM attention_items WHERE tenant_id = ? AND status <> 'resolved' GROUP BY kind, status ORDER BY kind, status`, ts(soon), tenantID)
	return all(rows, err, func(s scanner) (agentowl.AttentionCount, error) {
		var c agentowl.AttentionCount
		var st string
		err := s.Scan(&c.Kind, &st, &c.N, &c.Soon)
		c.Status = agentowl.AttentionStatus(st)
		return c, err
	})
}

// unresolvedWhere narrows a tenant's attention items to status st (open,
// acknowledged or unresolved: either).
func unresolvedWhere(tenantID string, st agentowl.AttentionStatus) ([]string, []any) {
	where, args := []string{"tenant_id = ?"}, []any{tenantID}
	if st == agentowl.AttentionOpen || st == agentowl.AttentionAcknowledged {
		return append(where, "status = ?"), append(args, string(st))
	}
	return append(where, "status <> 'resolved'"), args
}

func (t *tx) AttentionListDated(ctx context.Context, p agentowl.AttentionListParams) ([]*agentowl.AttentionItem, error) {
	where, args := unresolvedWhere(p.TenantID, p.Status)
	where = append(where, "expires_at IS NOT NULL")
	if p.After != nil {
		where, args = append(where, "(expires_at, id) > (?, ?)"), append(args, ts(p.After.At), p.After.ID)
	}
	rows, err := t.query(ctx, `SELECT `+attentionCols+` FROM attention_items WHERE `+strings.Join(where, " AND ")+
		` ORDER BY expires_at, id LIMIT ?`, append(args, listLimit(p.Limit))...)
	return all(rows, err, scanAttention)
}

func (t *tx) AttentionListUndated(ctx context.Context, p agentowl.AttentionListParams) ([]*agentowl.AttentionItem, error) {
	where, args := unresolvedWhere(p.TenantID, p.Status)
	where = append(where, "expires_at IS NULL")
	return listNewest(ctx, t, attentionCols, "attention_items", where, args, p.After, p.Limit, scanAttention)
}

func (t *tx) RequestListPendingByDeadline(ctx context.Context, tenantID string, now time.Time, after *agentowl.Cursor, limit int) ([]*agentowl.ApprovalRequest, error) {
	where, args := []string{"tenant_id = ?", "status = 'pending'", "deadline_at > ?"}, []any{tenantID, ts(now)}
	if after != nil {
		where, args = append(where, "(deadline_at, id) > (?, ?)"), append(args, ts(after.At), after.ID)
	}
	rows, err := t.query(ctx, `SELECT `+requestCols+` FROM approval_requests WHERE `+strings.Join(where, " AND ")+
		` ORDER BY deadline_at, id LIMIT ?`, append(args, listLimit(limit))...)
	return all(rows, err, scanRequest)
}

func (t *tx) RequestCountPending(ctx context.Context, tenantID string, now, soon time.Time) (agentowl.RequestCounts, error) {
	var c agentowl.RequestCounts
	err := t.queryRow(ctx, `SELECT count(*), count(a.request_id), coalesce(sum(CASE WHEN r.deadline_at <= ? THEN 1 ELSE 0 END), 0)
		FROM approval_requests r LEFT JOIN aap_acks a ON a.request_id = r.id
		WHERE r.tenant_id = ? AND r.status = 'pending' AND r.deadline_at > ?`, ts(soon), tenantID, ts(now)).Scan(&c.Pending, &c.Acknowledged, &c.Soon)
	return c, err
}
