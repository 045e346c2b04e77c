package agentowl

import "time"

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

// AAPAck is an operator's acknowledgement (assignment) of a pending AAP
// approval request in the Needs-attention inbox.
type AAPAck struct {
	RequestID string
	TenantID  string
	Assignee  string
	At        time.Time
}
