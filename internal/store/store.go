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
	// ErrUnavailable: the database cannot answer now (SQLite busy or
	// locked past the busy timeout, a PostgreSQL connection lost, refused
	// or terminated, or contention that outlasted the retries). Nothing of
	// the failed transaction was committed, except that a lost connection
	// during COMMIT leaves the outcome unknown; callers answer
	// 503 unavailable and clients retry.
	ErrUnavailable = errors.New("store: database unavailable")
)

// Store opens transactions. Write transactions are serializable with respect
// to each other for the rows they touch. Reads must not write; each
// statement of a Read sees a consistent view of committed data, but on
// PostgreSQL two statements of one Read may see different commits (READ
// COMMITTED, without a transaction), so a Read must not rely on two of its
// statements agreeing.
type Store interface {
	// Read runs fn's read-only statements.
	Read(ctx context.Context, fn func(Tx) error) error
	// Write runs fn in a read-write transaction and commits if fn returns nil.
	// fn may be retried on a serialization failure, so it must not have side
	// effects outside tx. An insert's ErrConflict or an update's
	// ErrNotFound may come from Write rather than from the method that
	// wrote: the PostgreSQL store sends such writes with the transaction's
	// next statement or its COMMIT (sqlstore/pgx.go), and the transaction
	// then fails as a whole.
	Write(ctx context.Context, fn func(Tx) error) error
	// Ping reports whether the database can take a write now: it runs an
	// empty write transaction. Returns ErrUnavailable when it cannot.
	Ping(ctx context.Context) error
	// Dialect names the backend: "sqlite" or "postgres".
	Dialect() string
	Close() error
}

// CreateCheck is what RequestForCreate reads; nil (none) for what is not
// there.
type CreateCheck struct {
	Existing *agentowl.ApprovalRequest
	Instance *agentowl.Instance
	Policies []*agentowl.Policy
}

// Tx is one transaction's view of every aggregate.
type Tx interface {
	TenantCreate(ctx context.Context, t *agentowl.Tenant) error // ErrConflict on a taken name
	TenantGetByName(ctx context.Context, name string) (*agentowl.Tenant, error)
	TenantGetByID(ctx context.Context, id string) (*agentowl.Tenant, error)
	TenantList(ctx context.Context) ([]*agentowl.Tenant, error)

	// OperatorCreate adds an operator to its tenant; ErrConflict if the
	// tenant already has an operator of that name.
	OperatorCreate(ctx context.Context, o *agentowl.Operator) error
	// OperatorGetByName finds an operator of one tenant by name; operators
	// of other tenants are never found.
	OperatorGetByName(ctx context.Context, tenantID, name string) (*agentowl.Operator, error)
	OperatorGetByID(ctx context.Context, id string) (*agentowl.Operator, error)
	// OperatorSetRole changes an operator's role in its tenant.
	OperatorSetRole(ctx context.Context, id string, role agentowl.Role) error
	// OperatorScope returns the operator and the tenant scope it acts in, in
	// one statement (it runs on every operator request).
	OperatorScope(ctx context.Context, operatorID string) (*agentowl.Operator, *agentowl.TenantScope, error)
	// OperatorListByTenant lists a tenant's operators by name.
	OperatorListByTenant(ctx context.Context, tenantID string) ([]*agentowl.Operator, error)

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
	// InstanceGetShared is InstanceGet that also keeps the instance from
	// being updated or deleted until the transaction ends, without
	// serializing with other shared readers (a key-share row lock on
	// PostgreSQL): requests of one instance are created and decided
	// concurrently, never across a change of its delivery or its deletion.
	InstanceGetShared(ctx context.Context, id string) (*agentowl.Instance, error)
	InstanceUpdate(ctx context.Context, in *agentowl.Instance) error
	InstanceList(ctx context.Context, tenantID string) ([]*agentowl.Instance, error)

	// IdempotencyGet returns the record for (scope, operation, key).
	IdempotencyGet(ctx context.Context, scope, operation, key string) (*agentowl.Idempotency, error)
	// IdempotencyCreate inserts a record; ErrConflict if one exists.
	IdempotencyCreate(ctx context.Context, r *agentowl.Idempotency) error

	// RequestCreate inserts a request; ErrConflict if the instance already
	// has a request with the same idempotency key.
	RequestCreate(ctx context.Context, r *agentowl.ApprovalRequest) error
	RequestGet(ctx context.Context, id string) (*agentowl.ApprovalRequest, error)
	RequestGetByKey(ctx context.Context, instanceID, key string) (*agentowl.ApprovalRequest, error)
	// RequestForCreate reads what a new request of an instance is checked
	// against, in one round trip on PostgreSQL: the instance's request with
	// that idempotency key, the instance as InstanceGetShared reads it, and
	// its tenant's rules as PolicyList lists them for it (CreateCheck).
	RequestForCreate(ctx context.Context, instanceID, key string) (*CreateCheck, error)
	// RequestGetShared is RequestGet with the request's instance, read as
	// InstanceGetShared reads it, in one statement: a decision needs both,
	// and on PostgreSQL each statement is a round trip.
	RequestGetShared(ctx context.Context, id string) (*agentowl.ApprovalRequest, *agentowl.Instance, error)
	// RequestGetSharedRecord is RequestGetShared with the request's
	// idempotency record of operation and key (scope: the request's ID; nil
	// when there is none), in one round trip on PostgreSQL.
	RequestGetSharedRecord(ctx context.Context, id, operation, key string) (*agentowl.ApprovalRequest, *agentowl.Instance, *agentowl.Idempotency, error)
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

	Outbox
	Slots
	Engines
	AgentWork
	Attention
	Attachments
	EmailThreads
	Maintenance
	Operations
	Notifications
	ConsoleSessions
	Conversations

	// AAPAckSet records (or replaces) the acknowledgement of an AAP request.
	AAPAckSet(ctx context.Context, a *agentowl.AAPAck) error
	// AAPAckGet returns the acknowledgement of an AAP request; ErrNotFound if none.
	AAPAckGet(ctx context.Context, requestID string) (*agentowl.AAPAck, error)

	// KeyCheck records check as the check value of the key called name if
	// none is recorded yet, and returns ErrConflict if a different one is.
	KeyCheck(ctx context.Context, name string, check []byte, now time.Time) error

	// CounterAdd adds delta to the counter of key in the window starting at
	// windowStart and returns the new total.
	CounterAdd(ctx context.Context, key string, windowStart time.Time, delta int64) (int64, error)
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
	// Now makes the pending and expired filters follow effective status:
	// a pending request at or past its deadline counts as expired.
	Now   time.Time
	After *agentowl.Cursor // optional: the next page
	Limit int
}

