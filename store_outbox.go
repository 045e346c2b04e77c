package agentowl

import (
	"context"
	"time"
)

// Persistence of the outbox (internal/outbox builds its rows,
// internal/delivery claims and sends them) and of the delivery engines'
// shared state: destination slots and engine reports.

// ClaimParams selects due messages and leases them to one worker.
type ClaimParams struct {
	Now        time.Time
	LeaseUntil time.Time
	Owner      string
	Limit      int
}

// FinishParams records the outcome of one attempt. It applies only if the
// message is still leased by Owner for attempt number Attempt.
type FinishParams struct {
	ID      string
	Owner   string
	Attempt Attempt
	// State is the new state: pending (retry at NextAttempt) or terminal.
	State       MessageState
	NextAttempt time.Time
	RetainUntil *time.Time // set when State is terminal
}

// MessageListParams filters MessageList; newest first.
type MessageListParams struct {
	TenantID string
	Subject  string // optional
	Prefix   string // optional destination, e.g. "instance:<id>"
	State    MessageState
	Limit    int
}

// Outbox is implemented by Tx (see the methods named Message*).
type OutboxStore interface {
	MessageCreate(ctx context.Context, m *OutboxMessage) error
	MessageGet(ctx context.Context, id string) (*OutboxMessage, error)
	// MessageClaim leases up to Limit pending messages due at Now whose lease
	// is free or expired, oldest due first, incrementing their attempt count.
	MessageClaim(ctx context.Context, p ClaimParams) ([]*OutboxMessage, error)
	// MessageFinish records an attempt and the message's next state;
	// ErrConflict if the lease was lost.
	MessageFinish(ctx context.Context, p FinishParams) error
	// MessageFinishAll is MessageFinish of several messages in two
	// statements; lost[i] reports that ps[i]'s lease was lost (nothing of it
	// is recorded).
	MessageFinishAll(ctx context.Context, ps []FinishParams) (lost []bool, err error)
	// MessageDefer releases a leased message without counting an attempt
	// (a destination limit delayed it) and schedules it at next;
	// ErrConflict if the lease was lost.
	MessageDefer(ctx context.Context, id, owner string, attempt int, next time.Time) error
	// MessageHold gives back a leased message without counting an attempt
	// and holds it (next attempt and due time agentowl.OutboxHeld): its
	// destination is paused. ErrConflict if the lease was lost.
	MessageHold(ctx context.Context, id, owner string, attempt int) error
	// MessageHoldDestination holds every pending message of destination
	// that is not leased, and returns how many.
	MessageHoldDestination(ctx context.Context, destination string) (int, error)
	// MessageReleaseDestination makes every held message of destination
	// due, and returns how many: due since its creation, so that claims
	// (oldest due first) take them in the order they were enqueued; their
	// wait for an attempt counts from now.
	MessageReleaseDestination(ctx context.Context, destination string, now time.Time) (int, error)
	// MessageUndefer makes due at now up to limit deferred messages (put
	// back by MessageDefer to a time after now, not leased): those of ids,
	// or every deferred one when ids is nil. It returns how many.
	MessageUndefer(ctx context.Context, ids []string, now time.Time, limit int) (int, error)
	// MessageCancelDestination ends every pending message to destination,
	// returning their IDs. In-flight ones end when their lease would.
	MessageCancelDestination(ctx context.Context, destination string, now time.Time, grace time.Duration) ([]string, error)
	MessageList(ctx context.Context, p MessageListParams) ([]*OutboxMessage, error)
	AttemptList(ctx context.Context, eventID string) ([]*Attempt, error)
	// MessageStats returns the pending messages of each surface (the kind
	// of their destination: "instance", "endpoint", "decision"), with the
	// oldest one's creation and the longest wait since a message became due
	// (DueSince at or before now). Surfaces with none pending are left out.
	MessageStats(ctx context.Context, now time.Time) ([]*QueueStats, error)
}

// Engines is implemented by Tx: the delivery engines' reports.
type EngineStore interface {
	// EngineReport records r, replacing its owner's last report, and
	// deletes reports not renewed since before forgetBefore.
	EngineReport(ctx context.Context, r *EngineReport, forgetBefore time.Time) error
	// EngineGone deletes owner's report: it stopped cleanly.
	EngineGone(ctx context.Context, owner string) error
	// EngineList returns every report, by owner.
	EngineList(ctx context.Context) ([]*EngineReport, error)
}

// Slots is implemented by Tx: leases on the in-flight slots of delivery
// destinations, shared by every process using the database.
type SlotStore interface {
	// SlotsMake makes key's slots numbered below limit, if missing.
	SlotsMake(ctx context.Context, key string, limit int) error
	// SlotLease leases to owner, until until, up to n of key's slots numbered
	// below limit that are free or whose lease has lapsed at now, and
	// returns their numbers.
	SlotLease(ctx context.Context, key, owner string, limit, n int, now, until time.Time) ([]int, error)
	// SlotRenew extends to until those of slots that are still leased to
	// owner as given (same Until, not lapsed at now), and returns them
	// renewed.
	SlotRenew(ctx context.Context, owner string, slots []Slot, now, until time.Time) ([]Slot, error)
	// SlotRelease frees those of slots that are still leased to owner as
	// given.
	SlotRelease(ctx context.Context, owner string, slots []Slot) error
}
