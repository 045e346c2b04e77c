// Package outbox owns a message to send: the row a use-case writes in the
// transaction of the change that caused it (Enqueue), and the Target an
// attempt goes to. The delivery engine (internal/delivery) consumes both;
// the use-cases depend on this package only, so they stay free of the
// engine, its HTTP client and its metrics. It imports only the domain.
package outbox

import (
	"context"
	"net/http"
	"time"

	"github.com/agentowl/agentowl"
)

// Target is where one attempt goes. Resolvers return it so that a message
// names a destination, not a URL: the URL and secret are read at each
// attempt and follow the destination's changes.
type Target struct {
	URL    string
	Secret string // whsec_ signing secret
	// Header, when set, adds headers to every attempt (such as the bearer
	// secret of a decision push); it cannot replace the signature headers.
	Header http.Header
	// Accept, when set, checks a 2xx answer (status and the bounded body):
	// a non-nil error makes the attempt a failed one.
	Accept func(status int, body []byte) error
	// Held says the destination is paused (an endpoint's handoffs held by
	// an operator): no attempt starts, the message waits, held, until the
	// destination is resumed. URL and Secret are then unused.
	Held bool
}

// Resolver returns the current target of a destination, or nil when it no
// longer exists (the message is then cancelled). It is generic over the
// transaction it reads through so that this package need not import the
// store; the engine uses Resolver[agentowl.Tx].
type Resolver[Tx any] func(ctx context.Context, tx Tx, destination string) (*Target, error)

// Creator is the one store method Enqueue needs (agentowl.Tx has it), so that
// building a row does not depend on the store package.
type Creator interface {
	MessageCreate(ctx context.Context, m *agentowl.OutboxMessage) error
}

// Message is what a use-case decides about a message to send; Enqueue
// fills in the rest of the row, the same way for every sender.
type Message struct {
	ID          string // the event ID, sent as webhook-id; minted by the caller, who often puts it in Body
	TenantID    string
	Kind        string // what it is, e.g. "work.handoff"
	Destination string // resolved at each attempt, e.g. "endpoint:<id>"
	Subject     string // what it is about, e.g. the work ID
	Body        []byte // exact bytes sent on every attempt
	Deadline    time.Time
	// Due, when set, is when the first attempt may start (a binding's
	// handoff delay, or agentowl.OutboxHeld for a paused endpoint); zero is
	// at once.
	Due time.Time
	// Payload, when set, locates an event's payload inside Body (see
	// agentowl.OutboxMessage.Payload).
	Payload *agentowl.PayloadRef
}

// Enqueue writes m through tx as a pending outbox row created at now and
// due at m.Due (at once when zero), and returns the row written. Call it inside the
// transaction of the change that caused the message: it is sent only if
// that commits.
func Enqueue(ctx context.Context, tx Creator, now time.Time, m Message) (*agentowl.OutboxMessage, error) {
	due := now
	if !m.Due.IsZero() {
		due = m.Due
	}
	row := &agentowl.OutboxMessage{
		ID: m.ID, TenantID: m.TenantID, Kind: m.Kind, Destination: m.Destination, Subject: m.Subject, Body: m.Body,
		CreatedAt: now, DeadlineAt: m.Deadline, State: agentowl.MessagePending, NextAttempt: due, Payload: m.Payload,
	}
	if err := tx.MessageCreate(ctx, row); err != nil {
		return nil, err
	}
	return row, nil
}
