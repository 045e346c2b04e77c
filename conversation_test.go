package agentowl_test

import (
	"testing"

	"github.com/agentowl/agentowl"
)

// TestConversationStatusCanBecome pins the conversation transitions: an
// open conversation ends, once; an ended one is never reopened.
func TestConversationStatusCanBecome(t *testing.T) {
	t.Parallel()
	checkTransitions(t, []agentowl.ConversationStatus{agentowl.ConversationOpen, agentowl.ConversationEnded},
		map[agentowl.ConversationStatus][]agentowl.ConversationStatus{
			agentowl.ConversationOpen:  {agentowl.ConversationEnded},
			agentowl.ConversationEnded: nil,
		}, agentowl.ConversationStatus.CanBecome)
	// The record's Status field is a plain string: the rule is asked
	// through a conversion, as the use-cases do.
	c := agentowl.Conversation{Status: agentowl.ConversationOpen}
	if !agentowl.ConversationStatus(c.Status).CanBecome(agentowl.ConversationEnded) {
		t.Error("an open conversation cannot end")
	}
}
