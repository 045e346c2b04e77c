package access

import (
	"context"

	"github.com/agentowl/agentowl"
)

// AuditFilter narrows QueryAudit: Actor, Action and Target each match the
// entries whose field of that name contains them (empty: any); Before,
// when positive, pages to the entries older than that entry's ID.
type AuditFilter struct {
	Actor, Action, Target string
	Before                int64
	Limit                 int
}

// Bounds of an audit query.
const (
	maxAuditFilterBytes = 200
	maxAuditLimit       = 500
)

// QueryAudit lists the tenant's audit log newest first, filtered and in
// keyset pages: ListAudit with filters, for the console's audit view.
// Admin only, as ListAudit.
func (s *Service) QueryAudit(ctx context.Context, p *Principal, tenant string, f AuditFilter) ([]*agentowl.AuditEntry, error) {
	m, err := p.Tenant(tenant, agentowl.RoleAdmin)
	if err != nil {
		return nil, err
	}
	for name, v := range map[string]string{"actor": f.Actor, "action": f.Action, "object": f.Target} {
		if len(v) > maxAuditFilterBytes || !agentowl.IsText(v) {
			return nil, agentowl.FieldError(agentowl.ECodeInvalidField, name, "The %s filter is text of at most %d bytes.", name,
				maxAuditFilterBytes)
		}
	}
	if f.Before < 0 {
		return nil, agentowl.FieldError(agentowl.ECodeInvalidField, "before", "The page link is not valid.")
	}
	if f.Limit <= 0 || f.Limit > maxAuditLimit {
		f.Limit = 100
	}
	var out []*agentowl.AuditEntry
	err = s.store.Read(ctx, func(tx agentowl.Tx) (err error) {
		out, err = tx.AuditQuery(ctx, agentowl.AuditQueryParams{TenantID: m.TenantID, Actor: f.Actor, Action: f.Action,
			Target: f.Target, BeforeID: f.Before, Limit: f.Limit})
		return err
	})
	return out, err
}
