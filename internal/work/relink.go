package work

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/agentwork"
)

// Handoff states of an event, as the conversation views show them.
const (
	// HandoffRecorded: the event was stored without a handoff (a lifecycle
	// event recorded only), or its endpoint was gone.
	HandoffRecorded = "recorded"
	// HandoffQueued: every delivery of the event waits for its first
	// attempt; nothing of it can have reached the endpoint.
	HandoffQueued = "queued"
	// HandoffSent: an attempt of a delivery of the event has started: the
	// endpoint may have it.
	HandoffSent = "handed_off"
)

// eventMessages returns the outbox messages that deliver ev: each work's
// handoff and the original-format delivery of an endpoint without agent
// work. purged reports a handoff whose message retention already removed
// (it was delivered or ended long ago).
func eventMessages(ctx context.Context, tx agentowl.Tx, ev *agentowl.Event) (msgs []*agentowl.OutboxMessage, works []*agentowl.Work, purged bool, err error) {
	if works, err = tx.WorkByEvent(ctx, ev.ID); err != nil {
		return nil, nil, false, err
	}
	for _, w := range works {
		m, err := tx.MessageGet(ctx, w.DeliveryID)
		if errors.Is(err, agentowl.ErrNotFound) {
			purged = true
			continue
		}
		if err != nil {
			return nil, nil, false, err
		}
		msgs = append(msgs, m)
	}
	plain, err := tx.MessageList(ctx, agentowl.MessageListParams{TenantID: ev.TenantID, Subject: ev.ID, Limit: 100})
	if err != nil {
		return nil, nil, false, err
	}
	for _, m := range plain {
		if m.Kind == MessageKindEvent {
			msgs = append(msgs, m)
		}
	}
	return msgs, works, purged, nil
}

// sent reports whether m may have reached its endpoint.
func sent(m *agentowl.OutboxMessage) bool {
	return m.Attempts > 0 || m.State == agentowl.MessageDelivered
}

// HandoffStateTx returns the handoff state of ev (HandoffRecorded,
// HandoffQueued or HandoffSent) and its work, oldest first.
func HandoffStateTx(ctx context.Context, tx agentowl.Tx, ev *agentowl.Event) (string, []*agentowl.Work, error) {
	msgs, works, purged, err := eventMessages(ctx, tx, ev)
	if err != nil {
		return "", nil, err
	}
	if purged {
		return HandoffSent, works, nil
	}
	state := HandoffRecorded
	for _, m := range msgs {
		if sent(m) {
			return HandoffSent, works, nil
		}
		if m.State == agentowl.MessagePending {
			state = HandoffQueued
		}
	}
	return state, works, nil
}

// RelinkTx follows an operator's link of event ev into conversation conv,
// in the caller's transaction, before ev is moved: ev's work moves to conv,
// and every delivery of ev still waiting for its first attempt is rebuilt
// to carry conv (and conv's runtime session), as if ev had arrived in it.
// Once any delivery of ev may have reached its endpoint, the event is
// event_handed_off and nothing changes: the runtime already acts on the
// conversation it was given.
func (s *Service) RelinkTx(ctx context.Context, tx agentowl.Tx, ev *agentowl.Event, conv *agentowl.Conversation) error {
	msgs, _, purged, err := eventMessages(ctx, tx, ev)
	if err != nil {
		return err
	}
	handedOff := agentowl.Errorf(agentowl.ECodeEventHandedOff,
		"Event %q was already handed off to its endpoint; only an event not yet handed off can be linked.", ev.ID)
	if purged {
		return handedOff
	}
	moved := *ev
	moved.ConversationID, moved.FollowUp = conv.ID, true
	for _, m := range msgs {
		if sent(m) {
			return handedOff
		}
		if m.State != agentowl.MessagePending {
			continue // ended unsent (its endpoint went away): never sent, nothing to rebuild
		}
		var d agentwork.Handoff
		if err := json.Unmarshal(m.Body, &d); err != nil {
			return err
		}
		d.Event = ToWireEvent(&moved)
		if d.Work != nil {
			d.Work.ConversationID, d.Work.RuntimeSessionID = conv.ID, conv.RuntimeSessionID
		}
		body, err := json.Marshal(d)
		if err != nil {
			return err
		}
		if err := tx.MessageRewrite(ctx, m.ID, body); errors.Is(err, agentowl.ErrConflict) {
			return handedOff // an attempt started meanwhile
		} else if err != nil {
			return err
		}
	}
	return tx.WorkMoveByEvent(ctx, ev.ID, conv.ID)
}
