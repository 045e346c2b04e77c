// Package store defines the persistence interfaces of AgentOwl. The sqlite
// and postgres packages implement them with the same behaviour, proven by the
// storetest conformance suite. Stores hold SQL and never business rules.
package store

import (
	"context"
	"errors"
	"time"

	"github.com/agentowl/agentowl"
)

// Sentinel errors. Stores interpret driver errors by type or code, never by
// message, and return these.
var (
	// ErrNotFound: no row matched.
	ErrNotFound = errors.New("store: not found")
	// ErrConflict: a uniqueness constraint rejected the write, or a guarded
	// update matched no row in the expected state.
	ErrConflict = errors.New("store: conflict")
)

// Store opens transactions. Write transactions are serializable with respect
// to each other for the rows they touch; Read transactions see a consistent
// snapshot and must not write.
type Store interface {
	// Read runs fn in a read-only transaction.
	Read(ctx context.Context, fn func(Tx) error) error
	// Write runs fn in a read-write transaction and commits if fn returns nil.
	// fn may be retried on a serialization failure, so it must not have side
	// effects outside tx.
	Write(ctx context.Context, fn func(Tx) error) error
	// Ping reports whether the database is reachable.
	Ping(ctx context.Context) error
	// Dialect names the backend: "sqlite" or "postgres".
	Dialect() string
	Close() error
}

// Tx is one transaction's view of every aggregate.
type Tx interface {
	TenantCreate(ctx context.Context, t *agentowl.Tenant) error // ErrConflict on a taken name
	TenantGetByName(ctx context.Context, name string) (*agentowl.Tenant, error)
	TenantGetByID(ctx context.Context, id string) (*agentowl.Tenant, error)
	TenantList(ctx context.Context) ([]*agentowl.Tenant, error)

	OperatorCreate(ctx context.Context, o *agentowl.Operator) error // ErrConflict on a taken name
	OperatorGetByName(ctx context.Context, name string) (*agentowl.Operator, error)
	OperatorGetByID(ctx context.Context, id string) (*agentowl.Operator, error)
	// MembershipUpsert sets the operator's role in a tenant.
	MembershipUpsert(ctx context.Context, m *agentowl.Membership) error
	MembershipsByOperator(ctx context.Context, operatorID string) ([]*agentowl.Membership, error)
	// OperatorListByTenant lists a tenant's operators with their role there.
	OperatorListByTenant(ctx context.Context, tenantID string) ([]*OperatorWithRole, error)

	TokenCreate(ctx context.Context, t *agentowl.Token) error
	// TokenGetByHash finds a token of any kind, active or not.
	TokenGetByHash(ctx context.Context, hash []byte) (*agentowl.Token, error)
	TokenGetByID(ctx context.Context, id string) (*agentowl.Token, error)
	TokenList(ctx context.Context, p TokenListParams) ([]*agentowl.Token, error)
	// TokenRevoke sets revoked_at if unset; ErrNotFound if no such token.
	TokenRevoke(ctx context.Context, id string, at time.Time) error
	// TokenRevokeByInstance revokes every credential of an instance.
	TokenRevokeByInstance(ctx context.Context, instanceID string, at time.Time) error

	InstanceCreate(ctx context.Context, in *agentowl.Instance) error
	// InstanceGet returns the instance, deleted or not.
	InstanceGet(ctx context.Context, id string) (*agentowl.Instance, error)
	// InstanceGetForUpdate is InstanceGet that also serializes the caller with
	// other writers of the instance (row lock on PostgreSQL).
	InstanceGetForUpdate(ctx context.Context, id string) (*agentowl.Instance, error)
	InstanceUpdate(ctx context.Context, in *agentowl.Instance) error
	InstanceList(ctx context.Context, tenantID string) ([]*agentowl.Instance, error)

	// IdempotencyGet returns the record for (scope, operation, key).
	IdempotencyGet(ctx context.Context, scope, operation, key string) (*Idempotency, error)
	// IdempotencyCreate inserts a record; ErrConflict if one exists.
	IdempotencyCreate(ctx context.Context, r *Idempotency) error

	// RequestCreate inserts a request; ErrConflict if the instance already
	// has a request with the same idempotency key.
	RequestCreate(ctx context.Context, r *agentowl.ApprovalRequest) error
	RequestGet(ctx context.Context, id string) (*agentowl.ApprovalRequest, error)
	RequestGetByKey(ctx context.Context, instanceID, key string) (*agentowl.ApprovalRequest, error)
	// RequestResolve records d on a request that is still pending; ErrConflict
	// if it is not pending any more. retainUntil is when it may be purged.
	RequestResolve(ctx context.Context, id string, d *agentowl.Decision, retainUntil time.Time) error
	RequestList(ctx context.Context, p RequestListParams) ([]*agentowl.ApprovalRequest, error)
	// RequestPendingIDs returns pending requests of an instance.
	RequestPendingIDs(ctx context.Context, instanceID string) ([]string, error)
	// RequestDueForExpiry returns IDs of pending requests whose deadline is at
	// or before now, oldest first.
	RequestDueForExpiry(ctx context.Context, now time.Time, limit int) ([]string, error)

	PolicyCreate(ctx context.Context, p *agentowl.Policy) error
	PolicyGet(ctx context.Context, id string) (*agentowl.Policy, error)
	PolicyDelete(ctx context.Context, id string) error
	// PolicyList returns the tenant's rules (instanceID "") or the tenant-wide
	// plus instance rules, in evaluation order.
	PolicyList(ctx context.Context, tenantID, instanceID string) ([]*agentowl.Policy, error)

	AuditAppend(ctx context.Context, e *agentowl.AuditEntry) error
	AuditList(ctx context.Context, p AuditListParams) ([]*agentowl.AuditEntry, error)

	// Purge deletes what retention no longer requires at now and reports how
	// many rows went.
	Purge(ctx context.Context, now time.Time) (int64, error)
}

// OperatorWithRole is an operator and their role in one tenant.
type OperatorWithRole struct {
	agentowl.Operator
	Role agentowl.Role
}

// TokenListParams filters TokenList.
type TokenListParams struct {
	TenantID   string
	Kind       agentowl.TokenKind
	OperatorID string // optional
	InstanceID string // optional
}

// RequestListParams filters RequestList; results are newest first.
type RequestListParams struct {
	TenantID   string
	InstanceID string                  // optional
	Status     agentowl.ApprovalStatus // optional
	Limit      int
}

// AuditListParams filters AuditList; results are newest first.
type AuditListParams struct {
	TenantID string
	Limit    int
}

// Idempotency is the remembered outcome of a keyed provider operation
// (instance creation and update). Request creation keys live on the request.
type Idempotency struct {
	Scope       string // who the key belongs to, e.g. the provisioner token ID
	Operation   string
	Key         string
	InputHash   []byte
	ResourceID  string
	Response    []byte // the original response; sealed when it holds a secret
	CreatedAt   time.Time
	RetainUntil time.Time
}
