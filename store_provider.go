package agentowl

import (
	"context"
	"time"
)

// Provider is the persistence of the AAP provider (internal/approval):
// instances, keyed operations, approval requests and policies. Implemented
// by Tx.
type ProviderStore interface {
	InstanceCreate(ctx context.Context, in *Instance) error
	// InstanceGet returns the instance, deleted or not.
	InstanceGet(ctx context.Context, id string) (*Instance, error)
	// InstanceGetForUpdate is InstanceGet that also serializes the caller with
	// other writers of the instance (row lock on PostgreSQL).
	InstanceGetForUpdate(ctx context.Context, id string) (*Instance, error)
	// InstanceGetShared is InstanceGet that also keeps the instance from
	// being updated or deleted until the transaction ends, without
	// serializing with other shared readers (a key-share row lock on
	// PostgreSQL): requests of one instance are created and decided
	// concurrently, never across a change of its delivery or its deletion.
	InstanceGetShared(ctx context.Context, id string) (*Instance, error)
	InstanceUpdate(ctx context.Context, in *Instance) error
	InstanceList(ctx context.Context, tenantID string) ([]*Instance, error)
	// IdempotencyGet returns the record for (owner, operation, key).
	IdempotencyGet(ctx context.Context, owner, operation, key string) (*Idempotency, error)
	// IdempotencyCreate inserts a record; ErrConflict if one exists.
	IdempotencyCreate(ctx context.Context, r *Idempotency) error
	// RequestCreate inserts a request; ErrConflict if the instance already
	// has a request with the same idempotency key.
	RequestCreate(ctx context.Context, r *ApprovalRequest) error
	RequestGet(ctx context.Context, id string) (*ApprovalRequest, error)
	RequestGetByKey(ctx context.Context, instanceID, key string) (*ApprovalRequest, error)
	// RequestForCreate reads what a new request of an instance is checked
	// against, in one round trip on PostgreSQL: the instance's request with
	// that idempotency key, the instance as InstanceGetShared reads it, and
	// its tenant's rules as PolicyList lists them for it (CreateCheck).
	RequestForCreate(ctx context.Context, instanceID, key string) (*CreateCheck, error)
	// RequestGetShared is RequestGet with the request's instance, read as
	// InstanceGetShared reads it, in one statement: a decision needs both,
	// and on PostgreSQL each statement is a round trip.
	RequestGetShared(ctx context.Context, id string) (*ApprovalRequest, *Instance, error)
	// RequestGetSharedRecord is RequestGetShared with the request's
	// idempotency record of operation and key (owner: the request's ID; nil
	// when there is none), in one round trip on PostgreSQL.
	RequestGetSharedRecord(ctx context.Context, id, operation, key string) (*ApprovalRequest, *Instance, *Idempotency, error)
	// RequestResolve records d on a request that is still pending; ErrConflict
	// if it is not pending any more. retainUntil is when it may be purged.
	RequestResolve(ctx context.Context, id string, d *Decision, retainUntil time.Time) error
	RequestList(ctx context.Context, p RequestListParams) ([]*ApprovalRequest, error)
	// RequestPendingIDs returns pending requests of an instance.
	RequestPendingIDs(ctx context.Context, instanceID string) ([]string, error)
	// RequestDueForExpiry returns IDs of pending requests whose deadline is at
	// or before now, oldest first.
	RequestDueForExpiry(ctx context.Context, now time.Time, limit int) ([]string, error)
	PolicyCreate(ctx context.Context, p *Policy) error
	PolicyGet(ctx context.Context, id string) (*Policy, error)
	PolicyDelete(ctx context.Context, id string) error
	// PolicyList returns the tenant's rules (instanceID "") or the tenant-wide
	// plus instance rules, in evaluation order.
	PolicyList(ctx context.Context, tenantID, instanceID string) ([]*Policy, error)
}

// CreateCheck is what RequestForCreate reads; nil (none) for what is not
// there.
type CreateCheck struct {
	Existing *ApprovalRequest
	Instance *Instance
	Policies []*Policy
}

// RequestListParams filters RequestList; results are newest first.
type RequestListParams struct {
	TenantID   string
	InstanceID string         // optional
	Status     ApprovalStatus // optional
	// Now makes the pending and expired filters follow effective status:
	// a pending request at or past its deadline counts as expired.
	Now   time.Time
	After *Cursor // optional: the next page
	Limit int
}
