package access

import (
	"context"
	"errors"
	"time"

	"github.com/agentowl/agentowl"
)

// BootstrapResult is a tenant and a fresh admin operator token.
type BootstrapResult struct {
	Tenant   *agentowl.Tenant
	Operator *agentowl.Operator
	Token    string
}

// Bootstrap creates tenant name if missing, an "admin" operator with the
// admin role in it if missing (or gives the existing one the admin role back),
// and a new operator token for that operator. The first tenant of an empty
// database becomes the system tenant, whose admins may create tenants.
// Running it again for an existing tenant adds another token. It is for the
// offline `admin bootstrap` command (whoever runs it holds the database
// already) and the first start of `serve`; no API call reaches it.
func (s *Service) Bootstrap(ctx context.Context, tenantName string) (*BootstrapResult, error) {
	if !agentowl.ValidSlug(tenantName) {
		return nil, agentowl.FieldError(agentowl.ECodeInvalidField, "tenant", "A tenant name is 1-63 lowercase letters, digits and hyphens.")
	}
	var res BootstrapResult
	err := s.store.Write(ctx, func(tx agentowl.Tx) error {
		now := s.clock.Now()
		t, err := tx.TenantGetByName(ctx, tenantName)
		if errors.Is(err, agentowl.ErrNotFound) {
			var existing []*agentowl.Tenant
			if existing, err = tx.TenantList(ctx); err != nil {
				return err
			}
			t = &agentowl.Tenant{ID: agentowl.NewID(""), Name: tenantName, System: len(existing) == 0, CreatedAt: now}
			err = tx.TenantCreate(ctx, t)
		}
		if err != nil {
			return err
		}
		op, err := s.ensureAdmin(ctx, tx, t.ID, "admin", now)
		if err != nil {
			return err
		}
		secret, tok := s.newToken(agentowl.TokenOperator, t.ID, "bootstrap", nil)
		tok.OperatorID = op.ID
		if err := tx.TokenCreate(ctx, tok); err != nil {
			return err
		}
		res = BootstrapResult{Tenant: t, Operator: op, Token: secret}
		return Audit(ctx, tx, now, t.ID, nil, "admin.bootstrap", "operator-token:"+tok.ID, map[string]any{"operator": op.Name})
	})
	return &res, err
}

// ensureAdmin returns the tenant's operator named name with the admin role,
// creating it or raising its role as needed.
func (s *Service) ensureAdmin(ctx context.Context, tx agentowl.Tx, tenantID, name string, now time.Time) (*agentowl.Operator, error) {
	op, err := tx.OperatorGetByName(ctx, tenantID, name)
	switch {
	case errors.Is(err, agentowl.ErrNotFound):
		op = &agentowl.Operator{ID: agentowl.NewID(""), TenantID: tenantID, Name: name, Role: agentowl.RoleAdmin, CreatedAt: now}
		return op, tx.OperatorCreate(ctx, op)
	case err != nil:
		return nil, err
	case op.Role != agentowl.RoleAdmin:
		op.Role = agentowl.RoleAdmin
		return op, tx.OperatorSetRole(ctx, op.ID, op.Role)
	}
	return op, nil
}

// NeedsBootstrap reports whether the database has no tenant yet.
func (s *Service) NeedsBootstrap(ctx context.Context) (bool, error) {
	var empty bool
	err := s.store.Read(ctx, func(tx agentowl.Tx) error {
		ts, err := tx.TenantList(ctx)
		empty = len(ts) == 0
		return err
	})
	return empty, err
}

func (s *Service) newToken(kind agentowl.TokenKind, tenantID, label string, expires *time.Time) (string, *agentowl.Token) {
	secret := agentowl.NewTokenSecret(kind)
	return secret, &agentowl.Token{
		ID: agentowl.NewID(""), Kind: kind, Hash: agentowl.HashToken(secret), TenantID: tenantID,
		Label: label, CreatedAt: s.clock.Now(), ExpiresAt: expires,
	}
}

// NewInstanceCredential returns a fresh instance credential for the approval
// use-cases to store in their own transaction.
func (s *Service) NewInstanceCredential(tenantID, instanceID string, expires *time.Time) (string, *agentowl.Token) {
	secret, tok := s.newToken(agentowl.TokenInstance, tenantID, "instance", expires)
	tok.InstanceID = instanceID
	return secret, tok
}

// ListTenants returns the tenant the operator token acts in: one, always.
func (s *Service) ListTenants(p *Principal) []*agentowl.Membership {
	return []*agentowl.Membership{p.Membership}
}

