package sqlstore

import (
	"context"
	"strings"

	"github.com/agentowl/agentowl"
)

// SQL of email threading (agentowl.EmailThreadStore).

func (t *tx) EmailMessageCreate(ctx context.Context, m *agentowl.EmailMessage) error {
	_, err := t.exec(ctx, `INSERT INTO email_messages (binding_id, message_id, tenant_id, conversation_id, event_id)
		VALUES (?, ?, ?, ?, ?)`, m.BindingID, m.MessageID, m.TenantID, m.ConversationID, m.EventID)
	return err
}

func (t *tx) EmailConversations(ctx context.Context, tenantID, bindingID string, messageIDs []string) ([]string, error) {
	if len(messageIDs) == 0 {
		return nil, nil
	}
	args := []any{tenantID, bindingID}
	for _, id := range messageIDs {
		args = append(args, id)
	}
	rows, err := t.query(ctx, `SELECT DISTINCT conversation_id FROM email_messages WHERE tenant_id = ? AND binding_id = ?
		AND message_id IN (`+strings.TrimSuffix(strings.Repeat("?, ", len(messageIDs)), ", ")+`)`, args...)
	return all(rows, err, func(s scanner) (string, error) {
		var id string
		return id, s.Scan(&id)
	})
}

func (t *tx) ConversationParticipantAdd(ctx context.Context, conversationID, address string) error {
	_, err := t.exec(ctx, `INSERT INTO conversation_participants (conversation_id, address) VALUES (?, ?)
		ON CONFLICT (conversation_id, address) DO NOTHING`, conversationID, address)
	return err
}

func (t *tx) ConversationHasParticipant(ctx context.Context, conversationID, address string) (bool, error) {
	var n int
	err := t.queryRow(ctx, `SELECT count(*) FROM conversation_participants WHERE conversation_id = ? AND address = ?`,
		conversationID, address).Scan(&n)
	return n > 0, err
}
