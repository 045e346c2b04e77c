package agentowl_test

import (
	"testing"

	"github.com/agentowl/agentowl"
)

var workStatuses = []agentowl.WorkStatus{agentowl.WorkPending, agentowl.WorkAccepted, agentowl.WorkRunning,
	agentowl.WorkNeedsInput, agentowl.WorkCompleted, agentowl.WorkFailed, agentowl.WorkCancelled}

// TestWorkStatusCanBecome pins the work transitions RecordCallback applies:
// work not ended takes any reported status, its own included; terminal
// work takes none; nothing returns to pending.
func TestWorkStatusCanBecome(t *testing.T) {
	t.Parallel()
	reported := []agentowl.WorkStatus{agentowl.WorkAccepted, agentowl.WorkRunning, agentowl.WorkNeedsInput,
		agentowl.WorkCompleted, agentowl.WorkFailed, agentowl.WorkCancelled}
	checkTransitions(t, workStatuses, map[agentowl.WorkStatus][]agentowl.WorkStatus{
		agentowl.WorkPending:    reported,
		agentowl.WorkAccepted:   reported,
		agentowl.WorkRunning:    reported,
		agentowl.WorkNeedsInput: reported,
		agentowl.WorkCompleted:  nil,
		agentowl.WorkFailed:     nil,
		agentowl.WorkCancelled:  nil,
	}, agentowl.WorkStatus.CanBecome)
}

// TestWorkStatusTerminal pins which states end work, and that a terminal
// state is exactly one no transition leaves.
func TestWorkStatusTerminal(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		s    agentowl.WorkStatus
		want bool
	}{
		{agentowl.WorkPending, false},
		{agentowl.WorkAccepted, false},
		{agentowl.WorkRunning, false},
		{agentowl.WorkNeedsInput, false},
		{agentowl.WorkCompleted, true},
		{agentowl.WorkFailed, true},
		{agentowl.WorkCancelled, true},
		{"", false},
		{unknown, false},
	} {
		if got := c.s.Terminal(); got != c.want {
			t.Errorf("%q.Terminal() = %v, want %v", c.s, got, c.want)
		}
	}
	for _, s := range workStatuses {
		leaves := false
		for _, next := range workStatuses {
			leaves = leaves || s.CanBecome(next)
		}
		if leaves == s.Terminal() {
			t.Errorf("%q: Terminal() = %v but some transition leaves it: %v", s, s.Terminal(), leaves)
		}
	}
}
