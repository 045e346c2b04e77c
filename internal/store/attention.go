package store

import (
	"context"
	"time"
)

// Records of questions and approvals (docs/attention.md): attention items
// (one per revision of a runtime request, and incidents) and the decisions
// made on them. The rules live in internal/work.

// AttentionStatus is where an item is in the operator's inbox.
type AttentionStatus string

// Attention statuses.
const (
	AttentionOpen         AttentionStatus = "open"
	AttentionAcknowledged AttentionStatus = "acknowledged"
	AttentionResolved     AttentionStatus = "resolved"
	// AttentionUnresolved is a list filter, never an item's status: open
	// and acknowledged items.
	AttentionUnresolved AttentionStatus = "unresolved"
)

// AttentionItem is one thing a person needs to look at: a request (a
// question or an approval, one item per revision) or an incident.
type AttentionItem struct {
	ID       string // att_…
	TenantID string
	Kind     string // question, approval or incident
	Status   AttentionStatus
	// Resolution says why a resolved item was resolved: receipt, outcome,
	// superseded, expired, work_ended, reviewed or redriven.
	Resolution string
	WorkID     string
	EndpointID string
	// Request fields (empty for incidents).
	RequestID         string
	Revision          int64
	Prompt            string
	AllowedDecisions  []string
	ActionDescription string
	ActionDigest      string
	ExpiresAt         *time.Time
	ContentHash       []byte
	Request           []byte // the request object in canonical JSON
	// Summary describes an incident.
	Summary string
	// MessageID is the outbox message a delivery incident reports (at most
	// one incident per message).
	MessageID      string
	Assignee       string
	AcknowledgedAt *time.Time
	ResolvedAt     *time.Time
	CreatedAt      time.Time
	UpdatedAt      time.Time

	// OverdueRule and OverdueSequence name the rule an overdue incident
	// reports and the work's sequence when it was broken (at most one
	// incident per work, rule and sequence).
	OverdueRule     string
	OverdueSequence int64
}

// WorkDecision is the winning human decision on a runtime request item of
// agent work: the record behind the pushed agent-work decision document (an
// AAP request's decision is agentowl.Decision).
type WorkDecision struct {
	WorkID               string
	ID                   string // the operator's stable decision_id
	TenantID             string
	AttentionID          string
	RequestID            string
	Revision             int64
	Decision             string
	Answer               string
	ExpectedActionDigest string
	ContentHash          []byte
	// Body is the pushed decision document (docs/attention.md).
	Body      []byte
	DecidedBy string
	DecidedAt time.Time
	// MessageID is the outbox message of the push, if any.
	MessageID  string
	ReceiptAt  *time.Time
	ReceiptVia string // push or recovery
}

// AttentionListParams filters AttentionList; results are newest first.
type AttentionListParams struct {
	TenantID string
	Status   AttentionStatus // optional; AttentionUnresolved for open and acknowledged
	WorkID   string          // optional
	After    *Cursor         // optional: the next page
	Limit    int
}

// DecisionCheck is what AttentionForDecision reads. Item is nil when there
// is no such item; everything else is nil when the item is not the
// tenant's, or is not there.
type DecisionCheck struct {
	Item     *AttentionItem
	Work     *Work
	Endpoint *Endpoint
	// ByID is the work's decision with the new decision's ID; Decided the
	// item's own decision and Push that decision's push message.
	ByID, Decided *WorkDecision
	Push          *Message
	// Revisions are the items of the item's request, every revision.
	Revisions []*AttentionItem
}

// Attention is the persistence of attention items and decisions.
type Attention interface {
	// AttentionCreate inserts an item; ErrConflict if the work already has
	// that request revision.
	AttentionCreate(ctx context.Context, a *AttentionItem) error
	AttentionGet(ctx context.Context, id string) (*AttentionItem, error)
	// AttentionUpdate writes status, resolution, assignee and times.
	AttentionUpdate(ctx context.Context, a *AttentionItem) error
	AttentionList(ctx context.Context, p AttentionListParams) ([]*AttentionItem, error)
	// AttentionForDecision reads what an operator's decision decisionID on
	// item attentionID is checked against, in one round trip on
	// PostgreSQL (DecisionCheck). With forUpdate the item's work is read
	// first, as WorkGetForUpdate, and the item and the rest once the work
	// is locked.
	// Rows of another tenant's item are never read beyond the item.
	AttentionForDecision(ctx context.Context, tenantID, attentionID, decisionID string, forUpdate bool) (*DecisionCheck, error)
	// DecisionForReceipt reads what a runtime's receipt of decision
	// decisionID of work workID is checked against, in one round trip on
	// PostgreSQL: the work, as WorkGetForUpdate (ErrNotFound when it is not
	// there), then, once it is locked, the decision and its item (nil when
	// there is no such decision).
	DecisionForReceipt(ctx context.Context, workID, decisionID string) (*Work, *WorkDecision, *AttentionItem, error)
	// AttentionExpire resolves unresolved request items whose expiry is at
	// or before now as expired; it returns how many.
	AttentionExpire(ctx context.Context, now time.Time) (int, error)
	// MessagesFailedWithoutIncident returns up to limit failed outbox
	// messages of the given kinds that no attention item reports yet,
	// oldest ended first.
	MessagesFailedWithoutIncident(ctx context.Context, kinds []string, limit int) ([]*Message, error)

	// WorkDecisionCreate inserts a decision; ErrConflict if the item already
	// has one or the work has the decision ID.
	WorkDecisionCreate(ctx context.Context, d *WorkDecision) error
	WorkDecisionGet(ctx context.Context, workID, id string) (*WorkDecision, error)
	WorkDecisionGetByAttention(ctx context.Context, attentionID string) (*WorkDecision, error)
	// WorkDecisionList returns a work's decisions, oldest first.
	WorkDecisionList(ctx context.Context, workID string) ([]*WorkDecision, error)
	// DecisionSetReceipt sets the receipt if unset.
	DecisionSetReceipt(ctx context.Context, workID, id string, at time.Time, via string) error
}
