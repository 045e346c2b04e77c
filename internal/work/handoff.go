package work

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/agentwork"
	"github.com/agentowl/agentowl/internal/access"
	"github.com/agentowl/agentowl/internal/outbox"
)

// Outbox kinds of endpoint deliveries.
const (
	// MessageKindEvent delivers an event in the original event format to an
	// endpoint without agent work.
	MessageKindEvent = "work.event"
	// MessageKindHandoff delivers an event with its work block.
	MessageKindHandoff = "work.handoff"
)

// Destination names an endpoint as a delivery destination.
func Destination(endpointID string) string { return "endpoint:" + endpointID }

// ResolveDestination is the outbox.Resolver of "endpoint:<id>"
// destinations: the endpoint's current URL and signing secret, or no target
// once the endpoint is deleted, which ends the message. While the endpoint
// is paused the target is held: no attempt starts (a handoff enqueued as
// the pause committed is held here).
func (s *Service) ResolveDestination(ctx context.Context, tx agentowl.Tx, destination string) (*outbox.Target, error) {
	id, found := strings.CutPrefix(destination, "endpoint:")
	if !found {
		return nil, nil
	}
	ep, err := tx.EndpointGet(ctx, id)
	if errors.Is(err, agentowl.ErrNotFound) {
		return nil, nil
	}
	if err != nil || ep.DeletedAt != nil {
		return nil, err
	}
	if ep.PausedAt != nil {
		return &outbox.Target{Held: true}, nil
	}
	return &outbox.Target{URL: ep.URL, Secret: string(ep.SigningSecret)}, nil
}

func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// ToWireEvent renders an event as deliveries carry it.
func ToWireEvent(ev *agentowl.Event) agentwork.Event {
	attachments := ev.Attachments
	if len(attachments) == 0 {
		attachments = json.RawMessage(`[]`)
	}
	headers := ev.Headers
	if headers == nil {
		headers = map[string][]string{}
	}
	return agentwork.Event{ID: ev.ID, Channel: ev.Channel, BindingID: ev.BindingID, ConversationID: ev.ConversationID,
		FollowUp: ev.FollowUp, Sender: ev.Sender, ReceivedAt: rfc3339(ev.ReceivedAt), Headers: headers,
		Payload: ev.Payload, Attachments: attachments}
}

// HandoffTx records, in the caller's transaction, the delivery of ev to
// ep: for an agent-work endpoint, new work of generation 1 and its handoff
// message; otherwise the message alone in the original format. The work
// is committed with its message, before any attempt, so every transport
// retry carries the same work identity. Call Wake after the commit.
func (s *Service) HandoffTx(ctx context.Context, tx agentowl.Tx, ep *agentowl.Endpoint, ev *agentowl.Event, conv *agentowl.Conversation) (*agentowl.Work, error) {
	cred, err := tx.RuntimeCredentialNewest(ctx, ep.ID, ScopeCallbacks, s.clock.Now())
	if err != nil {
		return nil, err
	}
	return s.HandoffEncodedTx(ctx, tx, &agentowl.Route{Endpoint: ep, Credential: cred}, ev, conv, nil)
}

// HandoffEncodedTx is HandoffTx for an event received at a binding whose
// route (BindingRoute with ScopeCallbacks: the endpoint, and the credential
// a work block names) the transaction has read, with ev's headers and
// payload already encoded (EncodeEvent(ev), before the transaction; nil
// encodes them here).
func (s *Service) HandoffEncodedTx(ctx context.Context, tx agentowl.Tx, route *agentowl.Route, ev *agentowl.Event, conv *agentowl.Conversation,
	enc *EncodedEvent) (*agentowl.Work, error) {
	var delay time.Duration
	if route.Binding != nil {
		delay = route.Binding.HandoffDelay
	}
	if !route.Endpoint.AgentWork {
		return nil, s.deliverTx(ctx, tx, route.Endpoint, ev, nil, enc, delay)
	}
	return s.newWorkTx(ctx, tx, route.Endpoint, route.Credential, ev, conv, 1, "", enc, delay)
}

