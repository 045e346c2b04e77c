package store

import (
	"context"

	"github.com/agentowl/agentowl"
)

// ConversationListParams filters ConversationList. Results are the most
// recently active first: by last event time, then ID, both descending.
type ConversationListParams struct {
	TenantID  string
	Channel   string // optional
	BindingID string // optional
	Status    string // optional: agentowl.ConversationOpen or agentowl.ConversationEnded
	// After, when set, is the last conversation of the previous page (its
	// LastEventAt and ID).
	After *agentowl.Cursor
	Limit int
}

// EventListParams selects a conversation's events, oldest first: by
// received time, then ID.
type EventListParams struct {
	ConversationID string
	// After, when set, is the last event of the previous page (its
	// ReceivedAt and ID).
	After *agentowl.Cursor
	Limit int
}

// Conversations is what the operator views of conversations need beside
// AgentWork: listing, counting, and moving an event (with its work) to
// another conversation. Implemented by Tx; callers are internal/ingress
// and internal/work.
type Conversations interface {
	// ConversationList lists a tenant's conversations (ConversationListParams).
	ConversationList(ctx context.Context, p ConversationListParams) ([]*agentowl.Conversation, error)
	// EventList lists a conversation's events (EventListParams).
	EventList(ctx context.Context, p EventListParams) ([]*agentowl.Event, error)
	// EventCountByConversation counts a conversation's events.
	EventCountByConversation(ctx context.Context, conversationID string) (int, error)
	// EventMove puts an event in another conversation, with its follow-up
	// flag and, for an email, its Message-ID record (EmailThreads), so that
	// replies to it continue that conversation; ErrNotFound if there is no
	// such event.
	EventMove(ctx context.Context, id, conversationID string, followUp bool) error
	// WorkMoveByEvent puts every work of an event in another conversation.
	WorkMoveByEvent(ctx context.Context, eventID, conversationID string) error
	// WorkCountOpen counts a conversation's work that has not ended
	// (pending, accepted, running or needs_input).
	WorkCountOpen(ctx context.Context, conversationID string) (int, error)
	// MessageRewrite replaces the body of an outbox message no attempt has
	// started yet; ErrNotFound if there is no such message, ErrConflict if
	// it is not pending or an attempt has started (it may have been sent).
	MessageRewrite(ctx context.Context, id string, body []byte) error
}
