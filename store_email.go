package agentowl

import (
	"context"
)

// EmailThreads is the persistence of email threading (internal/ingress):
// which conversation each email's Message-ID joined, per receiving
// binding, and each email conversation's participants. Implemented by Tx.
type EmailThreadStore interface {
	// EmailMessageCreate records that the email event eventID, with
	// messageID, joined conversationID at bindingID; ErrConflict if the
	// binding already has that Message-ID.
	EmailMessageCreate(ctx context.Context, m *EmailMessage) error
	// EmailConversations returns the distinct conversations that the
	// binding's emails with any of messageIDs joined, in no order.
	EmailConversations(ctx context.Context, tenantID, bindingID string, messageIDs []string) ([]string, error)
	// ConversationParticipantAdd adds an address to a conversation's
	// participants; an address already there is no error.
	ConversationParticipantAdd(ctx context.Context, conversationID, address string) error
	// ConversationHasParticipant reports whether address is a participant
	// of the conversation.
	ConversationHasParticipant(ctx context.Context, conversationID, address string) (bool, error)
}
