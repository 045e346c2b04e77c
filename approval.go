package agentowl

import (
	"crypto/sha256"
	"encoding/json"
	"regexp"
	"strconv"
	"time"

	"github.com/agentowl/agentowl/agentwork"
)

// ApprovalStatus is the state of an approval request. A request is created
// pending (or already terminal when a policy decides it at creation) and moves
// to exactly one terminal state, never back.
type ApprovalStatus string

const (
	// StatusPending: created, no outcome yet. Left by a decision, by the
	// expiry sweeper or a read at/after deadline_at, or by cancellation.
	StatusPending ApprovalStatus = "pending"
	// StatusApproved: an operator or policy permitted the call; the decision
	// carries expires_at, after which the call must not start.
	StatusApproved ApprovalStatus = "approved"
	// StatusDenied: an operator or policy refused the call.
	StatusDenied ApprovalStatus = "denied"
	// StatusExpired: no decision was reached before deadline_at.
	StatusExpired ApprovalStatus = "expired"
	// StatusCancelled: withdrawn by its instance, or its instance was deleted.
	StatusCancelled ApprovalStatus = "cancelled"
)

// Terminal reports whether s is one of the four final states.
func (s ApprovalStatus) Terminal() bool { return s != StatusPending && s != "" }

// CanBecome reports whether a request in state s may be set to state next,
// the rule every state type of the records states the same way: a pending
// request may take any of the four final states, once; nothing else is
// legal (a final state never changes, and nothing is set pending again).
func (s ApprovalStatus) CanBecome(next ApprovalStatus) bool {
	if s != StatusPending {
		return false
	}
	switch next {
	case StatusApproved, StatusDenied, StatusExpired, StatusCancelled:
		return true
	}
	return false
}

// Decision is the immutable outcome of a request.
type Decision struct {
	Status    ApprovalStatus
	Note      string
	DecidedAt time.Time
	// ExpiresAt is set for approvals only.
	ExpiresAt time.Time
	// DecidedBy names who decided: "operator:<name>", "policy:<id>", "instance", "deadline", "instance-deleted".
	DecidedBy string
}

// ApprovalRequest is one intercepted tool call awaiting, or holding, a decision.
// Tool, Arguments, Timeout, AgentReasoning and Context are exactly what the
// adapter submitted (Arguments and Context are the compacted raw JSON, so
// numbers and key spellings survive unchanged).
type ApprovalRequest struct {
	ID             string
	TenantID       string
	InstanceID     string
	IdempotencyKey string
	InputHash      []byte
	Tool           string
	Arguments      json.RawMessage
	Timeout        string
	AgentReasoning *string
	Context        json.RawMessage
	Status         ApprovalStatus
	CreatedAt      time.Time
	DeadlineAt     time.Time
	Decision       *Decision
}

// EffectiveStatus is the status a reader must see at now: a pending request
// at or past its deadline is expired even before the sweeper records it.
func (r *ApprovalRequest) EffectiveStatus(now time.Time) ApprovalStatus {
	if r.Status == StatusPending && !now.Before(r.DeadlineAt) {
		return StatusExpired
	}
	return r.Status
}

var durationPattern = regexp.MustCompile(`^[1-9][0-9]*(s|m|h)$`)

// ParseDuration parses the contract's Duration: a positive whole number of
// seconds, minutes or hours with its unit, such as 30s, 30m or 24h.
func ParseDuration(s string) (time.Duration, bool) {
	if len(s) > 12 || !durationPattern.MatchString(s) {
		return 0, false
	}
	n, err := strconv.ParseInt(s[:len(s)-1], 10, 64)
	if err != nil {
		return 0, false
	}
	unit := map[byte]time.Duration{'s': time.Second, 'm': time.Minute, 'h': time.Hour}[s[len(s)-1]]
	if n > int64((1<<62)/unit) {
		return 0, false
	}
	return time.Duration(n) * unit, true
}

// CreateRequestInput is a validated CreateApprovalRequest body.
type CreateRequestInput struct {
	Tool           string
	Arguments      json.RawMessage
	Timeout        string
	TimeoutDur     time.Duration
	AgentReasoning *string
	Context        json.RawMessage
}

// Hash returns a digest of the parsed field values, so that JSON whitespace
// and object key order do not make two submissions differ.
func (in *CreateRequestInput) Hash() []byte {
	canon := map[string]any{"tool": in.Tool, "timeout": in.Timeout, "arguments": canonicalJSON(in.Arguments)}
	if in.AgentReasoning != nil {
		canon["agent_reasoning"] = *in.AgentReasoning
	}
	if in.Context != nil {
		canon["context"] = canonicalJSON(in.Context)
	}
	return HashCanonical(canon)
}

// HashCanonical returns the SHA-256 of json.Marshal(v), for v built from
// strings, numbers, maps and canonicalJSON values: keys sorted, numbers as
// written. It is the idempotency input hash, stored and compared byte for
// byte on retries, so its bytes must never change. That is why it keeps
// json.Marshal's escaping of <, > and & (as \u003c, \u003e, \u0026), which
// agent-work canonical JSON does not: the two agree in everything else, and
// this hash is never a wire form that another party computes.
func HashCanonical(v any) []byte {
	b, _ := json.Marshal(v) // maps marshal with sorted keys; values came from JSON
	sum := sha256.Sum256(b)
	return sum[:]
}

// canonicalJSON is raw in agent-work canonical JSON (keys sorted, numbers
// as written), for HashCanonical; json.Marshal escapes its <, > and &
// again. Raw was validated as JSON before; an invalid one hashes as null.
func canonicalJSON(raw json.RawMessage) any {
	c, err := agentwork.Canonicalize(raw)
	if err != nil {
		return nil
	}
	return json.RawMessage(c)
}

// RetentionAfterDecision is how long a terminal request, its idempotency key,
// instance creation keys and deletion records are kept: seven days (168 h).
const RetentionAfterDecision = 168 * time.Hour

// Idempotency is the remembered outcome of a keyed provider operation
// (instance creation and update). Request creation keys live on the request.
type Idempotency struct {
	Owner       string // who the key belongs to, e.g. the provisioner token ID
	Operation   string
	Key         string
	InputHash   []byte
	ResourceID  string
	Response    []byte // the original response; sealed when it holds a secret
	CreatedAt   time.Time
	RetainUntil time.Time
}
