package delivery

import (
	"context"
	"errors"

	"github.com/agentowl/agentowl"
)

// Views read the outbox for the operator API, so that the HTTP surface
// reads deliveries without a store of its own.
type Views struct{ store agentowl.Store }

// NewViews returns the outbox views of st.
func NewViews(st agentowl.Store) *Views { return &Views{store: st} }

// ListFilter narrows List; the zero value lists every message.
type ListFilter struct {
	Subject     string                // optional: what a message is about, e.g. an approval request ID
	Destination string                // optional: a destination or its prefix, e.g. "instance:<id>"
	State       agentowl.MessageState // optional
	Limit       int
}

// List returns the messages of the membership m, newest first.
func (v *Views) List(ctx context.Context, m *agentowl.Membership, f ListFilter) ([]*agentowl.OutboxMessage, error) {
	p := agentowl.MessageListParams{TenantID: m.TenantID, Subject: f.Subject, Prefix: f.Destination, State: f.State, Limit: f.Limit}
	var out []*agentowl.OutboxMessage
	err := v.store.Read(ctx, func(tx agentowl.Tx) (err error) {
		out, err = tx.MessageList(ctx, p)
		return err
	})
	return out, err
}

// Inspect returns one message of the membership m and its attempts; not
// found names the tenant searched.
func (v *Views) Inspect(ctx context.Context, m *agentowl.Membership, id string) (*agentowl.OutboxMessage, []*agentowl.Attempt, error) {
	var msg *agentowl.OutboxMessage
	var attempts []*agentowl.Attempt
	err := v.store.Read(ctx, func(tx agentowl.Tx) (err error) {
		msg, err = tx.MessageGet(ctx, id)
		if errors.Is(err, agentowl.ErrNotFound) || (err == nil && msg.TenantID != m.TenantID) {
			return agentowl.Errorf(agentowl.ECodeNotFound, "No delivery %q in tenant %q.", id, m.TenantName)
		}
		if err != nil {
			return err
		}
		attempts, err = tx.AttemptList(ctx, id)
		return err
	})
	return msg, attempts, err
}
