package work

import (
	"context"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/access"
)

// Needs attention by urgency (docs/console.md): a tenant's unresolved
// items counted per kind and status, and listed soonest expiry first.

// CountAttention counts the tenant's unresolved items per kind and status
// and, of each, those that expire at or before soon. Members may.
func (s *Service) CountAttention(ctx context.Context, p *access.Principal, tenant string, soon time.Time) ([]agentowl.AttentionCount, error) {
	return access.ReadAs(ctx, s.store, p, tenant, agentowl.RoleMember, func(tx agentowl.Tx, m *agentowl.Membership) ([]agentowl.AttentionCount, error) {
		return tx.AttentionCounts(ctx, m.TenantID, soon)
	})
}

// ListAttentionByUrgency lists the tenant's unresolved items of
// params.Status (open, acknowledged, or unresolved): with dated, those
// that expire, soonest first (params.After: the last one's expiry and
// ID); without, those that never expire, newest first. Members may.
func (s *Service) ListAttentionByUrgency(ctx context.Context, p *access.Principal, tenant string, dated bool, params agentowl.AttentionListParams) ([]*AttentionView, error) {
	list := agentowl.Tx.AttentionListUndated
	if dated {
		list = agentowl.Tx.AttentionListDated
	}
	return s.listAttention(ctx, p, tenant, params, list)
}
