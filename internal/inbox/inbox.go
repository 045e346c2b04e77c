// Package inbox is the Needs-attention inbox (docs/attention.md) in one
// place: the attention items of agent work (runtime requests and incidents,
// kept by internal/work) and the pending AAP approval requests (kept by
// internal/approval) in one list, with the rules that derive an approval
// request's item and its status. HTTP and the CLI only translate.
package inbox

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/access"
	"github.com/agentowl/agentowl/internal/approval"
	"github.com/agentowl/agentowl/internal/work"
)

// Service is the inbox's use-cases.
type Service struct {
	work     *work.Service
	approval *approval.Service
	clock    agentowl.Clock
}

// New returns the inbox over agent work w and the AAP provider a.
func New(w *work.Service, a *approval.Service, clock agentowl.Clock) *Service {
	return &Service{work: w, approval: a, clock: clock}
}

// Item is one entry of the inbox: exactly one of Work and Approval is set.
type Item struct {
	// Work is a runtime request or an incident of agent work.
	Work *work.AttentionView
	// Approval is an AAP approval request.
	Approval *ApprovalItem
}

// Cursor is the item's position in a list: its creation and attention ID.
func (it *Item) Cursor() agentowl.Cursor {
	if it.Approval != nil {
		return agentowl.Cursor{At: it.Approval.CreatedAt, ID: it.Approval.ID}
	}
	return agentowl.Cursor{At: it.Work.Item.CreatedAt, ID: it.Work.Item.ID}
}

// ApprovalItem is the item of an AAP approval request, derived at read time
// from the request and its acknowledgement: "att_aap_<request>", kind
// approval, revision 1, decisions approve or reject.
type ApprovalItem struct {
	ID      string
	Request *agentowl.ApprovalRequest
	// Status is open, acknowledged (assigned, still pending) or resolved
	// (decided, cancelled or expired: Resolution says which).
	Status         agentowl.AttentionStatus
	Resolution     string
	Assignee       string
	AcknowledgedAt *time.Time
	ResolvedAt     *time.Time
	CreatedAt      time.Time
	UpdatedAt      time.Time
	// The request as the inbox shows it.
	Prompt            string
	AllowedDecisions  []string
	ActionDescription string
	ActionDigest      string
	ExpiresAt         time.Time
	// Expired is true once the request's deadline has passed, whether or
	// not its expiry has been recorded.
	Expired bool
}

// Resolutions of approval items; work items use work's (work.Resolved…).
const (
	ResolvedDecided   = "decided"
	ResolvedCancelled = "cancelled"
)

// approvalItem is the item of AAP request r at now; ack, when set, is its
// acknowledgement. A request that is no longer pending is resolved, at its
// decision or else its deadline.
func approvalItem(r *agentowl.ApprovalRequest, ack *agentowl.AAPAck, now time.Time) *ApprovalItem {
	it := &ApprovalItem{ID: approval.AttentionID(r.ID), Request: r, Status: agentowl.AttentionOpen,
		CreatedAt: r.CreatedAt, UpdatedAt: r.CreatedAt, Prompt: approval.AttentionPrompt(r),
		AllowedDecisions: []string{"approve", "reject"}, ActionDescription: approval.ActionDescription(r),
		ActionDigest: approval.ActionDigest(r), ExpiresAt: r.DeadlineAt, Expired: !now.Before(r.DeadlineAt)}
	if ack != nil {
		at := ack.At
		it.Assignee, it.AcknowledgedAt, it.UpdatedAt = ack.Assignee, &at, at
		it.Status = agentowl.AttentionAcknowledged
	}
	if st := r.EffectiveStatus(now); st != agentowl.StatusPending {
		it.Status = agentowl.AttentionResolved
		at := r.DeadlineAt
		if r.Decision != nil {
			at = r.Decision.DecidedAt
		}
		switch st {
		case agentowl.StatusExpired:
			it.Resolution = work.ResolvedExpired
		case agentowl.StatusCancelled:
			it.Resolution = ResolvedCancelled
		default:
			it.Resolution = ResolvedDecided
		}
		it.ResolvedAt, it.UpdatedAt = &at, at
	}
	return it
}