// AuditListParams filters AuditList; results are newest first.
type AuditListParams struct {
	TenantID string
	Limit    int
}

// ClaimParams selects due messages and leases them to one worker.
type ClaimParams struct {
	Now        time.Time
	LeaseUntil time.Time
	Owner      string
	Limit      int
}

// FinishParams records the outcome of one attempt. It applies only if the
// message is still leased by Owner for attempt number Attempt.
type FinishParams struct {
	ID      string
	Owner   string
	Attempt agentowl.Attempt
	// State is the new state: pending (retry at NextAttempt) or terminal.
	State       agentowl.MessageState
	NextAttempt time.Time
	RetainUntil *time.Time // set when State is terminal
}

// MessageListParams filters MessageList; newest first.
type MessageListParams struct {
	TenantID string
	Subject  string // optional
	Prefix   string // optional destination, e.g. "instance:<id>"
	State    agentowl.MessageState
	Limit    int
}

// Outbox is implemented by Tx (see the methods named Message*).
type Outbox interface {
	MessageCreate(ctx context.Context, m *agentowl.OutboxMessage) error
	MessageGet(ctx context.Context, id string) (*agentowl.OutboxMessage, error)
	// MessageClaim leases up to Limit pending messages due at Now whose lease
	// is free or expired, oldest due first, incrementing their attempt count.
	MessageClaim(ctx context.Context, p ClaimParams) ([]*agentowl.OutboxMessage, error)
	// MessageFinish records an attempt and the message's next state;
	// ErrConflict if the lease was lost.
	MessageFinish(ctx context.Context, p FinishParams) error
	// MessageFinishAll is MessageFinish of several messages in two
	// statements; lost[i] reports that ps[i]'s lease was lost (nothing of it
	// is recorded).
	MessageFinishAll(ctx context.Context, ps []FinishParams) (lost []bool, err error)
	// MessageDefer releases a leased message without counting an attempt
	// (a destination limit delayed it) and schedules it at next;
	// ErrConflict if the lease was lost.
	MessageDefer(ctx context.Context, id, owner string, attempt int, next time.Time) error
	// MessageUndefer makes due at now up to limit deferred messages (put
	// back by MessageDefer to a time after now, not leased): those of ids,
	// or every deferred one when ids is nil. It returns how many.
	MessageUndefer(ctx context.Context, ids []string, now time.Time, limit int) (int, error)
	// MessageCancelDestination ends every pending message to destination,
	// returning their IDs. In-flight ones end when their lease would.
	MessageCancelDestination(ctx context.Context, destination string, now time.Time, grace time.Duration) ([]string, error)
	MessageList(ctx context.Context, p MessageListParams) ([]*agentowl.OutboxMessage, error)
	AttemptList(ctx context.Context, eventID string) ([]*agentowl.Attempt, error)
	// MessageStats returns the pending messages of each surface (the kind
	// of their destination: "instance", "endpoint", "decision"), with the
	// oldest one's creation and the longest wait since a message became due
	// (DueSince at or before now). Surfaces with none pending are left out.
	MessageStats(ctx context.Context, now time.Time) ([]*agentowl.QueueStats, error)
}

// Engines is implemented by Tx: the delivery engines' reports.
type Engines interface {
	// EngineReport records r, replacing its owner's last report, and
	// deletes reports not renewed since before forgetBefore.
	EngineReport(ctx context.Context, r *agentowl.EngineReport, forgetBefore time.Time) error
	// EngineGone deletes owner's report: it stopped cleanly.
	EngineGone(ctx context.Context, owner string) error
	// EngineList returns every report, by owner.
	EngineList(ctx context.Context) ([]*agentowl.EngineReport, error)
}

// Slots is implemented by Tx: leases on the in-flight slots of delivery
// destinations, shared by every process using the database.
type Slots interface {
	// SlotsMake makes key's slots numbered below limit, if missing.
	SlotsMake(ctx context.Context, key string, limit int) error
	// SlotLease leases to owner, until until, up to n of key's slots numbered
	// below limit that are free or whose lease has lapsed at now, and
	// returns their numbers.
	SlotLease(ctx context.Context, key, owner string, limit, n int, now, until time.Time) ([]int, error)
	// SlotRenew extends to until those of slots that are still leased to
	// owner as given (same Until, not lapsed at now), and returns them
	// renewed.
	SlotRenew(ctx context.Context, owner string, slots []agentowl.Slot, now, until time.Time) ([]agentowl.Slot, error)
	// SlotRelease frees those of slots that are still leased to owner as
	// given.
	SlotRelease(ctx context.Context, owner string, slots []agentowl.Slot) error
}
