package httpapi

import (
	"net/http"
	"slices"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/access"
	"github.com/agentowl/agentowl/internal/approval"
	"github.com/agentowl/agentowl/internal/store"
	"github.com/agentowl/agentowl/internal/work"
)

// AAP approval requests in the Needs-attention inbox (docs/attention.md,
// "AAP approval requests"): each is an approval item "att_aap_<request>",
// derived at read time from the request.

// toWireAAPItem is the attention item of AAP request r at now; ack, when
// set, is its acknowledgement.
func toWireAAPItem(r *agentowl.ApprovalRequest, ack *store.AAPAck, now time.Time) wireAttention {
	out := wireAttention{ID: approval.AttentionID(r.ID), Kind: work.KindApproval, Status: string(store.AttentionOpen),
		CreatedAt: timestamp(r.CreatedAt), UpdatedAt: timestamp(r.CreatedAt),
		Request: &wireAttentionRequest{ID: r.ID, Revision: 1, Prompt: approval.AttentionPrompt(r),
			AllowedDecisions: []string{"approve", "reject"},
			Action:           &wireAction{Description: approval.ActionDescription(r), Digest: approval.ActionDigest(r)},
			ExpiresAt:        timestamp(r.DeadlineAt), Expired: !now.Before(r.DeadlineAt)}}
	a := toWireApproval(r)
	out.ApprovalRequest = &a
	if ack != nil {
		out.Assignee, out.AcknowledgedAt, out.UpdatedAt = ack.Assignee, timestampPtr(&ack.At), timestamp(ack.At)
		out.Status = string(store.AttentionAcknowledged)
	}
	if st := r.EffectiveStatus(now); st != agentowl.StatusPending {
		out.Status = string(store.AttentionResolved)
		at := r.DeadlineAt
		if r.Decision != nil {
			at = r.Decision.DecidedAt
		}
		switch st {
		case agentowl.StatusExpired:
			out.Resolution = work.ResolvedExpired
		case agentowl.StatusCancelled:
			out.Resolution = "cancelled"
		default:
			out.Resolution = "decided"
		}
		out.ResolvedAt, out.UpdatedAt = timestampPtr(&at), timestamp(at)
	}
	return out
}

// aapRequestID returns the AAP request ID of attention item id, if it is one.
func aapRequestID(id string) (string, bool) { return approval.AttentionRequestID(id) }

// listAAPAttention adds the tenant's pending AAP requests to the items of a
// listing (newest first, at most limit) when the filter admits them: status
// open (not acknowledged), acknowledged, or none, and no work filter.
func (s *Server) listAAPAttention(r *http.Request, p *access.Principal, st store.AttentionStatus, limit int, items []*work.AttentionView) ([]wireAttention, error) {
	type row struct {
		at time.Time
		w  wireAttention
	}
	rows := make([]row, 0, len(items))
	for _, v := range items {
		rows = append(rows, row{v.Item.CreatedAt, toWireAttention(v)})
	}
	if (st == "" || st == store.AttentionOpen || st == store.AttentionAcknowledged) && r.URL.Query().Get("work") == "" {
		m, err := s.tenant(r, p, agentowl.RoleMember)
		if err != nil {
			return nil, err
		}
		now := s.clock.Now()
		reqs, err := s.approval.ListRequests(r.Context(), m.TenantID,
			store.RequestListParams{Status: agentowl.StatusPending, Limit: limit})
		if err != nil {
			return nil, err
		}
		ids := make([]string, len(reqs))
		for i, q := range reqs {
			ids[i] = q.ID
		}
		acks, err := s.approval.Acks(r.Context(), ids)
		if err != nil {
			return nil, err
		}
		for _, q := range reqs {
			ack := acks[q.ID]
			if q.EffectiveStatus(now) != agentowl.StatusPending || (st == store.AttentionOpen && ack != nil) ||
				(st == store.AttentionAcknowledged && ack == nil) {
				continue
			}
			rows = append(rows, row{q.CreatedAt, toWireAAPItem(q, ack, now)})
		}
		slices.SortStableFunc(rows, func(a, b row) int { return b.at.Compare(a.at) })
	}
	if limit > 0 && len(rows) > limit {
		rows = rows[:limit]
	}
	out := make([]wireAttention, len(rows))
	for i, x := range rows {
		out[i] = x.w
	}
	return out, nil
}

func (s *Server) inspectAAPAttention(r *http.Request, p *access.Principal, reqID string) (int, any, error) {
	m, err := s.tenant(r, p, agentowl.RoleMember)
	if err != nil {
		return 0, nil, err
	}
	q, err := s.approval.TenantRequest(r.Context(), m.TenantID, reqID)
	if agentowl.ErrorCode(err) == agentowl.ECodeNotFound {
		err = agentowl.Errorf(agentowl.ECodeNotFound, "No attention item %q is available to this credential.", r.PathValue("id"))
	}
	if err != nil {
		return 0, nil, err
	}
	acks, err := s.approval.Acks(r.Context(), []string{q.ID})
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, toWireAAPItem(q, acks[q.ID], s.clock.Now()), nil
}

func (s *Server) ackAAPAttention(r *http.Request, p *access.Principal, reqID, assignee string) (int, any, error) {
	m, err := s.tenant(r, p, agentowl.RoleMember)
	if err != nil {
		return 0, nil, err
	}
	q, ack, err := s.approval.AckAttention(r.Context(), p, m.TenantID, reqID, assignee)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, toWireAAPItem(q, ack, s.clock.Now()), nil
}

func (s *Server) decideAAPAttention(r *http.Request, p *access.Principal, reqID string, in *work.DecisionInput, submit bool) (int, any, error) {
	m, err := s.tenant(r, p, agentowl.RoleMember)
	if err != nil {
		return 0, nil, err
	}
	res, err := s.approval.DecideAttention(r.Context(), p, m.TenantID, reqID, approval.AttentionDecision{
		DecisionID: in.DecisionID, RequestRevision: in.RequestRevision, Decision: in.Decision,
		ExpectedActionDigest: in.ExpectedActionDigest, HasAnswer: in.Answer != ""}, submit)
	if err != nil {
		return 0, nil, err
	}
	status := http.StatusCreated
	if res.Preview || res.Replay {
		status = http.StatusOK
	}
	return status, wireDecideResult{Attention: toWireAAPItem(res.Request, nil, s.clock.Now()), Preview: res.Preview, Replay: res.Replay,
		ApprovalRequest: toWireRequest(res.Request)}, nil
}
