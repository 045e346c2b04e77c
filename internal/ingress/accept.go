package ingress

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/ratelimit"
	"github.com/agentowl/agentowl/internal/work"
)

// The accept path every channel shares: a channel adapter finds the
// binding (Admit, AdmitAddress), checks the provider's authentication,
// parses what it received into an Inbound and calls Accept, which stores
// the event in its conversation and hands it to the binding's endpoint in
// one transaction. The channel answers its sender only after Accept
// returns: an accepted event is durable, with its handoff.

// Inbound is one message a channel received, channel-neutral, before it is
// stored.
type Inbound struct {
	// Sender names who sent it: the webhook's AgentOwl-Sender, an email's
	// envelope sender, a phone number.
	Sender string
	// Headers are what the event records and forwards of the transport's
	// headers (credentials dropped by the adapter).
	Headers map[string][]string
	// Payload is the event's body: one JSON object.
	Payload json.RawMessage
	// PayloadMarshaled reports that Payload is json.Marshal's output (the
	// adapter encoded it), so the handoff carries it without compacting it
	// again (work.EncodeEvent). False for a body received from a sender.
	PayloadMarshaled bool
	// Attachments is a JSON array describing the message's parts or media
	// links; empty means [].
	Attachments json.RawMessage
	// DedupeKey identifies the provider's retries of one message: unique
	// per binding; a second Accept with the same key stores nothing and
	// answers the first event (Duplicate). Empty: no deduplication.
	DedupeKey string
	// Thread picks the event's conversation in the accepting transaction.
	// Nil: every event starts a conversation of its own.
	Thread Thread
	// RecordOnly stores the event in its conversation without handing it
	// to the endpoint: for lifecycle events that must not become work of
	// their own (a call's ringing status).
	RecordOnly bool
	// Retention, when set, is the message's retained attachments for this
	// event: committed with it (its records replace Attachments), finished
	// after.
	Retention Retention
	// QuietFollowUp is RecordOnly for a follow-up only: an event that joins
	// an open conversation is stored without a handoff, one that starts its
	// conversation is handed off (a call's first lifecycle event).
	QuietFollowUp bool
}

// Thread is a channel's threading rule. Accept calls it inside the
// transaction that stores the event, so the conversation it picks and the
// event's membership are committed together (or not at all). Its methods
// may return agentowl.ErrConflict when a concurrent event won a uniqueness
// race: Accept then runs the whole transaction again.
type Thread interface {
	// OpenKey is the key of the open conversation Continue looks at, read
	// with the binding (agentowl.Route.Open: no round trip of its own on
	// PostgreSQL), or "" when Continue reads what it needs itself.
	OpenKey() string
	// Continue returns the open conversation of binding b that an event
	// received at now continues, or nil to start a new one. open is b's
	// open conversation of OpenKey, if any. It may end conversations it
	// finds stale (tx.ConversationEnd).
	Continue(ctx context.Context, tx agentowl.Tx, b *agentowl.Binding, open *agentowl.Conversation, now time.Time) (*agentowl.Conversation, error)
	// Start fills in the thread identity (Key) of a conversation about to
	// be created for the event.
	Start(c *agentowl.Conversation)
	// Joined runs once the event is stored in c, to record what later
	// events thread on (an email's Message-ID, its participants).
	Joined(ctx context.Context, tx agentowl.Tx, ev *agentowl.Event, c *agentowl.Conversation) error
}

// Accepted is the outcome of one inbound event.
type Accepted struct {
	EventID        string
	ConversationID string
	FollowUp       bool
	// Duplicate is true when the event's dedupe key matched an event
	// already accepted; nothing new was stored or delivered.
	Duplicate bool
	// WorkID is the work handed to an agent-work endpoint, if any.
	WorkID string
	// Recorded is true when the event was stored without a handoff
	// (RecordOnly, QuietFollowUp).
	Recorded bool
}

// noSuchAddress is the answer to an unknown, deleted or other channel's
// address: nothing tells them apart.
func noSuchAddress() error {
	return agentowl.Errorf(agentowl.ECodeNotFound, "No such ingress address.")
}

