package agentowl

import "time"

// AttentionStatus is where an item is in the operator's inbox.
//
// Items are created open, by internal/work (a needs_input callback's
// requests, one item per request revision; a failed callback's incident;
// a failed handoff or decision push's incident, RecordDeliveryIncidents)
// and internal/maintenance (an overdue incident). CanBecome is the rule
// for what follows.
type AttentionStatus string

// Attention statuses.
const (
	// AttentionOpen: set at creation only; left by an acknowledgement or
	// a resolution. Nothing moves an item back to it.
	AttentionOpen AttentionStatus = "open"
	// AttentionAcknowledged: set by an operator's acknowledgement
	// (internal/work.AckAttention), which assigns the item and never
	// decides it; acknowledging again reassigns and keeps it acknowledged.
	// Left by a resolution.
	AttentionAcknowledged AttentionStatus = "acknowledged"
	// AttentionResolved: final, with the Resolution that says why. A
	// request item resolves through the runtime's receipt of its decision
	// (receipt), a later applied callback after its decision (outcome), a
	// higher revision of its request (superseded), its expiry (expired,
	// the maintenance sweep), or its work ending undecided (work_ended),
	// never by hand. An incident resolves by an operator's review
	// (reviewed), the redrive of the delivery it reports (redriven) or,
	// for an overdue incident, a later applied callback (callback).
	AttentionResolved AttentionStatus = "resolved"
	// AttentionUnresolved is a list filter, never an item's status: open
	// and acknowledged items.
	AttentionUnresolved AttentionStatus = "unresolved"
)

// CanBecome reports whether an item in state s may be set to state next,
// so that a use-case asks the record instead of repeating the states: an
// open item may be acknowledged or resolved, an acknowledged one
// acknowledged again (reassigned) or resolved, and a resolved one nothing.
// Nothing is set open, and AttentionUnresolved, a filter, is legal on
// neither side.
func (s AttentionStatus) CanBecome(next AttentionStatus) bool {
	switch s {
	case AttentionOpen, AttentionAcknowledged:
		return next == AttentionAcknowledged || next == AttentionResolved
	}
	return false
}

// AttentionItem is one thing a person needs to look at: a request (a
// question or an approval, one item per revision) or an incident.
type AttentionItem struct {
	ID       string // att_…
	TenantID string
	Kind     string // question, approval or incident
	Status   AttentionStatus
	// Resolution says why a resolved item was resolved: receipt, outcome,
	// superseded, expired, work_ended, reviewed, redriven or callback (see
	// AttentionResolved).
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

// DecisionFile is an operator's decision on a request item of the
// Needs-attention inbox (docs/attention.md): a runtime request's question or
// approval (recorded as a WorkDecision) or a pending AAP approval request
// (recorded as its Decision). inbox.ParseDecision reads it from the API's
// JSON; the console fills the same file from its form.
type DecisionFile struct {
	// DecisionID is the operator's stable ID: resubmitting it with the same
	// content replays the recorded decision.
	DecisionID      string
	RequestRevision int64
	// Decision is answer, approve or reject.
	Decision             string
	ExpectedActionDigest string // "" when absent
	Answer               string
	// HasDigest and HasAnswer say whether the file carried the field at all:
	// a question's decision must not carry a digest, an approval's no answer.
	HasDigest, HasAnswer bool
}
