package agentowl

import (
	"context"
	"time"
)

// Persistence of questions and approvals (docs/attention.md): attention
// items and the decisions made on them. The records are the domain's
// (attention.go at the module root).

// AttentionListParams filters AttentionList; results are newest first.
type AttentionListParams struct {
	TenantID string
	Status   AttentionStatus // optional; agentowl.AttentionUnresolved for open and acknowledged
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
	Push          *OutboxMessage
	// Revisions are the items of the item's request, every revision.
	Revisions []*AttentionItem
}

// Attention is the persistence of attention items and decisions.
type AttentionStore interface {
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
	MessagesFailedWithoutIncident(ctx context.Context, kinds []string, limit int) ([]*OutboxMessage, error)

	// WorkDecisionCreate inserts a decision; ErrConflict if the item already
	// has one or the work has the decision ID.
	WorkDecisionCreate(ctx context.Context, d *WorkDecision) error
	WorkDecisionGet(ctx context.Context, workID, id string) (*WorkDecision, error)
	WorkDecisionGetByAttention(ctx context.Context, attentionID string) (*WorkDecision, error)
	// WorkDecisionsByAttention returns the decisions of the attention
	// items named (those that have one), in one read: a listed page's.
	WorkDecisionsByAttention(ctx context.Context, attentionIDs []string) ([]*WorkDecision, error)
	// WorkDecisionList returns a work's decisions, oldest first.
	WorkDecisionList(ctx context.Context, workID string) ([]*WorkDecision, error)
	// DecisionSetReceipt sets the receipt if unset.
	DecisionSetReceipt(ctx context.Context, workID, id string, at time.Time, via string) error

	// AAPAckSet records (or replaces) the acknowledgement of an AAP request.
	AAPAckSet(ctx context.Context, a *AAPAck) error
	// AAPAckGet returns the acknowledgement of an AAP request; ErrNotFound if none.
	AAPAckGet(ctx context.Context, requestID string) (*AAPAck, error)
}