// Admit returns the live binding of channel that token addresses, taking
// one event from its rate limit. Call it before reading the event's body,
// so that an unknown address or a sender over its limit is refused without
// waiting for a body. An unknown or deleted binding, or one of another
// channel, is not_found.
func (s *Service) Admit(ctx context.Context, channel, token string) (*agentowl.Binding, error) {
	if token == "" || len(token) > 256 {
		return nil, noSuchAddress()
	}
	return s.admit(ctx, channel, func(tx agentowl.Tx) (*agentowl.Binding, error) { return tx.BindingGetByToken(ctx, hashToken(token)) })
}

// AdmitAddress is Admit for an smtp binding's email address, in any case.
func (s *Service) AdmitAddress(ctx context.Context, address string) (*agentowl.Binding, error) {
	norm, ok := NormalizeAddress(address)
	if !ok {
		return nil, noSuchAddress()
	}
	return s.admit(ctx, ChannelSMTP, func(tx agentowl.Tx) (*agentowl.Binding, error) { return tx.BindingGetByAddress(ctx, norm) })
}

func (s *Service) admit(ctx context.Context, channel string, get func(tx agentowl.Tx) (*agentowl.Binding, error)) (*agentowl.Binding, error) {
	var b *agentowl.Binding
	err := s.store.Read(ctx, func(tx agentowl.Tx) (err error) {
		b, err = get(tx)
		return err
	})
	if errors.Is(err, agentowl.ErrNotFound) || (err == nil && b.Channel != channel) {
		return nil, noSuchAddress()
	}
	if err != nil {
		return nil, err
	}
	if ok, wait := s.limiter.Allow(ctx, b.ID); !ok {
		return nil, ratelimit.Error("events for this ingress address", wait)
	}
	return b, nil
}

// Accept stores one event received at binding b (from Admit) in the
// conversation in.Thread picks and hands it to the binding's endpoint,
// committed together before it returns. Routing is authoritative: the
// binding's endpoint, nothing the event or its conversation says, decides
// where it goes. A binding deleted since it was admitted is not_found and
// stores nothing.
func (s *Service) Accept(ctx context.Context, b *agentowl.Binding, in Inbound) (*Accepted, error) {
	attachments := in.Attachments
	if len(attachments) == 0 {
		attachments = json.RawMessage(`[]`)
	}
	headers := in.Headers
	if headers == nil {
		headers = map[string][]string{}
	}
	ev := &agentowl.Event{TenantID: b.TenantID, BindingID: b.ID, Channel: b.Channel, Sender: in.Sender,
		ReceivedAt: s.clock.Now(), Headers: headers, Payload: in.Payload, Attachments: attachments, DedupeKey: in.DedupeKey}
	// The envelope's costly part is encoded here, not in the write: the
	// store's writer is serial (work.EncodeEvent).
	var enc *work.EncodedEvent
	var out *Accepted
	var err error
	if !in.RecordOnly {
		enc, err = work.EncodeEvent(ev, in.PayloadMarshaled)
	}
	if err == nil {
		// A concurrent first event with the same thread or dedupe key can
		// win the insert; the retry then finds it.
		for attempt := 0; ; attempt++ {
			out, err = s.accept(ctx, b, ev, enc, in, attempt > 0)
			if !errors.Is(err, agentowl.ErrConflict) || attempt == 2 {
				break
			}
		}
	}
	if in.Retention != nil {
		in.Retention.Finish(ctx, err == nil && !out.Duplicate)
	}
	if err != nil {
		return nil, err
	}
	if !out.Duplicate && !out.Recorded {
		s.work.Wake()
	}
	return out, nil
}

