package agentowl

import (
	"context"
	"time"
)

// Queries of operating AgentOwl (docs/operating.md): the redrive
// of ended deliveries and the tenant health counts behind work-doctor. The
// rules (what may be redriven, what a finding is) live in internal/work and
// internal/doctor.

// OutboxEntry is an outbox message with what it delivers: its work (when
// its subject is work: a handoff or a decision push), its event (the
// work's, or the subject when that is an event) and the event's binding and
// endpoint. Fields are empty when the message is about none of them (AAP
// notifications).
type OutboxEntry struct {
	Message    *OutboxMessage
	WorkID     string
	EventID    string
	BindingID  string
	Channel    string
	EndpointID string
}

// OutboxFindParams filters OutboxFind; results are newest first.
type OutboxFindParams struct {
	TenantID string
	Kinds    []string     // required: the message kinds to list
	State    MessageState // optional
	// EndpointID, EventID, BindingID and WorkID, when set, keep the
	// messages delivering to that endpoint, carrying that event or work, or
	// routed by that binding.
	EndpointID, EventID, BindingID, WorkID string
	// CreatedBefore, when set, keeps messages created at or before it.
	CreatedBefore time.Time
	Limit         int
}

// RedriveParams starts a new attempt series of an ended message.
type RedriveParams struct {
	ID string
	// From are the states it may be redriven from; ErrConflict otherwise.
	From []MessageState
	// Now is when the first attempt of the series is due; DeadlineAt ends
	// the series.
	Now, DeadlineAt time.Time
}

// EndpointOutboxHealth counts one endpoint's troubled messages (EndpointID
// "" for messages about no endpoint, such as AAP notifications).
type EndpointOutboxHealth struct {
	EndpointID string
	// Failing: pending messages whose last attempt failed (they are being
	// retried).
	Failing int
	// Failed: messages that ended failed and whose incident, if any, is not
	// resolved yet.
	Failed int
	// Stuck: pending messages due since before the stuck bound without an
	// attempt recorded since (deferrals by destination limits do not
	// count): no engine is taking them, or limits hold them back.
	Stuck int
	// OldestStuck is since when the longest-waiting stuck message was due.
	OldestStuck *time.Time
}

// AwaitingReceipt is a decision on work that has not ended whose receipt
// the runtime has not given, with its push's state ("" without a push).
type AwaitingReceipt struct {
	Decision   *WorkDecision
	EndpointID string
	PushState  MessageState
}

// Operations is implemented by Tx.
type OperationStore interface {
	// OutboxFind lists a tenant's messages of the given kinds with what
	// they deliver.
	OutboxFind(ctx context.Context, p OutboxFindParams) ([]*OutboxEntry, error)
	// OutboxGet returns one message with what it delivers; ErrNotFound if
	// none.
	OutboxGet(ctx context.Context, id string) (*OutboxEntry, error)
	// MessageRedrive makes an ended message pending again for a new attempt
	// series: due at Now, ending at DeadlineAt, its lease, end, retention
	// and last error cleared, its attempt count kept as the series' base
	// and its redrive count raised. ErrNotFound if there is no such
	// message; ErrConflict if it is not in one of p.From.
	MessageRedrive(ctx context.Context, p RedriveParams) (*OutboxMessage, error)
	// OutboxHealth counts a tenant's failing, failed and stuck messages per
	// endpoint; stuckBefore is the stuck bound. Endpoints without any are
	// left out.
	OutboxHealth(ctx context.Context, tenantID string, stuckBefore time.Time) ([]*EndpointOutboxHealth, error)
	// DecisionsAwaitingReceipt returns up to limit of a tenant's decisions,
	// made at or before decidedBefore on work that has not ended, that have
	// no receipt, oldest first.
	DecisionsAwaitingReceipt(ctx context.Context, tenantID string, decidedBefore time.Time, limit int) ([]*AwaitingReceipt, error)
	// WorkByCallbacks returns up to limit of a tenant's work that has not
	// ended and has at least min recorded callbacks, most first.
	WorkByCallbacks(ctx context.Context, tenantID string, min, limit int) ([]*Work, error)
	// AttentionByMessage returns the incident reporting an outbox message;
	// ErrNotFound if none.
	AttentionByMessage(ctx context.Context, messageID string) (*AttentionItem, error)
	// AttentionDetachMessage clears an item's message ID, so the message's
	// next failure can open an incident of its own.
	AttentionDetachMessage(ctx context.Context, itemID string) error
	// CounterGet returns the counter of key in the window starting at
	// windowStart (0 when none was counted).
	CounterGet(ctx context.Context, key string, windowStart time.Time) (int64, error)
}
