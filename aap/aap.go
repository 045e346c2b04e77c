// Package aap is the harness kit for the Agent Approval Protocol (AAP v1) in
// asynchronous mode: everything a harness needs to put an approval boundary in
// front of its tools when its agent process may stop between a tool call and
// the decision.
//
//   - Adapter intercepts a tool call, durably saves it with its idempotency
//     key before submitting it (Submit), suspends it while the request is
//     pending, and runs it at most once when a wake-up or recovery reads the
//     request back approved and the approval has not expired (Resume,
//     Recover). Abandon withdraws an execution and cancels its request.
//   - Receiver is the http.Handler that providers send signed webhooks to. It
//     answers webhook.verification only for registrations it expects, verifies
//     request.resolved notifications, durably records them before any 2xx, and
//     hands them to the harness as wake-ups (Dispatch, WakeupAPI).
//   - Provisioner creates an instance with a verified receiver (or replaces its
//     delivery): it generates the registration ID and signing secret, stores
//     their association on the receiver, then calls POST /v1/instances.
//   - Client is the small HTTP client of the provider's /v1 API that the
//     others use. It parses every answer strictly: an answer that does not
//     parse is an error, and an error never lets a tool run.
//
// State lives behind two small interfaces, ExecutionStore and ReceiverStore.
// The sub-packages aap/sqlite (the default: one file, WAL, synchronous=FULL,
// group commit) and aap/postgres implement both.
//
// Signatures use the module's webhook package (Standard Webhooks, HMAC-SHA256).
package aap

import (
	"errors"
	"time"
)

// Clock is the source of time for approval expiry, webhook timestamp
// tolerance, leases and retention. Tests inject a fake; agentowl.Clock
// satisfies it.
type Clock interface {
	Now() time.Time
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now().UTC() }

func clockOr(c Clock) Clock {
	if c == nil {
		return systemClock{}
	}
	return c
}

// Errors returned by stores and by the kit. Store implementations return
// ErrNotFound and ErrConflict (possibly wrapped); callers test with errors.Is.
var (
	// ErrNotFound: no such registration, event, wake-up or execution.
	ErrNotFound = errors.New("aap: not found")
	// ErrConflict: the write contradicts what is stored (a key reused for
	// another call, a registration bound to another instance).
	ErrConflict = errors.New("aap: conflict")
	// ErrUnknownRequest is returned by Adapter.Resume for a request ID that
	// no saved execution carries yet, for example a wake-up that arrived
	// before the submission saved its request ID. The caller keeps the
	// wake-up and retries it later; it must not be discarded.
	ErrUnknownRequest = errors.New("aap: no saved execution for this request ID (yet)")
	// ErrInvalidResponse wraps every provider answer that cannot be parsed
	// or does not match what was asked for. It never lets a tool run.
	ErrInvalidResponse = errors.New("aap: invalid provider response")
)

// Status is the state of an approval request.
type Status string

// Approval request states. Only approved, before decision.expires_at,
// permits a call to start.
const (
	StatusPending   Status = "pending"
	StatusApproved  Status = "approved"
	StatusDenied    Status = "denied"
	StatusExpired   Status = "expired"
	StatusCancelled Status = "cancelled"
)

// Terminal reports whether s is one of the four final states.
func (s Status) Terminal() bool {
	switch s {
	case StatusApproved, StatusDenied, StatusExpired, StatusCancelled:
		return true
	}
	return false
}

func (s Status) valid() bool { return s == StatusPending || s.Terminal() }

// EventRetention is how long a receiver keeps an event ID after the event's
// created_at, so a retried notification is recognised as a duplicate: the
// provider's seven-day retry window plus its 24-hour grace period.
const EventRetention = 8 * 24 * time.Hour
