package delivery

import (
	"context"
	"errors"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/store"
)

// List returns a tenant's messages, newest first.
func List(ctx context.Context, st store.Store, p store.MessageListParams) ([]*store.Message, error) {
	var out []*store.Message
	err := st.Read(ctx, func(tx store.Tx) (err error) {
		out, err = tx.MessageList(ctx, p)
		return err
	})
	return out, err
}

// Inspect returns one message of a tenant and its attempts.
func Inspect(ctx context.Context, st store.Store, tenantID, id string) (*store.Message, []*store.Attempt, error) {
	var m *store.Message
	var attempts []*store.Attempt
	err := st.Read(ctx, func(tx store.Tx) (err error) {
		m, err = tx.MessageGet(ctx, id)
		if errors.Is(err, store.ErrNotFound) || (err == nil && m.TenantID != tenantID) {
			return agentowl.Errorf(agentowl.ECodeNotFound, "No delivery %q in this tenant.", id)
		}
		if err != nil {
			return err
		}
		attempts, err = tx.AttemptList(ctx, id)
		return err
	})
	return m, attempts, err
}
