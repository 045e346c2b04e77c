package inbox

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/work"
)

// TestApprovalItemStatus: the status rules of an AAP request's item. A
// pending request is open, or acknowledged once assigned; past its deadline
// it is resolved as expired even before the expiry is recorded; decided and
// cancelled requests are resolved at their decision.
func TestApprovalItemStatus(t *testing.T) {
	t.Parallel()
	created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	deadline, decided, acked := created.Add(time.Hour), created.Add(10*time.Minute), created.Add(5*time.Minute)
	req := func(st agentowl.ApprovalStatus) *agentowl.ApprovalRequest {
		r := &agentowl.ApprovalRequest{ID: "0b6a52c4-8f4e-4c1e-9a57-2f0d4b0a8e11", Tool: "refund", Arguments: json.RawMessage(`{"amount":5}`),
			Status: st, CreatedAt: created, DeadlineAt: deadline}
		if st != agentowl.StatusPending {
			r.Decision = &agentowl.Decision{Status: st, DecidedAt: decided}
		}
		return r
	}
	ack := &agentowl.AAPAck{Assignee: "ann", At: acked}
	for _, c := range []struct {
		name       string
		r          *agentowl.ApprovalRequest
		ack        *agentowl.AAPAck
		now        time.Time
		status     agentowl.AttentionStatus
		resolution string
		updated    time.Time
		expired    bool
	}{
		{"pending", req(agentowl.StatusPending), nil, created, agentowl.AttentionOpen, "", created, false},
		{"acknowledged", req(agentowl.StatusPending), ack, acked, agentowl.AttentionAcknowledged, "", acked, false},
		{"past deadline", req(agentowl.StatusPending), ack, deadline, agentowl.AttentionResolved, work.ResolvedExpired, deadline, true},
		{"approved", req(agentowl.StatusApproved), nil, decided, agentowl.AttentionResolved, ResolvedDecided, decided, false},
		{"denied", req(agentowl.StatusDenied), ack, decided, agentowl.AttentionResolved, ResolvedDecided, decided, false},
		{"cancelled", req(agentowl.StatusCancelled), nil, decided, agentowl.AttentionResolved, ResolvedCancelled, decided, false},
	} {
		it := approvalItem(c.r, c.ack, c.now)
		if it.Status != c.status || it.Resolution != c.resolution || !it.UpdatedAt.Equal(c.updated) || it.Expired != c.expired {
			t.Errorf("%s: status %s, resolution %q, updated %s, expired %v; want %s, %q, %s, %v", c.name,
				it.Status, it.Resolution, it.UpdatedAt, it.Expired, c.status, c.resolution, c.updated, c.expired)
		}
		if (it.ResolvedAt != nil) != (c.status == agentowl.AttentionResolved) {
			t.Errorf("%s: resolved_at %v with status %s", c.name, it.ResolvedAt, it.Status)
		}
		if (c.ack != nil) != (it.AcknowledgedAt != nil) || it.ID != "att_aap_"+c.r.ID || it.ActionDigest == "" {
			t.Errorf("%s: item %+v", c.name, it)
		}
	}
}

// TestRequestCursor: the AAP requests after an attention cursor are exactly
// those whose attention items sort after it (newest first, then by
// attention ID), whatever the cursor's ID.
func TestRequestCursor(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	reqIDs := []string{"0b6a52c4-8f4e-4c1e-9a57-2f0d4b0a8e11", "ffffffff-0000-4000-8000-000000000000", "00000000-0000-4000-8000-000000000000"}
	cursorIDs := []string{"att_aap_0b6a52c4-8f4e-4c1e-9a57-2f0d4b0a8e11", "att_aap_", "att_2abc", "att_aaa", "att_zzz", "att_aap", "att_ab",
		"", "a", "zzz", "att_aap_ffffffff", "att_aap_0"}
	after := func(c *agentowl.Cursor, created time.Time, id string) bool {
		return created.Before(c.At) || (created.Equal(c.At) && id > c.ID)
	}
	for _, cid := range cursorIDs {
		c := &agentowl.Cursor{At: at, ID: cid}
		rc := requestCursor(c)
		for _, created := range []time.Time{at.Add(-time.Microsecond), at, at.Add(time.Microsecond)} {
			for _, rid := range reqIDs {
				if want, got := after(c, created, "att_aap_"+rid), after(rc, created, rid); want != got {
					t.Errorf("cursor %q, request %s at %v: after = %v, want %v", cid, rid, created.Sub(at), got, want)
				}
			}
		}
	}
	if requestCursor(nil) != nil {
		t.Error("no cursor became one")
	}
}