// ListParams filters a listing.
type ListParams struct {
	Status agentowl.AttentionStatus // "" for every status; agentowl.AttentionUnresolved for open and acknowledged
	WorkID string                   // only the items of this work (no approval requests then)
	// After is the cursor of the next page: the items after it in the
	// list's order (newest first, then by attention ID).
	After *agentowl.Cursor
	Limit int
}

// List lists a tenant's items, newest first (then by attention ID), at
// most params.Limit: the work items, and the pending AAP requests when the
// filter admits them (status open and not acknowledged, acknowledged,
// unresolved or none; no work filter). Members may.
func (s *Service) List(ctx context.Context, p *access.Principal, tenant string, params ListParams) ([]*Item, error) {
	views, err := s.work.ListAttention(ctx, p, tenant,
		agentowl.AttentionListParams{Status: params.Status, WorkID: params.WorkID, After: params.After, Limit: params.Limit})
	if err != nil {
		return nil, err
	}
	type row struct {
		at time.Time
		id string
		it *Item
	}
	rows := make([]row, 0, len(views))
	for _, v := range views {
		rows = append(rows, row{v.Item.CreatedAt, v.Item.ID, &Item{Work: v}})
	}
	st := params.Status
	if (st == "" || st == agentowl.AttentionOpen || st == agentowl.AttentionAcknowledged || st == agentowl.AttentionUnresolved) && params.WorkID == "" {
		now := s.clock.Now()
		reqs, err := s.approval.ListRequests(ctx, p, tenant, approval.ListFilter{Status: agentowl.StatusPending,
			After: requestCursor(params.After), Limit: params.Limit})
		if err != nil {
			return nil, err
		}
		acks, err := s.acks(ctx, reqs)
		if err != nil {
			return nil, err
		}
		for _, q := range reqs {
			ack := acks[q.ID]
			if q.EffectiveStatus(now) != agentowl.StatusPending || (st == agentowl.AttentionOpen && ack != nil) ||
				(st == agentowl.AttentionAcknowledged && ack == nil) {
				continue
			}
			rows = append(rows, row{q.CreatedAt, approval.AttentionID(q.ID), &Item{Approval: approvalItem(q, ack, now)}})
		}
		slices.SortStableFunc(rows, func(a, b row) int {
			if c := b.at.Compare(a.at); c != 0 {
				return c
			}
			return strings.Compare(a.id, b.id)
		})
	}
	if params.Limit > 0 && len(rows) > params.Limit {
		rows = rows[:params.Limit]
	}
	out := make([]*Item, len(rows))
	for i, x := range rows {
		out[i] = x.it
	}
	return out, nil
}

// requestCursor is the cursor of the AAP requests after attention cursor c.
// The list orders items by attention ID among equal times, and a request's
// is approval.AttentionPrefix and its ID: after c at c.At come the requests
// whose IDs, prefixed, sort after c.ID. That is every request at c.At when
// c.ID sorts before the prefix, none when it sorts after without starting
// with it, and otherwise those whose ID sorts after the rest of c.ID.
func requestCursor(c *agentowl.Cursor) *agentowl.Cursor {
	switch {
	case c == nil:
		return nil
	case strings.HasPrefix(c.ID, approval.AttentionPrefix):
		return &agentowl.Cursor{At: c.At, ID: strings.TrimPrefix(c.ID, approval.AttentionPrefix)}
	case c.ID < approval.AttentionPrefix:
		return &agentowl.Cursor{At: c.At, ID: ""}
	}
	// Stored times are whole microseconds: a microsecond earlier with any
	// ID leaves out every request at c.At.
	return &agentowl.Cursor{At: c.At.Add(-time.Microsecond), ID: ""}
}

// acks returns the acknowledgements of the requests reqs that have one.
func (s *Service) acks(ctx context.Context, reqs []*agentowl.ApprovalRequest) (map[string]*agentowl.AAPAck, error) {
	ids := make([]string, len(reqs))
	for i, q := range reqs {
		ids[i] = q.ID
	}
	return s.approval.Acks(ctx, ids)
}

// workItem is the item of a work view, or err.
func workItem(v *work.AttentionView, err error) (*Item, error) {
	if err != nil {
		return nil, err
	}
	return &Item{Work: v}, nil
}

