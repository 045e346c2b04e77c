package access

import (
	"context"

	"github.com/agentowl/agentowl"
)

// SystemAdminTx checks, in the caller's transaction, that p is an admin of
// the system tenant, as server-wide objects (mail domains) need, and
// returns that tenant; forbidden otherwise.
func SystemAdminTx(ctx context.Context, tx agentowl.Tx, p *Principal) (*agentowl.Tenant, error) {
	deny := agentowl.Errorf(agentowl.ECodeForbidden, "This needs the admin role in the system tenant.")
	if p.Membership == nil || p.Membership.Role != agentowl.RoleAdmin {
		return nil, deny
	}
	home, err := tx.TenantGetByID(ctx, p.Membership.TenantID)
	if err != nil {
		return nil, err
	}
	if !home.System {
		return nil, deny
	}
	return home, nil
}
