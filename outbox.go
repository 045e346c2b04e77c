package agentowl

import "time"

// OutboxHeld is the next attempt time of a held message: a handoff to a
// paused endpoint (Endpoint.PausedAt), which no attempt starts until the
// endpoint is resumed. Its due time is held too, so a held message is
// neither a deferral nor a stall.
var OutboxHeld = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)

// OutboxMessage is one outbound message of the delivery engine: a row of
// the outbox (internal/outbox builds them, internal/delivery sends them).
type OutboxMessage struct {
	ID          string // the event ID, sent as webhook-id; stable across attempts
	TenantID    string
	Kind        string // e.g. "aap.request_resolved", "aap.webhook_verification"
	Destination string // resolved at each attempt, e.g. "instance:<id>"
	Subject     string // what it is about, e.g. the approval request ID
	Body        []byte // exact bytes sent on every attempt
	CreatedAt   time.Time
	DeadlineAt  time.Time // no attempt starts or runs past this
	State       MessageState
	Attempts    int
	NextAttempt time.Time
	LeaseOwner  string
	LeaseUntil  *time.Time
	LastStatus  int
	LastError   string
	EndedAt     *time.Time
	RetainUntil *time.Time
	// Redrives counts the attempt series an operator started by hand
	// (work-outbox redrive); AttemptBase is how many attempts were made
	// before the current series, whose backoff counts from there.
	Redrives    int
	AttemptBase int
	// Payload, when set on MessageCreate, says that Body holds an event's
	// payload at Body[At:At+Len], byte for byte as the event stored it: the
	// store keeps the body without it and puts it back in every read, so a
	// large payload (an email's text) is written once. Reads leave it nil.
	Payload *PayloadRef
}

// PayloadRef locates an event's payload inside a message body.
type PayloadRef struct {
	EventID string
	At, Len int
}

// MessageState is where a message is in its life.
//
// Messages are created pending (internal/outbox.Enqueue: work handoffs,
// decision pushes, approval notifications). The delivery engine
// (internal/delivery) moves them on; an operator's redrive
// (internal/work.Redrive) starts a failed or cancelled one again.
// CanBecome is the rule.
type MessageState string

const (
	// MessagePending: waiting for its next attempt or in flight (leased).
	// Set at creation, again by the engine after an attempt that left
	// time in the retry window (or could not resolve its destination),
	// and by a redrive. Left when an attempt ends it, or when its
	// destination goes away.
	MessagePending MessageState = "pending"
	// MessageDelivered: a 2xx acknowledged it (and the target's answer
	// check passed). Final: a redrive is refused (already_delivered).
	MessageDelivered MessageState = "delivered"
	// MessageFailed: the retry window ended without acknowledgement (the
	// engine). Left only by a redrive, which makes it pending again.
	MessageFailed MessageState = "failed"
	// MessageCancelled: its destination went away: the engine found no
	// target, or the destination's owner ended its pending messages (an
	// endpoint deleted, an instance's receiver removed or the instance
	// deleted). Left only by a redrive.
	MessageCancelled MessageState = "cancelled"
)

// CanBecome reports whether a message in state s may be set to state next,
// so that a use-case asks the record instead of repeating the states: a
// pending message may become any state, pending again included (a retry);
// a failed or cancelled one only pending (a redrive); a delivered one
// nothing. An unknown state is legal on neither side.
func (s MessageState) CanBecome(next MessageState) bool {
	switch s {
	case MessagePending:
		switch next {
		case MessagePending, MessageDelivered, MessageFailed, MessageCancelled:
			return true
		}
	case MessageFailed, MessageCancelled:
		return next == MessagePending
	}
	return false
}

// Attempt is one recorded delivery attempt.
type Attempt struct {
	EventID    string
	N          int
	URL        string
	StartedAt  time.Time
	EndedAt    time.Time
	StatusCode int
	Error      string
}

// QueueStats is the pending part of one surface of the outbox.
type QueueStats struct {
	// Surface is the kind of destination: the text before its first ':'.
	Surface string
	Pending int
	// OldestCreated is the creation of the oldest pending message.
	OldestCreated time.Time
	// OldestDue is the earliest DueSince at or before now: the message that
	// has waited longest for an attempt (nil when none is due).
	OldestDue *time.Time
}

// EngineReport is what a running delivery engine reports of itself, a few
// seconds old at most while it runs (see delivery.Engine).
type EngineReport struct {
	Owner     string
	StartedAt time.Time
	SeenAt    time.Time
	// Attempts are the attempts holding destination slots now.
	Attempts int
	// SlotsBusy and SlotsIdle are the slots it holds, used by an attempt
	// or idle. SlotsStale counts busy slots held longer than any attempt
	// can last: held without an attempt. SlotsReclaimed counts such slots
	// it took back since it started.
	SlotsBusy, SlotsIdle, SlotsStale int
	SlotsReclaimed                   int64
}

// Slot is one lease on an in-flight slot of a delivery destination key.
type Slot struct {
	Key string
	N   int
	// Until is when the lease ends. It also tells this lease of the slot
	// from any other: a slot is leased again only after this lease ended.
	Until time.Time
}
