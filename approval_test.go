package agentowl_test

import (
	"encoding/hex"
	"encoding/json"
	"testing"

	"github.com/agentowl/agentowl"
)

// TestCreateRequestInputHashIsStable pins the idempotency input hash of
// approval requests. The hash is stored (approval requests and idempotency
// records, kept for RetentionAfterDecision) and compared byte for byte on
// every retry, so it must not change between versions: a change would turn
// a retry across an upgrade into idempotency_conflict. Unlike agent-work
// canonical JSON it escapes <, > and & (see HashCanonical).
func TestCreateRequestInputHashIsStable(t *testing.T) {
	t.Parallel()
	reasoning := "Refund <order> & notify"
	for _, c := range []struct {
		in   agentowl.CreateRequestInput
		want string
	}{
		{agentowl.CreateRequestInput{Tool: "issue_refund", Timeout: "PT1H",
			Arguments: json.RawMessage(`{"order": 1234, "amount": "20.00"}`)},
			// {"arguments":{"amount":"20.00","order":1234},"timeout":"PT1H","tool":"issue_refund"}
			"0d2a4dc49b5bab51eb2db59fdf14a7c0985bc0b909e0dc0d9d589dcb7bce92a3"},
		{agentowl.CreateRequestInput{Tool: "send <mail> & more", Timeout: "PT5M", AgentReasoning: &reasoning,
			Arguments: json.RawMessage("{\"z\": {\"b\": 1e3, \"a\": 1.0, \"n\": -0}, \"s\": \"caf\\u00e9 <b>&amp; \\u2028\", \"l\": [3, 2, 1]}"),
			Context:   json.RawMessage(`{"url": "https://x.example/?a=1&b=2", "nested": {"y": null, "x": true}}`)},
			// {"agent_reasoning":"Refund \u003corder\u003e \u0026 notify","arguments":{"l":[3,2,1],
			// "s":"café \u003cb\u003e\u0026amp; \u2028","z":{"a":1.0,"b":1e3,"n":-0}},"context":{"nested":
			// {"x":true,"y":null},"url":"https://x.example/?a=1\u0026b=2"},"timeout":"PT5M","tool":"send \u003cmail\u003e \u0026 more"}
			"5ccaf4caada33c6966e45a95d3ee53b6c3abc660abda9edd4ac1ec8a6a6851e9"},
	} {
		if got := hex.EncodeToString(c.in.Hash()); got != c.want {
			t.Errorf("Hash(%s %s) = %s, want %s", c.in.Tool, c.in.Arguments, got, c.want)
		}
	}
}

// TestApprovalStatusCanBecome pins the approval transitions: a pending
// request takes one final state; a final state never changes.
func TestApprovalStatusCanBecome(t *testing.T) {
	t.Parallel()
	final := []agentowl.ApprovalStatus{agentowl.StatusApproved, agentowl.StatusDenied, agentowl.StatusExpired,
		agentowl.StatusCancelled}
	checkTransitions(t, append([]agentowl.ApprovalStatus{agentowl.StatusPending}, final...),
		map[agentowl.ApprovalStatus][]agentowl.ApprovalStatus{
			agentowl.StatusPending:   final,
			agentowl.StatusApproved:  nil,
			agentowl.StatusDenied:    nil,
			agentowl.StatusExpired:   nil,
			agentowl.StatusCancelled: nil,
		}, agentowl.ApprovalStatus.CanBecome)
	for _, s := range final {
		if !s.Terminal() {
			t.Errorf("%q is final but not Terminal", s)
		}
	}
}
