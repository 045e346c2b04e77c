package agentowl_test

import (
	"testing"

	"github.com/agentowl/agentowl"
)

// TestAttentionStatusCanBecome pins the inbox transitions: open items are
// acknowledged or resolved, acknowledged ones reassigned or resolved,
// resolved ones never change, nothing is reopened, and the unresolved
// filter is no status at all.
func TestAttentionStatusCanBecome(t *testing.T) {
	t.Parallel()
	checkTransitions(t, []agentowl.AttentionStatus{agentowl.AttentionOpen, agentowl.AttentionAcknowledged,
		agentowl.AttentionResolved, agentowl.AttentionUnresolved}, map[agentowl.AttentionStatus][]agentowl.AttentionStatus{
		agentowl.AttentionOpen:         {agentowl.AttentionAcknowledged, agentowl.AttentionResolved},
		agentowl.AttentionAcknowledged: {agentowl.AttentionAcknowledged, agentowl.AttentionResolved},
		agentowl.AttentionResolved:     nil,
		agentowl.AttentionUnresolved:   nil,
	}, agentowl.AttentionStatus.CanBecome)
}