// newWorkTx records new work for ev at ep and its handoff; its work block
// names cred, the newest live credential allowed to post callbacks (during
// rotation, the new one).
func (s *Service) newWorkTx(ctx context.Context, tx agentowl.Tx, ep *agentowl.Endpoint, cred string, ev *agentowl.Event, conv *agentowl.Conversation,
	gen int, replayOf string, enc *EncodedEvent, delay time.Duration) (*agentowl.Work, error) {
	now := s.clock.Now()
	w := &agentowl.Work{
		ID: agentowl.NewID("work"), TenantID: ev.TenantID, EndpointID: ep.ID, ConversationID: ev.ConversationID, EventID: ev.ID,
		Generation: gen, ReplayOf: replayOf, DeliveryID: agentowl.NewID(agentowl.SortedUUID), CredentialID: cred, Status: agentowl.WorkPending,
		CreatedAt: now, UpdatedAt: now,
	}
	block := &agentwork.Work{Version: agentwork.Version, WorkID: w.ID, ConversationID: w.ConversationID, Generation: gen,
		CallbackURL: s.CallbackURL(w.ID), CredentialID: cred, RuntimeSessionID: conv.RuntimeSessionID}
	if err := tx.WorkCreate(ctx, w); err != nil {
		return nil, err
	}
	return w, s.deliverTx(ctx, tx, ep, ev, &deliveryWork{work: w, block: block}, enc, delay)
}

type deliveryWork struct {
	work  *agentowl.Work
	block *agentwork.Work
}

// deliverTx writes the outbox message of one delivery. Its body is the
// agent-work handoff envelope (agentwork.Handoff, docs/agent-work.md): the
// original event format, plus the work block for agent-work endpoints. The
// bytes are fixed here, when the delivery is committed, and sent unchanged
// on every attempt. Its first attempt waits delay (the binding's handoff
// delay), or, while the endpoint is paused, until it is resumed.
func (s *Service) deliverTx(ctx context.Context, tx agentowl.Tx, ep *agentowl.Endpoint, ev *agentowl.Event, dw *deliveryWork, enc *EncodedEvent,
	delay time.Duration) error {
	now := s.clock.Now()
	d := agentwork.Handoff{ID: agentowl.NewID(agentowl.SortedUUID), Type: agentwork.EventType, CreatedAt: rfc3339(now), Event: ToWireEvent(ev)}
	kind, subject := MessageKindEvent, ev.ID
	if dw != nil {
		d.ID, d.Work, kind, subject = dw.work.DeliveryID, dw.block, MessageKindHandoff, dw.work.ID
	}
	if enc == nil {
		var err error
		if enc, err = EncodeEvent(ev, false); err != nil {
			return err
		}
	}
	body, payload, err := handoffBody(&d, enc)
	if err != nil {
		return err
	}
	var due time.Time
	switch {
	case ep.PausedAt != nil:
		due = agentowl.OutboxHeld
	case delay > 0:
		due = now.Add(delay)
	}
	_, err = outbox.Enqueue(ctx, tx, now, outbox.Message{
		ID: d.ID, TenantID: ev.TenantID, Kind: kind, Destination: Destination(ep.ID), Subject: subject, Body: body,
		Deadline: now.Add(s.cfg.HandoffWindow), Payload: payload, Due: due,
	})
	return err
}

// Replay hands an event to its endpoint again as new work: the next
// generation of that event's work, in the same conversation (with its
// runtime session, if known). The original work is unchanged. Admin only.
func (s *Service) Replay(ctx context.Context, p *access.Principal, tenant, workID string) (*agentowl.Work, error) {
	var out *agentowl.Work
	err := access.WriteAs(ctx, s.store, p, tenant, agentowl.RoleAdmin, func(tx agentowl.Tx, m *agentowl.Membership) error {
		orig, err := tenantWork(ctx, tx, m, workID)
		if err != nil {
			return err
		}
		ep, err := tx.EndpointGet(ctx, orig.EndpointID)
		if err != nil {
			return err
		}
		if ep.DeletedAt != nil {
			return agentowl.Errorf(agentowl.ECodeConflict, "Endpoint %q of this work was deleted; it cannot be replayed.", ep.ID)
		}
		if !ep.AgentWork {
			return agentowl.Errorf(agentowl.ECodeAgentWorkDisabled,
				"Endpoint %q no longer takes agent work; turn agent_work on to replay.", ep.ID)
		}
		ev, err := tx.EventGet(ctx, orig.EventID)
		if err != nil {
			return err
		}
		conv, err := tx.ConversationGet(ctx, orig.ConversationID)
		if err != nil {
			return err
		}
		gen, err := tx.WorkMaxGeneration(ctx, ev.ID, ep.ID)
		if err != nil {
			return err
		}
		cred, err := tx.RuntimeCredentialNewest(ctx, ep.ID, ScopeCallbacks, s.clock.Now())
		if err != nil {
			return err
		}
		if out, err = s.newWorkTx(ctx, tx, ep, cred, ev, conv, gen+1, orig.ID, nil, 0); err != nil {
			return err
		}
		return access.Audit(ctx, tx, out.CreatedAt, m.TenantID, p, "work.replay", "work:"+out.ID,
			map[string]any{"replay_of": orig.ID, "generation": out.Generation, "event": ev.ID})
	})
	if err != nil {
		return nil, err
	}
	s.wake()
	return out, nil
}
