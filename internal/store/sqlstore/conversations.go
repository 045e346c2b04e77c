package sqlstore

import (
	"context"
	"errors"
	"strings"

	"github.com/agentowl/agentowl"
)

// The operator views of conversations (agentowl.ConversationStore). Lists page by
// keyset: a row comparison on the sort key, which both dialects evaluate
// on the (…, last_event_at) and (conversation_id, received_at) indexes.

func (t *tx) ConversationList(ctx context.Context, p agentowl.ConversationListParams) ([]*agentowl.Conversation, error) {
	where, args := []string{"tenant_id = ?"}, []any{p.TenantID}
	where, args = eq(where, args, "binding_id", p.BindingID)
	where, args = eq(where, args, "channel", p.Channel)
	where, args = eq(where, args, "status", p.Status)
	if p.After != nil {
		where, args = append(where, "(last_event_at, id) < (?, ?)"), append(args, ts(p.After.At), p.After.ID)
	}
	rows, err := t.query(ctx, `SELECT `+conversationCols+` FROM conversations WHERE `+strings.Join(where, " AND ")+
		` ORDER BY last_event_at DESC, id DESC LIMIT ?`, append(args, listLimit(p.Limit))...)
	return all(rows, err, scanConversation)
}

func (t *tx) EventList(ctx context.Context, p agentowl.EventListParams) ([]*agentowl.Event, error) {
	where, args := []string{"conversation_id = ?"}, []any{p.ConversationID}
	if p.After != nil {
		where, args = append(where, "(received_at, id) > (?, ?)"), append(args, ts(p.After.At), p.After.ID)
	}
	rows, err := t.query(ctx, `SELECT `+eventCols+` FROM events WHERE `+strings.Join(where, " AND ")+
		` ORDER BY received_at, id LIMIT ?`, append(args, listLimit(p.Limit))...)
	return all(rows, err, scanEvent)
}

func (t *tx) EventCountByConversation(ctx context.Context, conversationID string) (int, error) {
	var n int
	err := t.queryRow(ctx, `SELECT count(*) FROM events WHERE conversation_id = ?`, conversationID).Scan(&n)
	return n, err
}

func (t *tx) EventMove(ctx context.Context, id, conversationID string, followUp bool) error {
	if err := t.execOne(ctx, `UPDATE events SET conversation_id = ?, follow_up = ? WHERE id = ?`, conversationID, boolInt(followUp), id); err != nil {
		return err
	}
	// An email's Message-ID names the conversation replies continue.
	_, err := t.exec(ctx, `UPDATE email_messages SET conversation_id = ? WHERE event_id = ?`, conversationID, id)
	return err
}

func (t *tx) WorkMoveByEvent(ctx context.Context, eventID, conversationID string) error {
	_, err := t.exec(ctx, `UPDATE work SET conversation_id = ? WHERE event_id = ?`, conversationID, eventID)
	return err
}

func (t *tx) WorkCountOpen(ctx context.Context, conversationID string) (int, error) {
	var n int
	err := t.queryRow(ctx, `SELECT count(*) FROM work WHERE conversation_id = ?
		AND status IN ('pending', 'accepted', 'running', 'needs_input')`, conversationID).Scan(&n)
	return n, err
}

func (t *tx) MessageRewrite(ctx context.Context, id string, body []byte) error {
	// The claim leases a message and counts its attempt in one statement,
	// so attempts = 0 means no attempt has started or is in flight; a
	// concurrent claim either sees the new body or makes this match nothing.
	err := t.execOne(ctx, `UPDATE outbox SET body = ?, body_event = NULL, body_at = NULL WHERE id = ? AND state = 'pending' AND attempts = 0`, body, id)
	if !errors.Is(err, agentowl.ErrNotFound) {
		return err
	}
	if _, err := t.MessageGet(ctx, id); err != nil {
		return err
	}
	return agentowl.ErrConflict
}
