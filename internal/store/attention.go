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
	Status   AttentionStatus // optional
	WorkID   string          // optional
	Limit    int
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
	// AttentionLatestRequest returns the highest revision of a request.
	AttentionLatestRequest(ctx context.Context, workID, requestID string) (*AttentionItem, error)
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
