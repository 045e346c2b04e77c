package agentowl

import (
	"context"
	"time"
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
	After *Cursor
	Limit int
}

// EventListParams selects a conversation's events, oldest first: by
// received time, then ID.
type EventListParams struct {
	ConversationID string
	// After, when set, is the last event of the previous page (its
	// ReceivedAt and ID).
	After *Cursor
	Limit int
}

// Conversations is the persistence of conversations and their events:
// creating, threading, ending, listing, and moving an event (with its work)
// to another conversation. Implemented by Tx; callers are internal/ingress
// and internal/work.
type ConversationStore interface {
	// ConversationList lists a tenant's conversations (ConversationListParams).
	ConversationList(ctx context.Context, p ConversationListParams) ([]*Conversation, error)
	// EventList lists a conversation's events (EventListParams).
	EventList(ctx context.Context, p EventListParams) ([]*Event, error)
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

	// ConversationCreate inserts a conversation; ErrConflict if its key is
	// taken by an open conversation of the same binding.
	ConversationCreate(ctx context.Context, c *Conversation) error
	ConversationGet(ctx context.Context, id string) (*Conversation, error)
	// ConversationGetOpenByKey finds the open conversation of a binding
	// with key.
	ConversationGetOpenByKey(ctx context.Context, bindingID, key string) (*Conversation, error)
	// ConversationTouch records a new event at lastEventAt.
	ConversationTouch(ctx context.Context, id string, lastEventAt time.Time) error
	// ConversationEnd ends an open conversation at at; ErrNotFound if there
	// is no such conversation, ErrConflict if it has already ended.
	ConversationEnd(ctx context.Context, id string, at time.Time) error
	// ConversationEndIdle ends up to limit open conversations of channel
	// whose last event is at or before now - window, each as of the moment
	// its window closed (last event + window), and returns how many.
	ConversationEndIdle(ctx context.Context, channel string, now time.Time, window time.Duration, limit int) (int, error)
	// ConversationSetSession records the runtime session ID.
	ConversationSetSession(ctx context.Context, id, sessionID string) error
	// EventCreate inserts an event; ErrConflict if its binding already has
	// an event with the same dedupe key.
	EventCreate(ctx context.Context, e *Event) error
	EventGet(ctx context.Context, id string) (*Event, error)
	EventGetByDedupeKey(ctx context.Context, bindingID, key string) (*Event, error)
}
