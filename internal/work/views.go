package work

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/access"
)

// The operator views keep three statuses apart: the delivery
// acknowledgement (HTTP, from the outbox), the runtime's progress or
// outcome (callbacks) and the human decision receipt (the runtime accepted
// an answer or approval: by push or through the recovery route). None is
// inferred from another (docs/agent-work-concepts.md).

// Summary is work with the state of its handoff delivery.
type Summary struct {
	Work *agentowl.Work
	// Handoff is the handoff message; nil once retention purged it.
	Handoff *agentowl.OutboxMessage
	// Decisions are the human decisions on the work's requests with their
	// receipts (inspection only).
	Decisions []*agentowl.WorkDecision
}

// TimelineCallbacks is how many of a work's latest callbacks its detail
// lists; older ones are counted in Detail.CallbacksOmitted.
const TimelineCallbacks = 500

// Detail is work with its history.
type Detail struct {
	Summary
	Attempts  []*agentowl.Attempt
	Callbacks []*agentowl.Callback
	// CallbacksOmitted counts recorded callbacks older than those listed.
	CallbacksOmitted int
	Timeline         []TimelineEntry
}

// Timeline entry kinds.
const (
	EntryHandoff  = "handoff"          // the work and its delivery were committed
	EntryAttempt  = "delivery_attempt" // one HTTP attempt of the handoff
	EntryCallback = "callback"         // one recorded runtime callback
)

// TimelineEntry is one moment of a work's history, oldest first.
type TimelineEntry struct {
	At       time.Time
	Kind     string
	Attempt  *agentowl.Attempt
	Callback *agentowl.Callback
	// Quiet marks routine progress (running callbacks): recorded, shown on
	// request, never a reason to notify anyone.
	Quiet bool
}

// ParseStatus validates a work status filter.
func ParseStatus(v string) (agentowl.WorkStatus, error) {
	st := agentowl.WorkStatus(v)
	if v == "" || st == agentowl.WorkPending || slices.Contains(reportable, st) {
		return st, nil
	}
	return "", agentowl.FieldError(agentowl.ECodeInvalidField, "status",
		"status must be pending, accepted, running, needs_input, completed, failed or cancelled.")
}

// ListFilter narrows ListWork; the zero value lists all of a tenant's work.
type ListFilter struct {
	Status         agentowl.WorkStatus // optional
	EndpointID     string              // optional
	ConversationID string              // optional
	After          *agentowl.Cursor    // optional: the next page
	Limit          int
}

// ListWork lists a tenant's work, newest first, each with its delivery
// state. Members may.
func (s *Service) ListWork(ctx context.Context, p *access.Principal, tenant string, f ListFilter) ([]*Summary, error) {
	m, err := p.Tenant(tenant, agentowl.RoleMember)
	if err != nil {
		return nil, err
	}
	params := agentowl.WorkListParams{TenantID: m.TenantID, Status: f.Status, EndpointID: f.EndpointID,
		ConversationID: f.ConversationID, After: f.After, Limit: f.Limit}
	var out []*Summary
	err = s.store.Read(ctx, func(tx agentowl.Tx) error {
		ws, err := tx.WorkList(ctx, params)
		if err != nil {
			return err
		}
		for _, w := range ws {
			sum := &Summary{Work: w}
			if sum.Handoff, err = handoffMessage(ctx, tx, w); err != nil {
				return err
			}
			out = append(out, sum)
		}
		return nil
	})
	return out, err
}

// handoffMessage is the outbox message that hands w over, nil once purged.
func handoffMessage(ctx context.Context, tx agentowl.Tx, w *agentowl.Work) (*agentowl.OutboxMessage, error) {
	msg, err := tx.MessageGet(ctx, w.DeliveryID)
	if errors.Is(err, agentowl.ErrNotFound) {
		return nil, nil
	}
	return msg, err
}

// InspectWork returns one work of the tenant with its delivery attempts,
// callbacks (stale ones marked) and timeline. Members may.
func (s *Service) InspectWork(ctx context.Context, p *access.Principal, tenant, id string) (*Detail, error) {
	d, err := access.ReadAs(ctx, s.store, p, tenant, agentowl.RoleMember, func(tx agentowl.Tx, m *agentowl.Membership) (*Detail, error) {
		w, err := tenantWork(ctx, tx, m, id)
		if err != nil {
			return nil, err
		}
		d := &Detail{}
		d.Work = w
		if d.Handoff, err = handoffMessage(ctx, tx, w); err != nil {
			return nil, err
		}
		if d.Handoff != nil {
			if d.Attempts, err = tx.AttemptList(ctx, w.DeliveryID); err != nil {
				return nil, err
			}
		}
		if d.Decisions, err = tx.WorkDecisionList(ctx, w.ID); err != nil {
			return nil, err
		}
		d.Callbacks, err = tx.CallbackList(ctx, w.ID, TimelineCallbacks)
		d.CallbacksOmitted = max(w.Callbacks-len(d.Callbacks), 0)
		return d, err
	})
	if err != nil {
		return nil, err
	}
	d.Timeline = append(d.Timeline, TimelineEntry{At: d.Work.CreatedAt, Kind: EntryHandoff})
	for _, a := range d.Attempts {
		d.Timeline = append(d.Timeline, TimelineEntry{At: a.StartedAt, Kind: EntryAttempt, Attempt: a})
	}
	for _, c := range d.Callbacks {
		d.Timeline = append(d.Timeline, TimelineEntry{At: c.RecordedAt, Kind: EntryCallback, Callback: c,
			Quiet: c.Status == agentowl.WorkRunning})
	}
	slices.SortStableFunc(d.Timeline, func(a, b TimelineEntry) int { return a.At.Compare(b.At) })
	return d, nil
}