// accept is one attempt at Accept's write. A repeated dedupe key is found
// by the events' unique index: the first attempt inserts without looking
// (a provider's retry is rare, and the look is a statement, a round trip on
// PostgreSQL, on every event), and an insert that conflicts fails the
// attempt; the next one (again) looks first and answers the duplicate.
func (s *Service) accept(ctx context.Context, b *agentowl.Binding, proto *agentowl.Event, enc *work.EncodedEvent, in Inbound,
	lookFirst bool) (*Accepted, error) {
	var out *Accepted
	err := s.store.Write(ctx, func(tx agentowl.Tx) error {
		// The binding was admitted before the body was read: it may have been
		// deleted while the body arrived.
		openKey := ""
		if in.Thread != nil {
			openKey = in.Thread.OpenKey()
		}
		route, err := tx.BindingRoute(ctx, b.ID, work.ScopeCallbacks, s.clock.Now(), openKey)
		if err != nil || route.Binding.DeletedAt != nil {
			if err == nil || errors.Is(err, agentowl.ErrNotFound) {
				return noSuchAddress()
			}
			return err
		}
		if proto.DedupeKey != "" && lookFirst {
			prev, err := tx.EventGetByDedupeKey(ctx, b.ID, proto.DedupeKey)
			if err == nil {
				out = &Accepted{EventID: prev.ID, ConversationID: prev.ConversationID, FollowUp: prev.FollowUp, Duplicate: true}
				return nil
			}
			if !errors.Is(err, agentowl.ErrNotFound) {
				return err
			}
		}
		ev := *proto
		ev.ID = agentowl.NewID("evt")
		var conv *agentowl.Conversation
		if in.Thread != nil {
			c, err := in.Thread.Continue(ctx, tx, b, route.Open, ev.ReceivedAt)
			if err != nil {
				return err
			}
			if c != nil {
				conv, ev.FollowUp = c, true
				if err := tx.ConversationTouch(ctx, c.ID, ev.ReceivedAt); err != nil {
					return err
				}
			}
		}
		if conv == nil {
			conv = &agentowl.Conversation{ID: agentowl.NewID("conv"), TenantID: b.TenantID, BindingID: b.ID, Channel: b.Channel,
				Status: agentowl.ConversationOpen, CreatedAt: ev.ReceivedAt, LastEventAt: ev.ReceivedAt}
			if in.Thread != nil {
				in.Thread.Start(conv)
			}
			if err := tx.ConversationCreate(ctx, conv); err != nil {
				return err
			}
		}
		ev.ConversationID = conv.ID
		if in.Retention != nil {
			if err := in.Retention.PrepareTx(ctx, tx, &ev); err != nil {
				return err
			}
		}
		if err := tx.EventCreate(ctx, &ev); err != nil {
			return err
		}
		if in.Retention != nil {
			if err := in.Retention.RecordTx(ctx, tx); err != nil {
				return err
			}
		}
		if in.Thread != nil {
			if err := in.Thread.Joined(ctx, tx, &ev, conv); err != nil {
				return err
			}
		}
		out = &Accepted{EventID: ev.ID, ConversationID: conv.ID, FollowUp: ev.FollowUp}
		if in.RecordOnly || (in.QuietFollowUp && ev.FollowUp) {
			out.Recorded = true
			return nil
		}
		if route.Endpoint.DeletedAt != nil {
			return nil // cannot happen while the binding lives; kept, not delivered
		}
		w, err := s.work.HandoffEncodedTx(ctx, tx, route, &ev, conv, enc)
		if err != nil {
			return err
		}
		if w != nil {
			out.WorkID = w.ID
		}
		return nil
	})
	return out, err
}

// KeyThread is the threading rule of an explicit key: the event continues
// the open conversation of its binding with that key, or starts one that
// later events with the key continue. An empty key starts a conversation
// no key matches.
type KeyThread string

// OpenKey implements Thread.
func (k KeyThread) OpenKey() string { return string(k) }

// Continue implements Thread: the open conversation of the key, if any.
func (k KeyThread) Continue(_ context.Context, _ agentowl.Tx, _ *agentowl.Binding, open *agentowl.Conversation, _ time.Time) (*agentowl.Conversation, error) {
	return open, nil
}

// Start implements Thread.
func (k KeyThread) Start(c *agentowl.Conversation) { c.Key = string(k) }

// Joined implements Thread.
func (KeyThread) Joined(context.Context, agentowl.Tx, *agentowl.Event, *agentowl.Conversation) error {
	return nil
}
