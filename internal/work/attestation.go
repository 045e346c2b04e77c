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
	m, err := p.Tenant(tenant, agentowl.RoleMember)
	if err != nil {
		return nil, err
	}
	var a *agentowl.Attestation
	err = s.store.Read(ctx, func(tx agentowl.Tx) error {
		w, err := tx.WorkGet(ctx, workID)
		if errors.Is(err, agentowl.ErrNotFound) || (err == nil && w.TenantID != m.TenantID) {
			return notFound(m, "work", workID)
		}
		if err != nil {
			return err
		}
		a, err = tx.AttestationGet(ctx, agentowl.AttestationWorkDecision, attestation.WorkSubjectID(workID, decisionID))
		if errors.Is(err, agentowl.ErrNotFound) {
			return agentowl.Errorf(agentowl.ECodeNotFound, "Decision %q on work %q has no attestation in tenant %q.", decisionID, workID, m.TenantName)
		}
		return err
	})
	return a, err
}
