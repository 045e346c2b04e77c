package agentowl

import (
	"encoding/json"
	"time"
)

// ConversationStatus names the states of a conversation for their rule,
// CanBecome. Conversation.Status and the state constants are still plain
// strings (the store's list filter takes one): convert to ask the rule,
// ConversationStatus(c.Status).CanBecome(ConversationEnded).
//
// A conversation is created open by ingress (internal/ingress.Accept: one
// per event unless the channel's threading rule continues an open one).
type ConversationStatus string

// Conversation states. Events join only an open conversation (a new
// event, or one an operator links in); an ended one never takes another.
const (
	// ConversationOpen: set at creation only; left when it ends.
	ConversationOpen = "open"
	// ConversationEnded: set, with EndedAt, by an operator's reset
	// (internal/ingress.ResetConversation), by linking its last event
	// into another conversation (LinkEvent), or when its channel's
	// inactivity window closed (SMS: the next message from the number, or
	// the maintenance sweep EndIdleConversations). Final: forced-reset
	// work that goes on still updates its session, never its status.
	ConversationEnded = "ended"
)

// CanBecome reports whether a conversation in state s may be set to state
// next, so that a use-case asks the record instead of repeating the
// states: an open conversation may end; nothing else is legal (an ended
// one is never reopened or ended again, and nothing is set open).
func (s ConversationStatus) CanBecome(next ConversationStatus) bool {
	return s == ConversationOpen && next == ConversationEnded
}

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
