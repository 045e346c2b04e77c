package agentowl

import (
	"context"
	"time"
)

// Persistence of maintenance (docs/maintenance.md): the scheduler's leader
// lease, each job's last run, the facts the overdue scan reads, lapsed
// lease recovery and retention's bounded purges. The rules (which work is
// overdue, how long records are kept) live in internal/maintenance.

// OpenWork is one non-terminal work and the facts the overdue rules read.
type OpenWork struct {
	WorkID   string
	Status   WorkStatus
	Sequence int64
	// UpdatedAt is when the work last changed: its latest callback, or its
	// creation before any.
	UpdatedAt time.Time
	// Overdue is the work's endpoint's expectations.
	Overdue EndpointOverdue
	// HandoffDeliveredAt is when its handoff message was acknowledged (nil
	// while undelivered).
	HandoffDeliveredAt *time.Time
	// InputExpiredAt is the earliest expiry, at or before the scan's Now,
	// of a request item of the work that expired unanswered (nil if none).
	InputExpiredAt *time.Time
	// OverdueRule is the rule of the overdue incident the work already has
	// at its current sequence, if any. There is at most one: a sequence
	// has one status, and each status one rule.
	OverdueRule string
}

// OpenWorkScanParams pages through open work by ID.
type OpenWorkScanParams struct {
	AfterID string // "" for the first page
	Now     time.Time
	Limit   int
}

// PurgeClass names one kind of record that retention deletes.
type PurgeClass string

// Purge classes. PurgeBatch deletes records of the class whose retention
// ended at or before Before; it never deletes what is still open or what a
// kept record still refers to.
const (
	// PurgeDeliveries: ended outbox messages (and their attempts) whose
	// retain_until is at or before Before. Pending ones are never purged.
	PurgeDeliveries PurgeClass = "deliveries"
	// PurgeApprovalRequests: decided AAP requests whose retain_until is at
	// or before Before, once no outbox message about them is left.
	PurgeApprovalRequests PurgeClass = "approval_requests"
	// PurgeIdempotencyKeys: idempotency records retained until Before.
	PurgeIdempotencyKeys PurgeClass = "idempotency_keys"
	// PurgeRateCounters: rate-limit windows that started at or before Before.
	PurgeRateCounters PurgeClass = "rate_counters"
	// PurgeDeliverySlots: destination slots whose last lease ended at or
	// before Before (they are made again on next use).
	PurgeDeliverySlots PurgeClass = "delivery_slots"
	// PurgeInstances: instances deleted at or before Before with their
	// credentials revoked at or before Before and their rules, once no
	// request or credential refers to them.
	PurgeInstances PurgeClass = "instances"
	// PurgeCallbacks: runtime callbacks of work that ended at or before Before.
	PurgeCallbacks PurgeClass = "callbacks"
	// PurgeAttention: resolved attention items of ended work, resolved at
	// or before Before, with their decisions; never one whose decision
	// push is still pending.
	PurgeAttention PurgeClass = "attention"
	// PurgeWork: work that ended at or before Before once nothing refers to
	// it any more (callbacks, attention items, decisions, a replay) and no
	// delivery about it is pending.
	PurgeWork PurgeClass = "work"
	// PurgeEvents: inbound events received at or before Before that no
	// work refers to and no pending delivery carries.
	PurgeEvents PurgeClass = "events"
	// PurgeConversations: conversations whose last event was at or before
	// Before and that no event or work refers to.
	PurgeConversations PurgeClass = "conversations"
	// PurgeAudit: audit entries recorded at or before Before.
	PurgeAudit PurgeClass = "audit"
)

// PurgeParams is one bounded purge.
type PurgeParams struct {
	Class  PurgeClass
	Before time.Time
	Limit  int
	// After, for PurgeCallbacks, is PurgeResult.After of the run's previous
	// batch ("" for the first): the batch starts past the rows that one
	// deleted, so a long purge never walks their index entries again
	// (PostgreSQL keeps them until vacuum).
	After string
}

// PurgeResult is what one bounded purge did.
type PurgeResult struct {
	Deleted int64
	// After is where the batch ended, for the next one's PurgeParams.After
	// ("" for classes without a cursor).
	After string
}

// Maintenance is the persistence of the maintenance scheduler and its
// jobs, implemented by Tx. The caller is internal/maintenance.
type MaintenanceStore interface {
	// LeaseAcquire gives the lease name to owner until until if it is free,
	// lapsed at now, or already owner's (a renewal), and returns the lease
	// as it stands afterwards: owner's, or the other holder's.
	LeaseAcquire(ctx context.Context, name, owner string, now, until time.Time) (*Lease, error)
	// LeaseRelease ends owner's lease name at now; another owner's lease is
	// left alone.
	LeaseRelease(ctx context.Context, name, owner string, now time.Time) error
	// LeaseGet returns the lease name, lapsed or not; ErrNotFound if it was
	// never taken.
	LeaseGet(ctx context.Context, name string) (*Lease, error)

	// JobRecord records a job's run: it replaces the latest run and adds
	// to the totals (Runs and Failures of r are ignored).
	JobRecord(ctx context.Context, r *JobRun) error
	// JobList returns every job's record by name.
	JobList(ctx context.Context) ([]*JobRun, error)

	// OpenWorkScan returns up to Limit non-terminal work items with IDs
	// after AfterID, by ID, with the facts of the overdue rules.
	OpenWorkScan(ctx context.Context, p OpenWorkScanParams) ([]*OpenWork, error)
	// AttentionResolveOverdue resolves, with resolution, every unresolved
	// overdue incident of a work. It answers no count, so that the
	// PostgreSQL store can send it with the commit.
	AttentionResolveOverdue(ctx context.Context, workID, resolution string, now time.Time) error

	// MessageRecoverLapsed frees up to limit pending messages whose lease
	// lapsed at or before now (their worker died mid-attempt), making them
	// due at now; it returns how many.
	MessageRecoverLapsed(ctx context.Context, now time.Time, limit int) (int, error)
	// SlotRecoverLapsed frees up to limit destination slots whose lease
	// lapsed at or before now; it returns how many.
	SlotRecoverLapsed(ctx context.Context, now time.Time, limit int) (int, error)

	// PurgeBatch deletes up to Limit records of a class (see PurgeClass)
	// and reports how many rows went.
	PurgeBatch(ctx context.Context, p PurgeParams) (PurgeResult, error)
}
