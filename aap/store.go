package aap

import (
	"context"
	"encoding/json"
	"time"
)

// ExecState is where a saved execution is in its life. Only the adapter
// moves an execution between states, always with a compare-and-set
// (ExecutionStore.Transition), so two processes resuming the same execution
// cannot both start it.
type ExecState string

// Execution states.
const (
	// ExecSubmitting: the key and call are saved; the request ID is not known
	// yet. Submit or Recover re-submits with the same key.
	ExecSubmitting ExecState = "submitting"
	// ExecWaiting: suspended on a pending request whose ID is saved. A
	// wake-up or Recover resumes it.
	ExecWaiting ExecState = "waiting"
	// ExecStarted: the approval was checked and the tool allowed to start.
	// It is never started again, even if the process died while it ran.
	ExecStarted ExecState = "started"
	// ExecFinished: the tool returned; Result or Error holds what it said.
	ExecFinished ExecState = "finished"
	// ExecNotRun: the call will never run; Reason says why (denied, expired,
	// cancelled, approval expired before the call could start, the provider
	// refused the submission).
	ExecNotRun ExecState = "not_run"
	// ExecAbandoned: the harness gave up; its request is cancelled
	// (CancelDone once the provider confirmed it).
	ExecAbandoned ExecState = "abandoned"
)

// Execution is one intercepted tool call and what became of it.
type Execution struct {
	// Key is the idempotency key of the approval request and the
	// execution's identity.
	Key string
	// Call is the exact call that was submitted, and the one that runs.
	Call Call
	// RequestID is the provider's request ID once known.
	RequestID string
	State     ExecState
	// Reason explains ExecNotRun and ExecAbandoned.
	Reason string
	// Result is what the tool returned (ExecFinished).
	Result json.RawMessage
	// Error is the tool's error text (ExecFinished).
	Error string
	// CancelDone reports, for an abandoned execution, that the provider
	// confirmed its request is no longer pending.
	CancelDone bool
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

// Change is the new state of an execution in a Transition. RequestID is
// written only when it is not empty; the other fields are always written.
type Change struct {
	State      ExecState
	RequestID  string
	Reason     string
	Result     json.RawMessage
	Error      string
	CancelDone bool
	At         time.Time
}

// ExecutionStore durably keeps a harness's executions. Every method must be
// durable when it returns nil. The Adapter is its only caller.
type ExecutionStore interface {
	// CreateExecution saves a new execution; ErrConflict if its key exists.
	CreateExecution(ctx context.Context, e *Execution) error
	// GetExecution returns the execution with key; ErrNotFound.
	GetExecution(ctx context.Context, key string) (*Execution, error)
	// ExecutionByRequest returns the execution whose RequestID is id;
	// ErrNotFound.
	ExecutionByRequest(ctx context.Context, requestID string) (*Execution, error)
	// Transition applies c to the execution with key only if its state is
	// one of from, and reports whether it did. A RequestID already carried
	// by another execution is ErrConflict.
	Transition(ctx context.Context, key string, from []ExecState, c Change) (bool, error)
	// ListExecutions returns the executions in any of states, oldest first.
	ListExecutions(ctx context.Context, states ...ExecState) ([]*Execution, error)
}

// Registration is a receiver's association of a registration ID with a
// signing secret, and the instance that verification bound to it.
type Registration struct {
	ID     string
	Secret string
	// InstanceID is the instance proposed by the last successful
	// verification ("" before any).
	InstanceID string
	// Confirmed is set once the binding is known to be committed: the
	// provisioner saw the instance created, or a notification for it was
	// accepted. A confirmed registration is never re-bound to another
	// instance.
	Confirmed bool
	CreatedAt time.Time
}

// Event is a verified request.resolved notification as the receiver keeps
// it. Its ID (= webhook-id) is the deduplication key.
type Event struct {
	ID             string
	InstanceID     string
	RequestID      string
	RegistrationID string
	CreatedAt      time.Time
	ReceivedAt     time.Time
	// KeepUntil is when the event ID may be forgotten.
	KeepUntil time.Time
	Body      []byte
}

// Wakeup is a recorded event waiting for the harness to resume the
// execution of RequestID, until it is acknowledged.
type Wakeup struct {
	EventID    string    `json:"event_id"`
	InstanceID string    `json:"instance_id"`
	RequestID  string    `json:"request_id"`
	CreatedAt  time.Time `json:"created_at"`
	ReceivedAt time.Time `json:"received_at"`
	// Attempts counts how often it was handed out.
	Attempts int `json:"attempts"`
}

// ReceiverStore durably keeps a receiver's registrations and events. Every
// write must be durable when it returns nil. The Receiver and the
// Provisioner are its callers.
type ReceiverStore interface {
	// PutRegistration saves an expected registration. Saving the same ID and
	// secret again is a no-op; another secret for the ID is ErrConflict.
	PutRegistration(ctx context.Context, r *Registration) error
	// GetRegistration returns a registration; ErrNotFound.
	GetRegistration(ctx context.Context, id string) (*Registration, error)
	// DeleteRegistration forgets a registration (nil if already gone).
	DeleteRegistration(ctx context.Context, id string) error
	// BindRegistration binds instanceID to the registration; with confirm it
	// also confirms the binding. ErrNotFound for an unknown registration;
	// ErrConflict when it is confirmed to another instance and confirm is
	// false.
	BindRegistration(ctx context.Context, id, instanceID string, confirm bool) error
	// InstanceRegistrations returns the registrations bound to instanceID.
	InstanceRegistrations(ctx context.Context, instanceID string) ([]*Registration, error)
	// RecordEvent saves a verified event and its wake-up and confirms its
	// registration, atomically. It reports false, changing nothing, when an
	// event with the same ID is already kept.
	RecordEvent(ctx context.Context, e *Event) (bool, error)
	// LeaseWakeups returns up to limit unacknowledged wake-ups whose lease
	// has lapsed at now, oldest first, leasing them until leaseUntil.
	LeaseWakeups(ctx context.Context, now, leaseUntil time.Time, limit int) ([]Wakeup, error)
	// AckWakeup acknowledges a wake-up: it is never handed out again.
	// ErrNotFound for an unknown event.
	AckWakeup(ctx context.Context, eventID string, at time.Time) error
	// PurgeEvents forgets events whose KeepUntil is before now.
	PurgeEvents(ctx context.Context, now time.Time) (int64, error)
}

// Store is both stores in one database, as aap/sqlite and aap/postgres
// provide.
type Store interface {
	ExecutionStore
	ReceiverStore
	Close() error
}
