package work

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/agentwork"
)

// Request field limits (docs/limits.md).
const (
	maxRequestIDBytes  = 256
	maxPromptBytes     = 4096
	maxActionDescBytes = 4096
	// MaxRequests caps the requests of one needs_input callback.
	MaxRequests = 20
	// MaxAnswerBytes caps an operator's answer to a question, as a
	// question's prompt is capped.
	MaxAnswerBytes = maxPromptBytes
)

// Attention item kinds and decisions (docs/attention.md): the request
// kinds and decisions of the protocol (package agentwork), and incidents,
// which AgentOwl raises itself.
const (
	KindQuestion = agentwork.KindQuestion
	KindApproval = agentwork.KindApproval
	KindIncident = "incident"

	DecisionAnswer  = agentwork.DecisionAnswer
	DecisionApprove = agentwork.DecisionApprove
	DecisionReject  = agentwork.DecisionReject
	DecisionEdit    = agentwork.DecisionEdit
)

// Request is one validated request of a needs_input callback (the
// document agentwork.Request).
type Request struct {
	ID               string
	Revision         int64
	Kind             string
	Prompt           string
	AllowedDecisions []string
	Action           *agentwork.Action
	ExpiresAt        time.Time
	// Canonical is the request object in canonical JSON; Hash its SHA-256.
	Canonical []byte
	Hash      []byte
}

var requestFields = []string{"id", "revision", "kind", "prompt", "allowed_decisions", "action", "expires_at"}

func textField(fields map[string]json.RawMessage, param, name string, maxBytes int) (string, error) {
	raw, ok := fields[name]
	if !ok {
		return "", agentowl.FieldError(agentowl.ECodeMissingField, param+"."+name, "%s.%s is required.", param, name)
	}
	var v string
	if err := json.Unmarshal(raw, &v); err != nil || v == "" || len(v) > maxBytes || !utf8.ValidString(v) {
		return "", invalid(param+"."+name, "%s.%s must be 1-%d bytes of text.", param, name, maxBytes)
	}
	return v, nil
}

// parseRequests validates the requests of a needs_input callback. Any
// invalid request refuses them all.
func parseRequests(raw json.RawMessage) ([]Request, error) {
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil || len(list) == 0 {
		return nil, invalid("requests", "requests must be a non-empty array.")
	}
	if len(list) > MaxRequests {
		return nil, invalid("requests", "A callback carries at most %d requests.", MaxRequests)
	}
	out := make([]Request, 0, len(list))
	for i, item := range list {
		r, err := parseRequest(item, "requests["+itoa(i)+"]")
		if err != nil {
			return nil, err
		}
		if slices.ContainsFunc(out, func(o Request) bool { return o.ID == r.ID }) {
			return nil, invalid("requests["+itoa(i)+"].id", "Request %q appears twice in one callback.", r.ID)
		}
		out = append(out, *r)
	}
	return out, nil
}

func itoa(i int) string { return strconv.Itoa(i) }

