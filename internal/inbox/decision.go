package inbox

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/agentwork"
	"github.com/agentowl/agentowl/internal/work"
)

var decisionFields = []string{"decision_id", "request_revision", "decision", "expected_action_digest", "answer"}

// ParseDecision reads a decision file from the API (docs/attention.md): one
// JSON object, no unknown fields, each field checked; the same file decides
// a runtime request and an AAP approval request.
func ParseDecision(body []byte) (*agentowl.DecisionFile, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var fields map[string]json.RawMessage
	if err := dec.Decode(&fields); err != nil || fields == nil {
		return nil, agentowl.Errorf(agentowl.ECodeInvalidJSON, "The decision must be one JSON object.")
	}
	for k := range fields {
		if !slices.Contains(decisionFields, k) {
			return nil, agentowl.FieldError(agentowl.ECodeUnknownField, k, "Unknown field %q.", k)
		}
	}
	var in agentowl.DecisionFile
	var err error
	if in.DecisionID, err = work.StringField(fields, "decision_id", true, 128); err != nil {
		return nil, err
	}
	if strings.ContainsAny(in.DecisionID, "/ ?#%") {
		return nil, fieldError("decision_id", "decision_id must not contain spaces, /, ?, # or %%.")
	}
	raw, ok := fields["request_revision"]
	if !ok {
		return nil, agentowl.FieldError(agentowl.ECodeMissingField, "request_revision", "request_revision is required.")
	}
	var rev json.Number
	if err := json.Unmarshal(raw, &rev); err != nil || bytes.HasPrefix(bytes.TrimSpace(raw), []byte(`"`)) {
		return nil, fieldError("request_revision", "request_revision must be a positive integer.")
	}
	if in.RequestRevision, err = rev.Int64(); err != nil || in.RequestRevision < 1 {
		return nil, fieldError("request_revision", "request_revision must be a positive integer.")
	}
	if in.Decision, err = work.StringField(fields, "decision", true, 32); err != nil {
		return nil, err
	}
	if in.Decision == work.DecisionEdit {
		return nil, agentowl.FieldError(agentowl.ECodeEditUnsupported, "decision",
			"The edit decision is not supported in agent-work.v1: approve or reject, and ask the runtime for a new revision.")
	}
	if _, in.HasDigest = fields["expected_action_digest"]; in.HasDigest {
		if in.ExpectedActionDigest, err = work.StringField(fields, "expected_action_digest", true, 64); err != nil || !agentwork.IsDigest(in.ExpectedActionDigest) {
			return nil, fieldError("expected_action_digest", "expected_action_digest must be 64 lowercase hex characters.")
		}
	}
	if raw, in.HasAnswer = fields["answer"]; in.HasAnswer {
		if err := json.Unmarshal(raw, &in.Answer); err != nil || in.Answer == "" || len(in.Answer) > work.MaxAnswerBytes || !utf8.ValidString(in.Answer) {
			return nil, fieldError("answer", "answer must be 1-%d bytes of text.", work.MaxAnswerBytes)
		}
	}
	return &in, nil
}

func fieldError(param, format string, args ...any) error {
	return agentowl.FieldError(agentowl.ECodeInvalidField, param, format, args...)
}
