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
	m, err := p.Tenant(tenant, agentowl.RoleMember)
	if err != nil {
		return nil, err
	}
	var out []agentowl.AttentionCount
	err = s.store.Read(ctx, func(tx agentowl.Tx) (err error) {
		out, err = tx.AttentionCounts(ctx, m.TenantID, soon)
		return err
	})
	return out, err
}

// ListAttentionByUrgency lists the tenant's unresolved items of
// params.Status (open, acknowledged, or unresolved): with dated, those
// that expire, soonest first (params.After: the last one's expiry and
// ID); without, those that never expire, newest first. Members may.
func (s *Service) ListAttentionByUrgency(ctx context.Context, p *access.Principal, tenant string, dated bool, params agentowl.AttentionListParams) ([]*AttentionView, error) {
	m, err := p.Tenant(tenant, agentowl.RoleMember)
	if err != nil {
		return nil, err
	}
	params.TenantID = m.TenantID
	var out []*AttentionView
	err = s.store.Read(ctx, func(tx agentowl.Tx) error {
		list := tx.AttentionListUndated
		if dated {
			list = tx.AttentionListDated
		}
		items, err := list(ctx, params)
		if err != nil {
			return err
		}
		out, err = s.views(ctx, tx, items)
		return err
	})
	return out, err
}
