package work

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/access"
)

// The operator's views of agent work's outgoing messages
// (docs/operating.md): `agentowl work-outbox` for work handoffs and decision
// pushes, `agentowl ingress-publications` for events routed to endpoints
// (with or without agent work). Both list, inspect and redrive outbox
// messages; a redrive is a new attempt series of the same message — the
// same event ID, body, work identity and decision ID — never new work.

// Queue is one of the operator's views of the outbox.
type Queue struct {
	// Name is the view's command, in messages.
	Name string
	// what names one entry in messages.
	what  string
	kinds []string
}

var (
	// WorkOutbox holds work handoffs and decision pushes.
	WorkOutbox = Queue{Name: "work-outbox", what: "outgoing job", kinds: []string{MessageKindHandoff, MessageKindDecision}}
	// IngressPublications holds the deliveries of events to the endpoints
	// their bindings route to: handoffs to agent-work endpoints, events in
	// the original format to the others.
	IngressPublications = Queue{Name: "ingress-publications", what: "publication", kinds: []string{MessageKindEvent, MessageKindHandoff}}
)

// OutboxFilter narrows a queue's list; every field is optional.
type OutboxFilter struct {
	EndpointID, EventID, BindingID, WorkID string
	State                                  agentowl.MessageState
	// OlderThan keeps messages created at least this long ago.
	OlderThan time.Duration
	Limit     int
}

// ParseMessageState validates a state filter ("" for any).
func ParseMessageState(v string) (agentowl.MessageState, error) {
	switch st := agentowl.MessageState(v); st {
	case "", agentowl.MessagePending, agentowl.MessageDelivered, agentowl.MessageFailed, agentowl.MessageCancelled:
		return st, nil
	}
	return "", agentowl.FieldError(agentowl.ECodeInvalidField, "state", "state must be pending, delivered, failed or cancelled.")
}

// OutboxEntry is one message of a queue with what it delivers.
type OutboxEntry struct {
	*agentowl.OutboxEntry
	// DecisionID is the decision a push carries.
	DecisionID string
	// Attempts and IncidentID (the open or resolved incident reporting the
	// message's failure, if any) are filled by InspectQueue.
	Attempts   []*agentowl.Attempt
	IncidentID string
}

func toEntry(e *agentowl.OutboxEntry) *OutboxEntry {
	out := &OutboxEntry{OutboxEntry: e}
	if e.Message.Kind == MessageKindDecision {
		if _, _, d, ok := parseDecisionDestination(e.Message.Destination); ok {
			out.DecisionID = d
		}
	}
	return out
}

// parseDecisionDestination splits "decision:<endpoint>/<work>/<decision>".
func parseDecisionDestination(destination string) (endpointID, workID, decisionID string, ok bool) {
	rest, found := strings.CutPrefix(destination, "decision:")
	parts := strings.SplitN(rest, "/", 3)
	if !found || len(parts) != 3 {
		return "", "", "", false
	}
	return parts[0], parts[1], parts[2], true
}

// ListQueue lists a tenant's messages of q, newest first. Members may.
func (s *Service) ListQueue(ctx context.Context, p *access.Principal, tenant string, q Queue, f OutboxFilter) ([]*OutboxEntry, error) {
	m, err := p.Tenant(tenant, agentowl.RoleMember)
	if err != nil {
		return nil, err
	}
	if f.OlderThan < 0 {
		return nil, agentowl.FieldError(agentowl.ECodeInvalidField, "older_than", "older_than must not be negative.")
	}
	params := agentowl.OutboxFindParams{TenantID: m.TenantID, Kinds: q.kinds, State: f.State, EndpointID: f.EndpointID,
		EventID: f.EventID, BindingID: f.BindingID, WorkID: f.WorkID, Limit: f.Limit}
	if f.OlderThan > 0 {
		params.CreatedBefore = s.clock.Now().Add(-f.OlderThan)
	}
	var found []*agentowl.OutboxEntry
	err = s.store.Read(ctx, func(tx agentowl.Tx) (err error) {
		found, err = tx.OutboxFind(ctx, params)
		return err
	})
	out := make([]*OutboxEntry, 0, len(found))
	for _, e := range found {
		out = append(out, toEntry(e))
	}
	return out, err
}

