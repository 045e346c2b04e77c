package work

import (
	"context"
	"errors"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/access"
	"github.com/agentowl/agentowl/internal/attestation"
)

// DecisionAttestation returns the attestation of decision decisionID on
// work workID of the tenant named tenant (docs/attestations.md), for its
// members: not_found for another tenant's work, an unknown decision, or
// one made while attestations were off.
func (s *Service) DecisionAttestation(ctx context.Context, p *access.Principal, tenant, workID, decisionID string) (*agentowl.Attestation, error) {
	return access.ReadAs(ctx, s.store, p, tenant, agentowl.RoleMember, func(tx agentowl.Tx, m *agentowl.Membership) (*agentowl.Attestation, error) {
		if _, err := tenantWork(ctx, tx, m, workID); err != nil {
			return nil, err
		}
		a, err := tx.AttestationGet(ctx, agentowl.AttestationWorkDecision, attestation.WorkSubjectID(workID, decisionID))
		if errors.Is(err, agentowl.ErrNotFound) {
			return nil, agentowl.Errorf(agentowl.ECodeNotFound, "Decision %q on work %q has no attestation in tenant %q.", decisionID, workID, m.TenantName)
		}
		return a, err
	})
}
