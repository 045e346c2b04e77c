package agentowl

import (
	"context"
	"time"
)

// Identity is the persistence of the identity model (internal/access):
// tenants, their operators and every kind of token. Implemented by Tx.
type IdentityStore interface {
	TenantCreate(ctx context.Context, t *Tenant) error // ErrConflict on a taken name
	TenantGetByName(ctx context.Context, name string) (*Tenant, error)
	TenantGetByID(ctx context.Context, id string) (*Tenant, error)
	TenantList(ctx context.Context) ([]*Tenant, error)
	// OperatorCreate adds an operator to its tenant; ErrConflict if the
	// tenant already has an operator of that name.
	OperatorCreate(ctx context.Context, o *Operator) error
	// OperatorGetByName finds an operator of one tenant by name; operators
	// of other tenants are never found.
	OperatorGetByName(ctx context.Context, tenantID, name string) (*Operator, error)
	OperatorGetByID(ctx context.Context, id string) (*Operator, error)
	// OperatorSetRole changes an operator's role in its tenant.
	OperatorSetRole(ctx context.Context, id string, role Role) error
	// OperatorMembership returns the operator and the membership it acts in, in
	// one statement (it runs on every operator request).
	OperatorMembership(ctx context.Context, operatorID string) (*Operator, *Membership, error)
	// OperatorListByTenant lists a tenant's operators by name.
	OperatorListByTenant(ctx context.Context, tenantID string) ([]*Operator, error)
	TokenCreate(ctx context.Context, t *Token) error
	// TokenGetByHash finds a token of any kind, active or not.
	TokenGetByHash(ctx context.Context, hash []byte) (*Token, error)
	TokenGetByID(ctx context.Context, id string) (*Token, error)
	TokenList(ctx context.Context, p TokenListParams) ([]*Token, error)
	// TokenRevoke sets revoked_at if unset; ErrNotFound if no such token.
	TokenRevoke(ctx context.Context, id string, at time.Time) error
	// TokenRevokeByInstance revokes every credential of an instance.
	TokenRevokeByInstance(ctx context.Context, instanceID string, at time.Time) error
}

// TokenListParams filters TokenList.
type TokenListParams struct {
	TenantID   string
	Kind       TokenKind
	OperatorID string // optional
	InstanceID string // optional
}

// Audit is the append-only audit log of each tenant. Implemented by Tx.
type AuditStore interface {
	AuditAppend(ctx context.Context, e *AuditEntry) error
	AuditList(ctx context.Context, p AuditListParams) ([]*AuditEntry, error)
}

// AuditListParams filters AuditList; results are newest first.
type AuditListParams struct {
	TenantID string
	Limit    int
}
