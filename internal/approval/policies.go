package approval

import (
	"context"
	"errors"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/access"
)

// CreatePolicy validates and stores a rule for a tenant (or one of its
// instances); admins of the tenant named tenant only. A condition that
// does not compile is invalid_policy.
func (s *Service) CreatePolicy(ctx context.Context, p *access.Principal, tenant string, rule *agentowl.Policy) (*agentowl.Policy, error) {
	m, err := p.Tenant(tenant, agentowl.RoleAdmin)
	if err != nil {
		return nil, err
	}
	tenantID := m.TenantID
	if rule.Effect != agentowl.EffectApprove && rule.Effect != agentowl.EffectDeny {
		return nil, agentowl.FieldError(agentowl.ECodeInvalidPolicy, "effect", "The effect must be approve or deny.")
	}
	if rule.Tool == "" || len(rule.Tool) > 256 {
		return nil, agentowl.FieldError(agentowl.ECodeInvalidPolicy, "tool", "The tool must be a tool name or * (at most 256 bytes).")
	}
	if len(rule.Condition) > 4096 || len(rule.Note) > 4096 || len(rule.Name) > 256 {
		return nil, agentowl.FieldError(agentowl.ECodeInvalidPolicy, "condition", "Condition and note are limited to 4096 bytes, name to 256.")
	}
	if rule.Condition != "" {
		if _, err := s.policies.compile(rule.Condition); err != nil {
			return nil, err
		}
	}
	rule.ID, rule.TenantID, rule.CreatedAt = agentowl.NewID(""), tenantID, s.now()
	if rule.Name == "" {
		rule.Name = string(rule.Effect) + " " + rule.Tool
	}
	err = s.store.Write(ctx, func(tx agentowl.Tx) error {
		if rule.InstanceID != "" {
			inst, err := tx.InstanceGet(ctx, rule.InstanceID)
			if errors.Is(err, agentowl.ErrNotFound) || (err == nil && (inst.TenantID != tenantID || inst.DeletedAt != nil)) {
				return notFoundIn(m, "instance", rule.InstanceID)
			}
			if err != nil {
				return err
			}
		}
		if err := tx.PolicyCreate(ctx, rule); err != nil {
			return err
		}
		return access.Audit(ctx, tx, rule.CreatedAt, tenantID, p, "policy.create", "policy:"+rule.ID, map[string]any{
			"tool": rule.Tool, "condition": rule.Condition, "effect": string(rule.Effect), "instance_id": rule.InstanceID,
		})
	})
	if err != nil {
		return nil, err
	}
	return rule, nil
}

// ListPolicies returns the rules of the tenant named tenant in evaluation
// order, for its members.
func (s *Service) ListPolicies(ctx context.Context, p *access.Principal, tenant string) ([]*agentowl.Policy, error) {
	return access.ReadAs(ctx, s.store, p, tenant, agentowl.RoleMember, func(tx agentowl.Tx, m *agentowl.Membership) ([]*agentowl.Policy, error) {
		return tx.PolicyList(ctx, m.TenantID, "")
	})
}

// DeletePolicy removes a rule of the tenant named tenant; admins only.
func (s *Service) DeletePolicy(ctx context.Context, p *access.Principal, tenant, id string) error {
	m, err := p.Tenant(tenant, agentowl.RoleAdmin)
	if err != nil {
		return err
	}
	tenantID := m.TenantID
	return s.store.Write(ctx, func(tx agentowl.Tx) error {
		rule, err := tx.PolicyGet(ctx, id)
		if errors.Is(err, agentowl.ErrNotFound) || (err == nil && rule.TenantID != tenantID) {
			return notFoundIn(m, "policy", id)
		}
		if err != nil {
			return err
		}
		if err := tx.PolicyDelete(ctx, id); err != nil {
			return err
		}
		return access.Audit(ctx, tx, s.now(), tenantID, p, "policy.delete", "policy:"+id, nil)
	})
}