// queueEntry reads message id of q in membership m, or not_found: the
// message of another tenant, or of another queue, is not there.
func queueEntry(ctx context.Context, tx agentowl.Tx, m *agentowl.Membership, q Queue, id string) (*agentowl.OutboxEntry, error) {
	return ofTenant(ctx, m, q.what, id, tx.OutboxGet, func(e *agentowl.OutboxEntry) bool {
		return e.Message.TenantID == m.TenantID && slices.Contains(q.kinds, e.Message.Kind)
	})
}

// InspectQueue returns one message of q with its attempts and incident.
// Members may.
func (s *Service) InspectQueue(ctx context.Context, p *access.Principal, tenant string, q Queue, id string) (*OutboxEntry, error) {
	return access.ReadAs(ctx, s.store, p, tenant, agentowl.RoleMember, func(tx agentowl.Tx, m *agentowl.Membership) (*OutboxEntry, error) {
		e, err := queueEntry(ctx, tx, m, q, id)
		if err != nil {
			return nil, err
		}
		out := toEntry(e)
		if out.Attempts, err = tx.AttemptList(ctx, id); err != nil {
			return nil, err
		}
		it, err := tx.AttentionByMessage(ctx, id)
		if err == nil {
			out.IncidentID = it.ID
		} else if !errors.Is(err, agentowl.ErrNotFound) {
			return nil, err
		}
		return out, nil
	})
}

// Redrive starts a new attempt series of a failed or cancelled message of
// q: the same message (event ID, body bytes, work identity, decision ID),
// due now, retried for a new window — the handoff window for handoffs and
// events, up to the request's expiry for decision pushes. The incident that
// reported its failure is resolved as redriven (a new failure opens a new
// one). Refusals: already_delivered (delivered; or, for a push, the runtime
// already confirmed the decision), delivery_pending (still being
// delivered), conflict (its endpoint was deleted or has no decision URL any
// more), request_expired and already_terminal (a push whose request expired
// or whose work ended). Audited as outbox.redrive. Admins only.
func (s *Service) Redrive(ctx context.Context, p *access.Principal, tenant string, q Queue, id string) (*OutboxEntry, error) {
	var out *OutboxEntry
	err := access.WriteAs(ctx, s.store, p, tenant, agentowl.RoleAdmin, func(tx agentowl.Tx, m *agentowl.Membership) error {
		e, err := queueEntry(ctx, tx, m, q, id)
		if err != nil {
			return err
		}
		msg, now := e.Message, s.clock.Now()
		if err := redrivable(msg); err != nil {
			return err
		}
		deadline := now.Add(s.cfg.HandoffWindow)
		if msg.Kind == MessageKindDecision {
			if deadline, err = s.pushRedrivable(ctx, tx, msg, now); err != nil {
				return err
			}
		} else if err := endpointLive(ctx, tx, strings.TrimPrefix(msg.Destination, "endpoint:")); err != nil {
			return err
		}
		prev := msg.State
		redriven, err := tx.MessageRedrive(ctx, agentowl.RedriveParams{ID: id, From: []agentowl.MessageState{agentowl.MessageFailed,
			agentowl.MessageCancelled}, Now: now, DeadlineAt: deadline})
		if errors.Is(err, agentowl.ErrConflict) {
			return agentowl.Errorf(agentowl.ECodeDeliveryPending, "Message %q was redriven concurrently; it is being delivered.", id)
		}
		if err != nil {
			return err
		}
		e.Message = redriven
		out = toEntry(e)
		if err := s.closeIncidentTx(ctx, tx, id, now); err != nil {
			return err
		}
		details := map[string]any{"kind": msg.Kind, "previous_state": string(prev), "attempts": msg.Attempts,
			"redrives": redriven.Redrives, "deadline_at": rfc3339(deadline)}
		for k, v := range map[string]string{"work": e.WorkID, "event": e.EventID, "endpoint": e.EndpointID, "decision": out.DecisionID} {
			if v != "" {
				details[k] = v
			}
		}
		return access.Audit(ctx, tx, now, m.TenantID, p, "outbox.redrive", "delivery:"+id, details)
	})
	if err != nil {
		return nil, err
	}
	s.wake()
	return out, nil
}

