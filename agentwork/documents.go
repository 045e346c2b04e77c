package agentwork

import "encoding/json"

// Version is the protocol version of work blocks, callbacks and decisions.
const Version = "agent-work.v1"

// EventType is the type of every endpoint delivery (Handoff.Type).
const EventType = "event.received"

// DecisionType is the type of a pushed decision document (Decision.Type).
const DecisionType = "decision"

// Handoff is the envelope of one delivery to an endpoint: an event and,
// for agent-work endpoints, its work block. ID is also sent as the
// webhook-id header and is the same on every retry of the delivery; the
// body bytes are fixed when the delivery is recorded and signed as sent.
type Handoff struct {
	ID        string `json:"id"`
	Type      string `json:"type"`
	CreatedAt string `json:"created_at"`
	Event     Event  `json:"event"`
	// Work is nil for endpoints without agent work, which receive the
	// original event format.
	Work *Work `json:"work,omitempty"`
}

// Event is an inbound event as endpoints receive it.
type Event struct {
	ID             string              `json:"id"`
	Channel        string              `json:"channel"`
	BindingID      string              `json:"binding_id"`
	ConversationID string              `json:"conversation_id"`
	FollowUp       bool                `json:"follow_up"`
	Sender         string              `json:"sender"`
	ReceivedAt     string              `json:"received_at"`
	Headers        map[string][]string `json:"headers"`
	Payload        json.RawMessage     `json:"payload"`
	Attachments    json.RawMessage     `json:"attachments"`
}

// Work is the work block: the identity to report against. Transport
// retries carry the same WorkID; an intentional replay is a new WorkID
// with a higher Generation in the same conversation.
type Work struct {
	Version        string `json:"version"`
	WorkID         string `json:"work_id"`
	ConversationID string `json:"conversation_id"`
	Generation     int    `json:"generation"`
	CallbackURL    string `json:"callback_url"`
	// CredentialID names the runtime credential to report with (never the
	// token itself); empty while the endpoint has none.
	CredentialID string `json:"credential_id,omitempty"`
	// RuntimeSessionID is the session the runtime last reported in this
	// conversation, on follow-ups and replays.
	RuntimeSessionID string `json:"runtime_session_id,omitempty"`
}

// Status is a reported state of work.
type Status string

// Reported statuses. Completed, Failed and Cancelled are terminal: AgentOwl
// refuses any later report for the work (409 already_terminal).
const (
	Accepted   Status = "accepted"
	Running    Status = "running"
	NeedsInput Status = "needs_input"
	Completed  Status = "completed"
	Failed     Status = "failed"
	Cancelled  Status = "cancelled"
)

// Callback is one report about work, posted to the work's callback_url.
// A retry resends the same callback ID, sequence, timestamp and body.
type Callback struct {
	Version    string `json:"version"`
	CallbackID string `json:"callback_id"`
	WorkID     string `json:"work_id"`
	Sequence   int64  `json:"sequence"`
	Status     Status `json:"status"`
	// OccurredAt is an RFC 3339 timestamp, fixed when the report is made.
	OccurredAt       string  `json:"occurred_at"`
	RuntimeSessionID string  `json:"runtime_session_id,omitempty"`
	Result           *Result `json:"result,omitempty"`
	// Requests (a JSON array of Request) go with NeedsInput only. It is
	// raw so that a stored report can be resent byte for byte.
	Requests json.RawMessage `json:"requests,omitempty"`
	// Error explains Failed or Cancelled, such as {"code": …, "message": …}.
	Error json.RawMessage `json:"error,omitempty"`
}

// Result is what completed work produced. URL must be HTTPS without
// userinfo; AgentOwl shows it and never fetches it.
type Result struct {
	Summary string `json:"summary,omitempty"`
	URL     string `json:"url,omitempty"`
}

// Request kinds of a needs_input callback.
const (
	KindQuestion = "question"
	KindApproval = "approval"
)

// Decisions. A question allows DecisionAnswer; an approval request allows
// DecisionApprove and/or DecisionReject. DecisionEdit is named so it can be
// refused: it is not supported in agent-work.v1.
const (
	DecisionAnswer  = "answer"
	DecisionApprove = "approve"
	DecisionReject  = "reject"
	DecisionEdit    = "edit"
)

// Request is one question or approval request of a needs_input callback.
// Changed content needs a new Revision: a decision on an older revision
// cannot authorize the new one.
type Request struct {
	ID               string   `json:"id"`
	Revision         int64    `json:"revision"`
	Kind             string   `json:"kind"`
	Prompt           string   `json:"prompt"`
	AllowedDecisions []string `json:"allowed_decisions"`
	// Action is required on approval requests and refused on questions.
	Action *Action `json:"action,omitempty"`
	// ExpiresAt is a UTC RFC 3339 timestamp ending in Z.
	ExpiresAt string `json:"expires_at"`
}

// Action is the concrete action an approval request proposes.
type Action struct {
	Description string `json:"description"`
	// Digest is the SHA-256 of the action, 64 lowercase hex characters
	// (ActionDigest); an approval decision must carry it back.
	Digest string `json:"digest"`
}

// Decision is a decision document, as AgentOwl pushes it to the decision
// URL and lists it on the recovery route. A receiver deduplicates
// DecisionID and does not act at or after RequestExpiresAt.
type Decision struct {
	Version              string `json:"version"`
	Type                 string `json:"type"`
	DecisionID           string `json:"decision_id"`
	WorkID               string `json:"work_id"`
	RequestID            string `json:"request_id"`
	RequestRevision      int64  `json:"request_revision"`
	Decision             string `json:"decision"`
	Answer               string `json:"answer,omitempty"`
	ExpectedActionDigest string `json:"expected_action_digest,omitempty"`
	DecidedAt            string `json:"decided_at"`
	RequestExpiresAt     string `json:"request_expires_at"`
	// Attestation is the provider's signed attestation of this decision,
	// a compact JWS that package attest verifies (docs/attestations.md).
	// Additive in agent-work.v1: optional, absent when the provider signs
	// none; a receiver that does not check it ignores it.
	Attestation string `json:"attestation,omitempty"`
}

// Acceptance is the only answer to a decision push that records a
// receipt: {"accepted": true, "decision_id": …}.
type Acceptance struct {
	Accepted   bool   `json:"accepted"`
	DecisionID string `json:"decision_id"`
}
