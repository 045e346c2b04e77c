package agentowl

import (
	"encoding/json"
	"time"
)

// WorkStatus is the runtime-reported state of work.
//
// Only two use-cases of internal/work write it: the handoff creates work
// pending (HandoffTx and HandoffEncodedTx for a new event, Replay for an
// intentional replay), and RecordCallback sets whatever status an applied
// runtime callback reports. Which callback applies is decided before the
// status rule: a sequence below the work's is recorded stale and changes
// nothing, and a repeated sequence is a duplicate or a conflict.
// CanBecome is the rule for the rest.
type WorkStatus string

// Work states.
const (
	// WorkPending: set when the handoff is committed; left by the first
	// applied callback, whatever it reports. Nothing moves work back to it.
	WorkPending WorkStatus = "pending"
	// WorkAccepted, WorkRunning and WorkNeedsInput: set by an applied
	// callback; left by the next applied one, to any reportable state, this
	// one included (a runtime may report running again, or needs_input
	// with a new revision). needs_input carries the requests that become
	// attention items.
	WorkAccepted   WorkStatus = "accepted"
	WorkRunning    WorkStatus = "running"
	WorkNeedsInput WorkStatus = "needs_input"
	// WorkCompleted, WorkFailed and WorkCancelled: set by an applied
	// callback, which also sets EndedAt; terminal. A later callback with a
	// higher sequence is refused (already_terminal), a lower one recorded
	// stale: neither reopens the work.
	WorkCompleted WorkStatus = "completed"
	WorkFailed    WorkStatus = "failed"
	WorkCancelled WorkStatus = "cancelled"
)

// Terminal reports whether s ends the work: no callback changes it after.
func (s WorkStatus) Terminal() bool {
	return s == WorkCompleted || s == WorkFailed || s == WorkCancelled
}

// CanBecome reports whether work in state s may be set to state next, so
// that a use-case asks the record instead of repeating the states: a work
// not ended yet (pending, accepted, running, needs_input) may be set to
// any state a callback reports (all but pending, its own included); a
// terminal work may be set to nothing, and nothing is set back to pending.
// An unknown state is legal on neither side.
func (s WorkStatus) CanBecome(next WorkStatus) bool {
	switch s {
	case WorkPending, WorkAccepted, WorkRunning, WorkNeedsInput:
	default:
		return false
	}
	switch next {
	case WorkAccepted, WorkRunning, WorkNeedsInput, WorkCompleted, WorkFailed, WorkCancelled:
		return true
	}
	return false
}

// Work is one handoff of an event to an agent-work endpoint and everything
// the runtime has reported about it. Its identity (ID, generation) is fixed
// when the handoff is committed and reused by every transport retry; an
// intentional replay is new Work with the next generation.
type Work struct {
	ID             string // work_…
	TenantID       string
	EndpointID     string
	ConversationID string
	EventID        string
	Generation     int
	ReplayOf       string // the work this replays, if any
	// DeliveryID is the outbox message carrying the handoff.
	DeliveryID string
	// CredentialID is the credential named in the handoff's work block.
	CredentialID string
	Status       WorkStatus
	// Sequence is the highest sequence applied (0 before any callback).
	Sequence         int64
	RuntimeSessionID string
	ResultSummary    string
	ResultURL        string
	// Requests is the raw requests array of the latest needs_input callback
	// (questions and approvals); the next milestone interprets it.
	Requests json.RawMessage
	// Error is the raw error object of a failed or cancelled callback.
	Error json.RawMessage
	// Callbacks counts recorded callbacks, stale ones included.
	Callbacks int
	CreatedAt time.Time
	UpdatedAt time.Time
	EndedAt   *time.Time
}

// Callback is one recorded runtime report about work.
type Callback struct {
	WorkID     string
	CallbackID string
	Sequence   int64
	Status     WorkStatus
	// OccurredAt is the report's timestamp exactly as sent.
	OccurredAt       string
	RuntimeSessionID string
	// Body is the report in canonical JSON (whitespace removed, keys
	// sorted); BodyHash is its SHA-256, which duplicate detection compares.
	Body     []byte
	BodyHash []byte
	// Stale is true when a higher sequence had already been applied: the
	// callback is kept but changed nothing.
	Stale bool
	// WorkStatus is the work's state after this callback was recorded (the
	// receipt's recorded state).
	WorkStatus   WorkStatus
	CredentialID string
	RecordedAt   time.Time
}
