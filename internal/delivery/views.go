package delivery

import (
	"context"
	"errors"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/store"
)

// List returns a tenant's messages, newest first.
func List(ctx context.Context, st store.Store, p store.MessageListParams) ([]*agentowl.OutboxMessage, error) {
	var out []*agentowl.OutboxMessage
	err := st.Read(ctx, func(tx store.Tx) (err error) {
		out, err = tx.MessageList(ctx, p)
		return err
	})
	return out, err
}

// Inspect returns one message of the tenant scope m and its attempts; not
// found names the tenant searched.
func Inspect(ctx context.Context, st store.Store, m *agentowl.TenantScope, id string) (*agentowl.OutboxMessage, []*agentowl.Attempt, error) {
	var msg *agentowl.OutboxMessage
	var attempts []*agentowl.Attempt
	err := st.Read(ctx, func(tx store.Tx) (err error) {
		msg, err = tx.MessageGet(ctx, id)
		if errors.Is(err, store.ErrNotFound) || (err == nil && msg.TenantID != m.TenantID) {
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
