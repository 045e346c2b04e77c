package approval

import (
	"encoding/json"
	"testing"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/agentwork/agentworktest"
)

// TestGoldenActionDigests checks the action digest the Needs-attention
// inbox shows for an AAP request against the agent-work golden vectors,
// which runtimes and operators compute with the same package.
func TestGoldenActionDigests(t *testing.T) {
	t.Parallel()
	for _, v := range agentworktest.Typed(t, agentworktest.Action) {
		var a struct {
			Tool      string          `json:"tool"`
			Arguments json.RawMessage `json:"arguments"`
		}
		agentworktest.DecodeStrict(t, v, &a)
		if d := ActionDigest(&agentowl.ApprovalRequest{Tool: a.Tool, Arguments: a.Arguments}); d != v.SHA256 {
			t.Errorf("%s: ActionDigest = %s, want %s", v.Name, d, v.SHA256)
		}
	}
}
