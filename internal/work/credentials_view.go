package work

import (
	"context"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/access"
)

// CredentialView is a runtime credential (never its secret) with its
// endpoint and when it last reported.
type CredentialView struct {
	Credential *agentowl.RuntimeCredential
	Endpoint   *agentowl.Endpoint
	// LastReport is when the newest callback it authenticated was
	// recorded; nil if it never reported. Its reads (decisions, files)
	// and receipts are not recorded.
	LastReport *time.Time
}

// TenantCredentials lists the runtime credentials of every live endpoint
// of the tenant, by endpoint (oldest first) and then oldest first, revoked
// and expired ones included: ListCredentials for the whole tenant, for the
// console's settings view. Admin only, as ListCredentials.
func (s *Service) TenantCredentials(ctx context.Context, p *access.Principal, tenant string) ([]*CredentialView, error) {
	return access.ReadAs(ctx, s.store, p, tenant, agentowl.RoleAdmin, func(tx agentowl.Tx, m *agentowl.Membership) ([]*CredentialView, error) {
		eps, err := tx.EndpointList(ctx, m.TenantID)
		if err != nil {
			return nil, err
		}
		last, err := tx.RuntimeCredentialLastReports(ctx, m.TenantID)
		if err != nil {
			return nil, err
		}
		var out []*CredentialView
		for _, ep := range eps {
			cs, err := tx.RuntimeCredentialList(ctx, ep.ID)
			if err != nil {
				return nil, err
			}
			for _, c := range cs {
				v := &CredentialView{Credential: c, Endpoint: ep}
				if at, ok := last[c.ID]; ok {
					v.LastReport = &at
				}
				out = append(out, v)
			}
		}
		return out, nil
	})
}
