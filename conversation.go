package agentowl

import (
	"encoding/json"
	"time"
)

// Conversation states. Events join only an open conversation; an ended one
// (reset by an operator, or past its channel's inactivity window) never
// takes another event.
const (
	ConversationOpen  = "open"
	ConversationEnded = "ended"
)

// Conversation groups a binding's events: a new one per event unless the
// channel's threading rule (internal/ingress) continues an open one.
type Conversation struct {
	ID        string // conv_…
	TenantID  string
	BindingID string
	Channel   string // the binding's channel
	// Key is the channel's thread identity: the webhook's conversation key,
	// the SMS remote number, the voice CallSid. Empty: never matched by key.
	// At most one open conversation of a binding has a given key.
	Key    string
	Status string // ConversationOpen or ConversationEnded
	// RuntimeSessionID is the latest session the runtime reported.
	RuntimeSessionID string
	CreatedAt        time.Time
	LastEventAt      time.Time
	EndedAt          *time.Time // set when Status is ended
}

// Event is one inbound message, channel-neutral.
type Event struct {
	ID             string // evt_…
	TenantID       string
	BindingID      string
	ConversationID string
	Channel        string
	Sender         string
	ReceivedAt     time.Time
	Headers        map[string][]string
	Payload        json.RawMessage
	Attachments    json.RawMessage // a JSON array; [] for the webhook channel
	// DedupeKey is the sender's idempotency key (webhook-id or
	// Idempotency-Key), unique per binding when set.
	DedupeKey string
	// FollowUp is true when the event joined an existing conversation.
	FollowUp bool
}

// EmailMessage is an email event's Message-ID at its binding.
type EmailMessage struct {
	TenantID       string
	BindingID      string
	MessageID      string
	ConversationID string
	EventID        string
}
