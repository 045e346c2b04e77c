package agentowl_test

import (
	"testing"

	"github.com/agentowl/agentowl"
)

// TestMessageStateCanBecome pins the outbox transitions: a pending message
// is retried (pending again), delivered, failed or cancelled; a failed or
// cancelled one is only redriven to pending; a delivered one never changes.
func TestMessageStateCanBecome(t *testing.T) {
	t.Parallel()
	checkTransitions(t, []agentowl.MessageState{agentowl.MessagePending, agentowl.MessageDelivered,
		agentowl.MessageFailed, agentowl.MessageCancelled}, map[agentowl.MessageState][]agentowl.MessageState{
		agentowl.MessagePending: {agentowl.MessagePending, agentowl.MessageDelivered, agentowl.MessageFailed,
			agentowl.MessageCancelled},
		agentowl.MessageDelivered: nil,
		agentowl.MessageFailed:    {agentowl.MessagePending},
		agentowl.MessageCancelled: {agentowl.MessagePending},
	}, agentowl.MessageState.CanBecome)
}