// redrivable refuses a message that has not ended failed or cancelled.
func redrivable(msg *agentowl.OutboxMessage) error {
	switch msg.State {
	case agentowl.MessageDelivered:
		at := ""
		if msg.EndedAt != nil {
			at = " at " + rfc3339(*msg.EndedAt)
		}
		return agentowl.Errorf(agentowl.ECodeAlreadyDelivered,
			"Message %q was delivered%s (attempt %d); a redrive would only send it again. For new work on the same event, replay the work.",
			msg.ID, at, msg.Attempts)
	case agentowl.MessagePending:
		return agentowl.Errorf(agentowl.ECodeDeliveryPending,
			"Message %q is still being delivered (next attempt at %s, until %s); redrive it once it has failed.",
			msg.ID, rfc3339(msg.NextAttempt), rfc3339(msg.DeadlineAt))
	}
	return nil
}

// endpointLive refuses a redrive to an endpoint that was deleted.
func endpointLive(ctx context.Context, tx agentowl.Tx, endpointID string) error {
	ep, err := tx.EndpointGet(ctx, endpointID)
	if errors.Is(err, agentowl.ErrNotFound) || (err == nil && ep.DeletedAt != nil) {
		return agentowl.Errorf(agentowl.ECodeConflict, "Endpoint %q was deleted; there is nowhere to deliver to.", endpointID)
	}
	return err
}

// pushRedrivable checks that a decision push is still worth sending and
// returns the new series' deadline: the request's expiry, as for the first.
func (s *Service) pushRedrivable(ctx context.Context, tx agentowl.Tx, msg *agentowl.OutboxMessage, now time.Time) (time.Time, error) {
	epID, workID, decisionID, ok := parseDecisionDestination(msg.Destination)
	if !ok {
		return time.Time{}, agentowl.Errorf(agentowl.ECodeConflict, "Message %q has no decision destination.", msg.ID)
	}
	ep, err := tx.EndpointGet(ctx, epID)
	if errors.Is(err, agentowl.ErrNotFound) || (err == nil && (ep.DeletedAt != nil || ep.DecisionURL == "")) {
		return time.Time{}, agentowl.Errorf(agentowl.ECodeConflict,
			"Endpoint %q was deleted or has no decision URL any more; the runtime recovers the decision through GET /runtime/v1/work/%s/decisions.",
			epID, workID)
	}
	if err != nil {
		return time.Time{}, err
	}
	d, err := tx.WorkDecisionGet(ctx, workID, decisionID)
	if err != nil {
		return time.Time{}, err
	}
	if d.ReceiptAt != nil {
		return time.Time{}, agentowl.Errorf(agentowl.ECodeAlreadyDelivered,
			"The runtime already confirmed decision %q at %s (via %s); there is nothing to push.", decisionID, rfc3339(*d.ReceiptAt), d.ReceiptVia)
	}
	w, err := tx.WorkGet(ctx, workID)
	if err != nil {
		return time.Time{}, err
	}
	if w.Status.Terminal() {
		return time.Time{}, agentowl.Errorf(agentowl.ECodeAlreadyTerminal, "Work %q already ended (%s); a decision cannot reopen it.", workID, w.Status)
	}
	it, err := tx.AttentionGet(ctx, d.AttentionID)
	if err != nil {
		return time.Time{}, err
	}
	if it.ExpiresAt == nil || !now.Before(*it.ExpiresAt) {
		return time.Time{}, agentowl.Errorf(agentowl.ECodeRequestExpired, "Request %q expired; its decision can no longer be pushed.", it.RequestID)
	}
	return *it.ExpiresAt, nil
}

// closeIncidentTx resolves the incident that reported message id's failure
// as redriven and detaches it from the message, so that a failure of the
// new series opens an incident of its own.
func (s *Service) closeIncidentTx(ctx context.Context, tx agentowl.Tx, id string, now time.Time) error {
	it, err := tx.AttentionByMessage(ctx, id)
	if errors.Is(err, agentowl.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if it.Status.CanBecome(agentowl.AttentionResolved) {
		if err := resolveItem(ctx, tx, it, ResolvedRedriven, now); err != nil {
			return err
		}
	}
	return tx.AttentionDetachMessage(ctx, it.ID)
}