// NewTenant is a tenant created through the API and the first admin token of
// its first operator, shown once.
type NewTenant struct {
	Tenant *agentowl.Tenant
	Admin  *IssuedToken
}

// CreateTenant creates a tenant with one operator, admin, named adminName
// (default: the caller's name), and issues that operator a token valid for
// days (0: no expiry). Only admins of the system tenant may: the caller gets
// no role in the new tenant; the token is how they hand it over. The new
// tenant's own audit log and the caller's both record it.
func (s *Service) CreateTenant(ctx context.Context, p *Principal, name, adminName string, days int) (*NewTenant, error) {
	if p.Membership == nil || p.Membership.Role != agentowl.RoleAdmin {
		return nil, errCreateTenant()
	}
	if !agentowl.ValidSlug(name) {
		return nil, agentowl.FieldError(agentowl.ECodeInvalidField, "name", "A tenant name is 1-63 lowercase letters, digits and hyphens.")
	}
	if adminName == "" {
		adminName = p.Operator.Name
	}
	if !agentowl.ValidSlug(adminName) {
		return nil, agentowl.FieldError(agentowl.ECodeInvalidField, "admin", "An operator name is 1-63 lowercase letters, digits and hyphens.")
	}
	exp, err := s.expiry(days)
	if err != nil {
		return nil, err
	}
	now := s.clock.Now()
	t := &agentowl.Tenant{ID: agentowl.NewID(""), Name: name, CreatedAt: now}
	var out NewTenant
	err = s.store.Write(ctx, func(tx agentowl.Tx) error {
		home, err := tx.TenantGetByID(ctx, p.Membership.TenantID)
		if err != nil {
			return err
		}
		if !home.System {
			return errCreateTenant()
		}
		if err := tx.TenantCreate(ctx, t); err != nil {
			if errors.Is(err, agentowl.ErrConflict) {
				return agentowl.Errorf(agentowl.ECodeAlreadyExists, "A tenant named %q already exists.", name)
			}
			return err
		}
		op := &agentowl.Operator{ID: agentowl.NewID(""), TenantID: t.ID, Name: adminName, Role: agentowl.RoleAdmin, CreatedAt: now}
		if err := tx.OperatorCreate(ctx, op); err != nil {
			return err
		}
		secret, tok := s.newToken(agentowl.TokenOperator, t.ID, "tenant-create", exp)
		tok.OperatorID = op.ID
		if err := tx.TokenCreate(ctx, tok); err != nil {
			return err
		}
		out = NewTenant{Tenant: t, Admin: &IssuedToken{Token: tok, Secret: secret, OperatorName: op.Name}}
		details := map[string]any{"admin": op.Name, "operator_token": tok.ID}
		if err := Audit(ctx, tx, now, home.ID, p, "tenant.create", "tenant:"+t.Name, details); err != nil {
			return err
		}
		return Audit(ctx, tx, now, t.ID, p, "tenant.create", "tenant:"+t.Name, details)
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

func errCreateTenant() error {
	return agentowl.Errorf(agentowl.ECodeForbidden, "Creating a tenant needs the admin role in the system tenant.")
}

// CreateOperator adds an operator named name to the tenant with role, or
// changes the role of the tenant's operator of that name. Operators of other
// tenants are never found or touched: a name means one operator per tenant.
// Admin only.
func (s *Service) CreateOperator(ctx context.Context, p *Principal, tenant, name string, role agentowl.Role) (*agentowl.Operator, error) {
	m, err := p.Tenant(tenant, agentowl.RoleAdmin)
	if err != nil {
		return nil, err
	}
	if !agentowl.ValidSlug(name) {
		return nil, agentowl.FieldError(agentowl.ECodeInvalidField, "name", "An operator name is 1-63 lowercase letters, digits and hyphens.")
	}
	if role != agentowl.RoleAdmin && role != agentowl.RoleMember {
		return nil, agentowl.FieldError(agentowl.ECodeInvalidField, "role", "The role must be admin or member.")
	}
	var out *agentowl.Operator
	write := func(tx agentowl.Tx) error {
		now := s.clock.Now()
		op, err := tx.OperatorGetByName(ctx, m.TenantID, name)
		switch {
		case errors.Is(err, agentowl.ErrNotFound):
			op = &agentowl.Operator{ID: agentowl.NewID(""), TenantID: m.TenantID, Name: name, Role: role, CreatedAt: now}
			err = tx.OperatorCreate(ctx, op)
		case err == nil && op.Role != role:
			op.Role = role
			err = tx.OperatorSetRole(ctx, op.ID, role)
		}
		if err != nil {
			return err
		}
		out = op
		return Audit(ctx, tx, now, m.TenantID, p, "operator.create", "operator:"+name, map[string]any{"role": string(role)})
	}
	// Two admins adding the same name at once: the one that lost the insert
	// finds the operator on its second try and sets the role.
	if err = s.store.Write(ctx, write); errors.Is(err, agentowl.ErrConflict) {
		err = s.store.Write(ctx, write)
	}
	return out, err
}

// ListOperators lists a tenant's operators. Members may.
func (s *Service) ListOperators(ctx context.Context, p *Principal, tenant string) ([]*agentowl.Operator, error) {
	return ReadAs(ctx, s.store, p, tenant, agentowl.RoleMember, func(tx agentowl.Tx, m *agentowl.Membership) ([]*agentowl.Operator, error) {
		return tx.OperatorListByTenant(ctx, m.TenantID)
	})
}

// IssuedToken is a token record and its secret, shown once.
type IssuedToken struct {
	Token  *agentowl.Token
	Secret string
	// OperatorName is set for operator tokens.
	OperatorName string
}

func (s *Service) expiry(days int) (*time.Time, error) {
	if days < 0 || days > s.cfg.MaxTokenDays {
		return nil, agentowl.FieldError(agentowl.ECodeInvalidField, "days", "days must be between 1 and %d (0 for no expiry).", s.cfg.MaxTokenDays)
	}
	if days == 0 {
		return nil, nil
	}
	t := s.clock.Now().Add(time.Duration(days) * 24 * time.Hour)
	return &t, nil
}

// CreateOperatorToken issues a token for operator (default: the caller).
// Tokens for someone else need the admin role.
func (s *Service) CreateOperatorToken(ctx context.Context, p *Principal, tenant, operator, label string, days int) (*IssuedToken, error) {
	m, err := p.forOperator(tenant, operator)
	if err != nil {
		return nil, err
	}
	return s.issueToken(ctx, p, m, agentowl.TokenOperator, label, days, func(tx agentowl.Tx, out *IssuedToken) (map[string]any, error) {
		op, err := namedOrCaller(ctx, tx, p, m, operator)
		if err != nil {
			return nil, err
		}
		out.Token.OperatorID, out.OperatorName = op.ID, op.Name
		return map[string]any{"operator": op.Name}, nil
	})
}

// CreateProvisionerToken issues a provisioner token for the tenant. Admin only.
func (s *Service) CreateProvisionerToken(ctx context.Context, p *Principal, tenant, label string, days int) (*IssuedToken, error) {
	m, err := p.Tenant(tenant, agentowl.RoleAdmin)
	if err != nil {
		return nil, err
	}
	return s.issueToken(ctx, p, m, agentowl.TokenProvisioner, label, days, nil)
}

// issueToken creates and audits a token of kind in m's tenant, expiring
// after days (0: never). fill, if set, completes the token in the same
// transaction and returns the audit entry's details.
func (s *Service) issueToken(ctx context.Context, p *Principal, m *agentowl.Membership, kind agentowl.TokenKind, label string, days int,
	fill func(tx agentowl.Tx, out *IssuedToken) (map[string]any, error)) (*IssuedToken, error) {
	exp, err := s.expiry(days)
	if err != nil {
		return nil, err
	}
	var out IssuedToken
	err = s.store.Write(ctx, func(tx agentowl.Tx) error {
		secret, tok := s.newToken(kind, m.TenantID, label, exp)
		out = IssuedToken{Token: tok, Secret: secret}
		var details map[string]any
		if fill != nil {
			var err error
			if details, err = fill(tx, &out); err != nil {
				return err
			}
		}
		if err := tx.TokenCreate(ctx, tok); err != nil {
			return err
		}
		// operator_token.create on operator-token:<id>, and so on.
		return Audit(ctx, tx, tok.CreatedAt, m.TenantID, p, string(kind)+"_token.create", string(kind)+"-token:"+tok.ID, details)
	})
	return &out, err
}

// ListTokens lists a tenant's tokens of kind (never their secrets). Operator
// tokens of other operators need the admin role.
func (s *Service) ListTokens(ctx context.Context, p *Principal, tenant string, kind agentowl.TokenKind) ([]*agentowl.Token, error) {
	role := agentowl.RoleAdmin
	if kind == agentowl.TokenOperator {
		role = agentowl.RoleMember
	}
	m, err := p.Tenant(tenant, role)
	if err != nil {
		return nil, err
	}
	params := agentowl.TokenListParams{TenantID: m.TenantID, Kind: kind}
	if kind == agentowl.TokenOperator && m.Role != agentowl.RoleAdmin {
		params.OperatorID = p.Operator.ID
	}
	var out []*agentowl.Token
	err = s.store.Read(ctx, func(tx agentowl.Tx) (err error) {
		out, err = tx.TokenList(ctx, params)
		return err
	})
	return out, err
}

// RevokeToken revokes a tenant's operator or provisioner token by ID.
// Revocation is immediate and idempotent. Operators may revoke their own
// tokens; anything else needs the admin role.
func (s *Service) RevokeToken(ctx context.Context, p *Principal, tenant string, kind agentowl.TokenKind, id string) (*agentowl.Token, error) {
	m, err := p.Tenant(tenant, agentowl.RoleMember)
	if err != nil {
		return nil, err
	}
	var out *agentowl.Token
	err = s.store.Write(ctx, func(tx agentowl.Tx) error {
		tok, err := tx.TokenGetByID(ctx, id)
		if errors.Is(err, agentowl.ErrNotFound) || (err == nil && (tok.TenantID != m.TenantID || tok.Kind != kind)) {
			return agentowl.Errorf(agentowl.ECodeNotFound, "No %s token %q in tenant %q.", kind, id, m.TenantName)
		}
		if err != nil {
			return err
		}
		if m.Role != agentowl.RoleAdmin && tok.OperatorID != p.Operator.ID {
			return agentowl.Errorf(agentowl.ECodeForbidden, "Revoking another operator's token needs the admin role.")
		}
		now := s.clock.Now()
		if err := tx.TokenRevoke(ctx, id, now); err != nil {
			return err
		}
		if out, err = tx.TokenGetByID(ctx, id); err != nil {
			return err
		}
		return Audit(ctx, tx, now, m.TenantID, p, string(kind)+"_token.revoke", string(kind)+"-token:"+id, nil)
	})
	return out, err
}

// ListAudit returns a tenant's audit log, newest first. Admin only.
func (s *Service) ListAudit(ctx context.Context, p *Principal, tenant string, limit int) ([]*agentowl.AuditEntry, error) {
	return ReadAs(ctx, s.store, p, tenant, agentowl.RoleAdmin, func(tx agentowl.Tx, m *agentowl.Membership) ([]*agentowl.AuditEntry, error) {
		return tx.AuditList(ctx, agentowl.AuditListParams{TenantID: m.TenantID, Limit: limit})
	})
}

// SystemAdmin checks that p is an admin of the system tenant, as the
// server-wide operations need (the maintenance scheduler's status): forbidden
// otherwise.
func (s *Service) SystemAdmin(ctx context.Context, p *Principal) error {
	deny := agentowl.Errorf(agentowl.ECodeForbidden, "This needs the admin role in the system tenant.")
	if p.Membership == nil || p.Membership.Role != agentowl.RoleAdmin {
		return deny
	}
	return s.store.Read(ctx, func(tx agentowl.Tx) error {
		home, err := tx.TenantGetByID(ctx, p.Membership.TenantID)
		if err != nil {
			return err
		}
		if !home.System {
			return deny
		}
		return nil
	})
}

// namedOrCaller returns the operator of membership m named name, or the
// caller's own when name is "" or theirs; not_found when the tenant has no
// such operator.
func namedOrCaller(ctx context.Context, tx agentowl.Tx, p *Principal, m *agentowl.Membership, name string) (*agentowl.Operator, error) {
	if name == "" || name == p.Operator.Name {
		return p.Operator, nil
	}
	op, err := tx.OperatorGetByName(ctx, m.TenantID, name)
	if errors.Is(err, agentowl.ErrNotFound) {
		return nil, agentowl.Errorf(agentowl.ECodeNotFound, "No operator %q in tenant %q.", name, m.TenantName)
	}
	return op, err
}

// forOperator is p's scope in tenant for acting on operator's behalf (""
// or their own name: themself): themself needs a member, anyone else the
// admin role.
func (p *Principal) forOperator(tenant, operator string) (*agentowl.Membership, error) {
	if operator != "" && operator != p.Operator.Name {
		return p.Tenant(tenant, agentowl.RoleAdmin)
	}
	return p.Tenant(tenant, agentowl.RoleMember)
}
