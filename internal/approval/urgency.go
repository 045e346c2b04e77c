package approval

import (
	"context"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/access"
)

// Pending requests by urgency, for Needs attention (docs/console.md).

// PendingByDeadline lists the tenant's pending requests whose deadline has
// not passed, soonest deadline first; after is the last one of the
// previous page (its deadline and ID). Members may.
func (s *Service) PendingByDeadline(ctx context.Context, p *access.Principal, tenant string, after *agentowl.Cursor, limit int) ([]*agentowl.ApprovalRequest, error) {
	m, err := p.Tenant(tenant, agentowl.RoleMember)
	if err != nil {
		return nil, err
	}
	now := s.clock.Now()
	var out []*agentowl.ApprovalRequest
	err = s.store.Read(ctx, func(tx agentowl.Tx) (err error) {
		out, err = tx.RequestListPendingByDeadline(ctx, m.TenantID, now, after, limit)
		return err
	})
	return out, err
}

// CountPending counts the tenant's pending requests whose deadline has not
// passed: all, acknowledged, and due at or before soon. Members may.
func (s *Service) CountPending(ctx context.Context, p *access.Principal, tenant string, soon time.Time) (agentowl.RequestCounts, error) {
	m, err := p.Tenant(tenant, agentowl.RoleMember)
	if err != nil {
		return agentowl.RequestCounts{}, err
	}
	var out agentowl.RequestCounts
	err = s.store.Read(ctx, func(tx agentowl.Tx) (err error) {
		out, err = tx.RequestCountPending(ctx, m.TenantID, s.clock.Now(), soon)
		return err
	})
	return out, err
}