// Inspect returns one item. Members may.
func (s *Service) Inspect(ctx context.Context, p *access.Principal, tenant, id string) (*Item, error) {
	reqID, ok := approval.AttentionRequestID(id)
	if !ok {
		return workItem(s.work.InspectAttention(ctx, p, tenant, id))
	}
	q, err := s.approval.TenantRequest(ctx, p, tenant, reqID)
	if agentowl.ErrorCode(err) == agentowl.ECodeNotFound && p.Membership != nil && p.Membership.TenantName == tenant {
		err = agentowl.Errorf(agentowl.ECodeNotFound, "No attention item %q in tenant %q.", id, tenant)
	}
	if err != nil {
		return nil, err
	}
	acks, err := s.acks(ctx, []*agentowl.ApprovalRequest{q})
	if err != nil {
		return nil, err
	}
	return &Item{Approval: approvalItem(q, acks[q.ID], s.clock.Now())}, nil
}

// Ack acknowledges an open item and assigns it (to assignee, or to the
// caller): it never decides, executes or resolves anything. Members may.
func (s *Service) Ack(ctx context.Context, p *access.Principal, tenant, id, assignee string) (*Item, error) {
	reqID, ok := approval.AttentionRequestID(id)
	if !ok {
		return workItem(s.work.AckAttention(ctx, p, tenant, id, assignee))
	}
	q, ack, err := s.approval.AckAttention(ctx, p, tenant, reqID, assignee)
	if err != nil {
		return nil, err
	}
	return &Item{Approval: approvalItem(q, ack, s.clock.Now())}, nil
}

// Resolve resolves an incident after review. Request items, approval
// requests among them, resolve only through their decision or outcome:
// resolving one by hand is not_a_request. Members may.
func (s *Service) Resolve(ctx context.Context, p *access.Principal, tenant, id string) (*Item, error) {
	if _, ok := approval.AttentionRequestID(id); ok {
		return nil, agentowl.Errorf(agentowl.ECodeNotARequest,
			"Attention item %q is an AAP approval request; it resolves by its decision, not by hand.", id)
	}
	return workItem(s.work.ResolveAttention(ctx, p, tenant, id))
}

// DecideResult is the outcome of Decide.
type DecideResult struct {
	// Item is the item after the decision (or as it is, for a preview).
	Item *Item
	// Preview is true when nothing was submitted; Replay when this
	// decision_id already won with this content.
	Preview, Replay bool
	// Body is the pushed decision document of a work item.
	Body json.RawMessage
	// Request is the AAP request of an approval item after the decision.
	Request *agentowl.ApprovalRequest
}

// Decide submits a decision file on a request item: a runtime request
// (work.Service.Decide) or an AAP approval request
// (approval.Service.DecideAttention), with the same refusals in the same
// order. Members may.
func (s *Service) Decide(ctx context.Context, p *access.Principal, tenant, id string, in *agentowl.DecisionFile) (*DecideResult, error) {
	return s.decide(ctx, p, tenant, id, in, true)
}

// Preview checks a decision file as Decide does, with the same refusals,
// and shows what it would record and push, without recording anything.
func (s *Service) Preview(ctx context.Context, p *access.Principal, tenant, id string, in *agentowl.DecisionFile) (*DecideResult, error) {
	return s.decide(ctx, p, tenant, id, in, false)
}

func (s *Service) decide(ctx context.Context, p *access.Principal, tenant, id string, in *agentowl.DecisionFile, submit bool) (*DecideResult, error) {
	reqID, ok := approval.AttentionRequestID(id)
	if !ok {
		res, err := s.work.Decide(ctx, p, tenant, id, in, submit)
		if err != nil {
			return nil, err
		}
		return &DecideResult{Item: &Item{Work: res.View}, Preview: res.Preview, Replay: res.Replay, Body: res.Body}, nil
	}
	res, err := s.approval.DecideAttention(ctx, p, tenant, reqID, in, submit)
	if err != nil {
		return nil, err
	}
	return &DecideResult{Item: &Item{Approval: approvalItem(res.Request, nil, s.clock.Now())}, Preview: res.Preview,
		Replay: res.Replay, Request: res.Request}, nil
}
