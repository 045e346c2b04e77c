package inbox_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/inbox"
)

// TestParseDecision: the one decision file of the inbox, read from the
// API: each field checked, the first refusal named by its code and field.
func TestParseDecision(t *testing.T) {
	t.Parallel()
	digest := strings.Repeat("ab", 32)
	cases := []struct {
		name, body string
		code       string // "" when accepted
		param      string
		want       agentowl.DecisionFile
	}{
		{"approval", `{"decision_id":"d1","request_revision":2,"decision":"approve","expected_action_digest":"` + digest + `"}`, "", "",
			agentowl.DecisionFile{DecisionID: "d1", RequestRevision: 2, Decision: "approve", ExpectedActionDigest: digest, HasDigest: true}},
		{"answer", `{"decision_id":"d2","request_revision":1,"decision":"answer","answer":"Yes, refund it."}`, "", "",
			agentowl.DecisionFile{DecisionID: "d2", RequestRevision: 1, Decision: "answer", Answer: "Yes, refund it.", HasAnswer: true}},
		{"not an object", `[1]`, agentowl.ECodeInvalidJSON, "", agentowl.DecisionFile{}},
		{"unknown field", `{"decision_id":"d","request_revision":1,"decision":"approve","note":"x"}`, agentowl.ECodeUnknownField, "note", agentowl.DecisionFile{}},
		{"no decision_id", `{"request_revision":1,"decision":"approve"}`, agentowl.ECodeMissingField, "decision_id", agentowl.DecisionFile{}},
		{"decision_id with a slash", `{"decision_id":"a/b","request_revision":1,"decision":"approve"}`, agentowl.ECodeInvalidField, "decision_id", agentowl.DecisionFile{}},
		{"no revision", `{"decision_id":"d","decision":"approve"}`, agentowl.ECodeMissingField, "request_revision", agentowl.DecisionFile{}},
		{"revision as a string", `{"decision_id":"d","request_revision":"1","decision":"approve"}`, agentowl.ECodeInvalidField, "request_revision", agentowl.DecisionFile{}},
		{"revision 0", `{"decision_id":"d","request_revision":0,"decision":"approve"}`, agentowl.ECodeInvalidField, "request_revision", agentowl.DecisionFile{}},
		{"edit", `{"decision_id":"d","request_revision":1,"decision":"edit"}`, agentowl.ECodeEditUnsupported, "decision", agentowl.DecisionFile{}},
		{"bad digest", `{"decision_id":"d","request_revision":1,"decision":"approve","expected_action_digest":"ABC"}`, agentowl.ECodeInvalidField, "expected_action_digest", agentowl.DecisionFile{}},
		{"empty answer", `{"decision_id":"d","request_revision":1,"decision":"answer","answer":""}`, agentowl.ECodeInvalidField, "answer", agentowl.DecisionFile{}},
		{"NUL in the ID", `{"decision_id":"d\u0000","request_revision":1,"decision":"approve"}`, agentowl.ECodeInvalidField, "decision_id", agentowl.DecisionFile{}},
	}
	for _, c := range cases {
		got, err := inbox.ParseDecision([]byte(c.body))
		if c.code == "" {
			if err != nil || *got != c.want {
				t.Errorf("%s: got %+v, %v; want %+v", c.name, got, err, c.want)
			}
			continue
		}
		var e *agentowl.Error
		if !errors.As(err, &e) || e.Code != c.code || e.Param != c.param {
			t.Errorf("%s: got %v, want %s on %q", c.name, err, c.code, c.param)
		}
	}
}