func parseRequest(raw json.RawMessage, param string) (*Request, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var fields map[string]json.RawMessage
	if err := dec.Decode(&fields); err != nil || fields == nil {
		return nil, invalid(param, "%s must be an object.", param)
	}
	for k := range fields {
		if !slices.Contains(requestFields, k) {
			return nil, agentowl.FieldError(agentowl.ECodeUnknownField, param+"."+k, "Unknown field %q in %s.", k, param)
		}
	}
	var r Request
	var err error
	if r.ID, err = textField(fields, param, "id", maxRequestIDBytes); err != nil {
		return nil, err
	}
	if strings.ContainsFunc(r.ID, func(c rune) bool { return c <= ' ' || c == 0x7f }) {
		return nil, invalid(param+".id", "%s.id must not contain spaces or control characters.", param)
	}
	rawRev, ok := fields["revision"]
	if !ok {
		return nil, agentowl.FieldError(agentowl.ECodeMissingField, param+".revision", "%s.revision is required.", param)
	}
	var rev json.Number
	if err := json.Unmarshal(rawRev, &rev); err != nil || bytes.HasPrefix(bytes.TrimSpace(rawRev), []byte(`"`)) {
		return nil, invalid(param+".revision", "%s.revision must be a positive integer.", param)
	}
	if r.Revision, err = rev.Int64(); err != nil || r.Revision < 1 || r.Revision > math.MaxInt32 {
		return nil, invalid(param+".revision", "%s.revision must be a positive integer.", param)
	}
	if r.Kind, err = textField(fields, param, "kind", 32); err != nil {
		return nil, err
	}
	if r.Kind != KindQuestion && r.Kind != KindApproval {
		return nil, invalid(param+".kind", "%s.kind must be question or approval.", param)
	}
	if r.Prompt, err = textField(fields, param, "prompt", maxPromptBytes); err != nil {
		return nil, err
	}
	rawAllowed, ok := fields["allowed_decisions"]
	if !ok {
		return nil, agentowl.FieldError(agentowl.ECodeMissingField, param+".allowed_decisions", "%s.allowed_decisions is required.", param)
	}
	if err := json.Unmarshal(rawAllowed, &r.AllowedDecisions); err != nil || len(r.AllowedDecisions) == 0 {
		return nil, invalid(param+".allowed_decisions", "%s.allowed_decisions must be a non-empty array of decisions.", param)
	}
	if slices.Contains(r.AllowedDecisions, DecisionEdit) {
		return nil, agentowl.FieldError(agentowl.ECodeEditUnsupported, param+".allowed_decisions",
			"The edit decision is not supported in agent-work.v1; allow approve and/or reject, and send a new revision to change the action.")
	}
	valid := []string{DecisionAnswer}
	if r.Kind == KindApproval {
		valid = []string{DecisionApprove, DecisionReject}
	}
	for i, d := range r.AllowedDecisions {
		if !slices.Contains(valid, d) || slices.Contains(r.AllowedDecisions[:i], d) {
			return nil, invalid(param+".allowed_decisions", "A %s allows %s (each at most once); %q is not allowed.",
				r.Kind, strings.Join(valid, " and "), d)
		}
	}
	rawAction, hasAction := fields["action"]
	switch {
	case r.Kind == KindApproval && !hasAction:
		return nil, agentowl.FieldError(agentowl.ECodeMissingField, param+".action", "An approval request must carry action.")
	case r.Kind == KindQuestion && hasAction:
		return nil, invalid(param+".action", "action is allowed on approval requests only.")
	case hasAction:
		var af map[string]json.RawMessage
		if err := json.Unmarshal(rawAction, &af); err != nil || af == nil {
			return nil, invalid(param+".action", "%s.action must be an object with description and digest.", param)
		}
		for k := range af {
			if k != "description" && k != "digest" {
				return nil, agentowl.FieldError(agentowl.ECodeUnknownField, param+".action."+k, "Unknown field %q in action.", k)
			}
		}
		var a agentwork.Action
		if a.Description, err = textField(af, param+".action", "description", maxActionDescBytes); err != nil {
			return nil, err
		}
		if a.Digest, err = textField(af, param+".action", "digest", 64); err != nil || !agentwork.IsDigest(a.Digest) {
			return nil, invalid(param+".action.digest", "%s.action.digest must be exactly 64 lowercase hex characters (SHA-256).", param)
		}
		r.Action = &a
	}
	expires, err := textField(fields, param, "expires_at", 64)
	if err != nil {
		return nil, err
	}
	t, perr := time.Parse(time.RFC3339Nano, expires)
	if perr != nil || !strings.HasSuffix(expires, "Z") {
		return nil, invalid(param+".expires_at", "%s.expires_at must be a UTC RFC 3339 timestamp ending in Z.", param)
	}
	r.ExpiresAt = t.UTC()
	if r.Canonical, err = canonicalJSON(raw); err != nil {
		return nil, err
	}
	sum := sha256.Sum256(r.Canonical)
	r.Hash = sum[:]
	return &r, nil
}
