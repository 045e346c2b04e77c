// Package access holds tenants, operators, bearer tokens and the audit log:
// who may call which surface, for which tenant.
package access

import (
	"context"
	"errors"
	"time"

	"github.com/agentowl/agentowl"
)

// Config bounds token lifetimes.
type Config struct {
	// MaxTokenDays caps --days for operator and provisioner tokens.
	// Defaults to 365.
	MaxTokenDays int
	// SessionIdle ends a console session after this long without a
	// request. Defaults to 30m.
	SessionIdle time.Duration
	// SessionMax ends a console session this long after sign-in, however
	// active. Defaults to 12h.
	SessionMax time.Duration
	// LoginLinkTTL is how long a one-time console login link may be used.
	// Defaults to 15m.
	LoginLinkTTL time.Duration
}

func (c Config) withDefaults() Config {
	if c.MaxTokenDays <= 0 {
		c.MaxTokenDays = 365
	}
	return c.sessionDefaults()
}

// Service implements the access use-cases.
type Service struct {
	store agentowl.Store
	clock agentowl.Clock
	cfg   Config
}

// New returns a Service.
func New(s agentowl.Store, clock agentowl.Clock, cfg Config) *Service {
	return &Service{store: s, clock: clock, cfg: cfg.withDefaults()}
}

// Principal is an authenticated caller.
type Principal struct {
	Token *agentowl.Token
	// Operator and Membership are set for operator tokens: the token's operator
	// and the one tenant it acts in, which is the tenant that issued the
	// token (the schema keeps an operator token in its operator's tenant).
	Operator   *agentowl.Operator
	Membership *agentowl.Membership
	// Secret is the presented bearer secret. Provisioning seals replayable
	// responses with it; it is never stored or logged.
	Secret string
}

// Actor names the principal in audit entries.
func (p *Principal) Actor() string {
	switch {
	case p == nil:
		return "system"
	case p.Operator != nil:
		return "operator:" + p.Operator.Name
	default:
		return string(p.Token.Kind) + ":" + p.Token.ID
	}
}

func unauthenticated() error {
	return agentowl.Errorf(agentowl.ECodeUnauthenticated, "The credential is missing, expired, revoked or otherwise invalid.")
}

// Authenticate resolves a bearer secret to a principal of the wanted kind.
// A token of another kind, or an expired or revoked one, is unauthenticated:
// kinds are never interchangeable.
func (s *Service) Authenticate(ctx context.Context, secret string, kind agentowl.TokenKind) (*Principal, error) {
	if secret == "" || len(secret) > 256 {
		return nil, unauthenticated()
	}
	if k, ok := agentowl.TokenKindOf(secret); !ok || k != kind {
		return nil, unauthenticated()
	}
	var p *Principal
	err := s.store.Read(ctx, func(tx agentowl.Tx) error {
		tok, err := tx.TokenGetByHash(ctx, agentowl.HashToken(secret))
		if err != nil {
			return err
		}
		if tok.Kind != kind || !agentowl.TokenMatches(secret, tok.Hash) || !tok.Active(s.clock.Now()) {
			return agentowl.ErrNotFound
		}
		p = &Principal{Token: tok, Secret: secret}
		if kind == agentowl.TokenOperator {
			if p.Operator, p.Membership, err = tx.OperatorMembership(ctx, tok.OperatorID); err == nil && p.Membership.TenantID != tok.TenantID {
				return agentowl.ErrNotFound // defence in depth: the schema already forbids it
			}
		}
		return err
	})
	if errors.Is(err, agentowl.ErrNotFound) {
		return nil, unauthenticated()
	}
	return p, err
}

// Tenant returns the principal's membership if it is the tenant named name
// and the operator has at least role there; otherwise not_found (so tenant
// names do not leak) or forbidden. An operator token never reaches beyond
// the one tenant that issued it.
func (p *Principal) Tenant(name string, role agentowl.Role) (*agentowl.Membership, error) {
	m := p.Membership
	if m == nil || m.TenantName != name {
		return nil, agentowl.Errorf(agentowl.ECodeNotFound, "No tenant %q is available to this credential.", name)
	}
	if role == agentowl.RoleAdmin && m.Role != agentowl.RoleAdmin {
		return nil, agentowl.Errorf(agentowl.ECodeForbidden, "This operation needs the admin role in tenant %q.", name)
	}
	return m, nil
}

// ReadAs reads for p in tenant, which p must see with at least role: the
// shape of every list and lookup a member or an admin may call. read gets
// the membership, so that it reads only that tenant's rows.
func ReadAs[T any](ctx context.Context, st agentowl.Store, p *Principal, tenant string, role agentowl.Role,
	read func(tx agentowl.Tx, m *agentowl.Membership) (T, error)) (T, error) {
	var out T
	m, err := p.Tenant(tenant, role)
	if err != nil {
		return out, err
	}
	err = st.Read(ctx, func(tx agentowl.Tx) (err error) {
		out, err = read(tx, m)
		return err
	})
	return out, err
}

// WriteAs is ReadAs for a change: it writes for p in tenant, which p must
// see with at least role, and write gets the membership, so that it changes
// only that tenant's rows.
func WriteAs(ctx context.Context, st agentowl.Store, p *Principal, tenant string, role agentowl.Role,
	write func(tx agentowl.Tx, m *agentowl.Membership) error) error {
	m, err := p.Tenant(tenant, role)
	if err != nil {
		return err
	}
	return st.Write(ctx, func(tx agentowl.Tx) error { return write(tx, m) })
}

// Audit appends an audit entry for a configuration change in tx.
func Audit(ctx context.Context, tx agentowl.Tx, at time.Time, tenantID string, p *Principal, action, target string, details map[string]any) error {
	return tx.AuditAppend(ctx, &agentowl.AuditEntry{
		TenantID: tenantID, At: at, Actor: p.Actor(), Action: action, Target: target,
		RequestID: agentowl.RequestIDFromContext(ctx), Details: details,
	})
}
