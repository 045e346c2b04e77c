package agentowl

import (
	"encoding/json"
	"time"
)

// WorkStatus is the runtime-reported state of work.
type WorkStatus string

// Work states. pending is set at handoff; every other state is set only by
// a runtime callback (internal/work). completed, failed and cancelled are
// terminal: no later callback changes them.
const (
	WorkPending    WorkStatus = "pending"
	WorkAccepted   WorkStatus = "accepted"
	WorkRunning    WorkStatus = "running"
	WorkNeedsInput WorkStatus = "needs_input"
	WorkCompleted  WorkStatus = "completed"
	WorkFailed     WorkStatus = "failed"
	WorkCancelled  WorkStatus = "cancelled"
)

// Terminal reports whether s ends the work.
func (s WorkStatus) Terminal() bool {
	return s == WorkCompleted || s == WorkFailed || s == WorkCancelled
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
