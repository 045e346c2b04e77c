package ingress

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/access"
	"github.com/agentowl/agentowl/internal/work"
)

// Conversations for operators (docs/channels.md): list them, inspect one,
// read its events, link an event that was not handed off yet into another
// conversation, and reset a conversation so that the next event starts a
// new one. Link and reset are audited configuration commands (admin).

// Page sizes of the conversation views.
const (
	// DefaultPageSize is a list's page size when none is asked for.
	DefaultPageSize = 100
	// MaxConversationPage bounds a page of conversations.
	MaxConversationPage = 1000
	// MaxEventPage bounds a page of events: each carries its payload
	// (up to the event size limit).
	MaxEventPage = 100
)

// ConversationFilter selects a page of a tenant's conversations.
type ConversationFilter struct {
	Channel   string // optional
	BindingID string // optional
	Status    string // optional: open or ended
	// After is the previous page's Next; nil for the first page.
	After *agentowl.Cursor
	Limit int // 1 to MaxConversationPage; 0: DefaultPageSize
}

// ConversationPage is one page of conversations, the most recently active
// first. Next, when set, is where the following page starts.
type ConversationPage struct {
	Items []*agentowl.Conversation
	Next  *agentowl.Cursor
}

// ConversationDetail is a conversation with its counts.
type ConversationDetail struct {
	*agentowl.Conversation
	Events int
	// OpenWork counts its work not ended yet (what a reset would leave
	// running).
	OpenWork int
}

// EventView is an event of a conversation with its handoff.
type EventView struct {
	*agentowl.Event
	// Handoff is work.HandoffRecorded, HandoffQueued or HandoffSent: only a
	// recorded or queued event can be linked elsewhere.
	Handoff string
	// Work is the event's work, oldest first.
	Work []*agentowl.Work
}

// EventPage is one page of a conversation's events, oldest first.
type EventPage struct {
	Items []*EventView
	Next  *agentowl.Cursor
}

func conversationNotFound(m *agentowl.Membership, id string) error {
	return agentowl.Errorf(agentowl.ECodeNotFound, "No conversation %q in tenant %q.", id, m.TenantName)
}

// tenantConversation reads a conversation of membership m.
func tenantConversation(ctx context.Context, tx agentowl.Tx, m *agentowl.Membership, id string) (*agentowl.Conversation, error) {
	c, err := tx.ConversationGet(ctx, id)
	if errors.Is(err, agentowl.ErrNotFound) || (err == nil && c.TenantID != m.TenantID) {
		return nil, conversationNotFound(m, id)
	}
	return c, err
}

func pageLimit(n, most int) (int, error) {
	if n == 0 {
		return min(DefaultPageSize, most), nil
	}
	if n < 1 || n > most {
		return 0, agentowl.FieldError(agentowl.ECodeInvalidField, "limit", "limit must be between 1 and %d.", most)
	}
	return n, nil
}

// ListConversations lists a page of the tenant's conversations, the most
// recently active first. Members may. A conversation that receives an
// event while an operator pages moves to the front: it may be missing
// from the later pages, and is on the first page again.
func (s *Service) ListConversations(ctx context.Context, p *access.Principal, tenant string, f ConversationFilter) (*ConversationPage, error) {
	m, err := p.Tenant(tenant, agentowl.RoleMember)
	if err != nil {
		return nil, err
	}
	if f.Channel != "" && !slices.Contains(Channels, f.Channel) {
		return nil, agentowl.FieldError(agentowl.ECodeInvalidField, "channel", "channel must be one of %s.", strings.Join(Channels, ", "))
	}
	if f.Status != "" && f.Status != agentowl.ConversationOpen && f.Status != agentowl.ConversationEnded {
		return nil, agentowl.FieldError(agentowl.ECodeInvalidField, "status", "status must be open or ended.")
	}
	limit, err := pageLimit(f.Limit, MaxConversationPage)
	if err != nil {
		return nil, err
	}
	var cs []*agentowl.Conversation
	err = s.store.Read(ctx, func(tx agentowl.Tx) (err error) {
		cs, err = tx.ConversationList(ctx, agentowl.ConversationListParams{TenantID: m.TenantID, Channel: f.Channel,
			BindingID: f.BindingID, Status: f.Status, After: f.After, Limit: limit + 1})
		return err
	})
	if err != nil {
		return nil, err
	}
	page := &ConversationPage{Items: cs}
	if len(cs) > limit {
		page.Items = cs[:limit]
		last := page.Items[limit-1]
		page.Next = &agentowl.Cursor{At: last.LastEventAt, ID: last.ID}
	}
	return page, nil
}

// InspectConversation returns a conversation of the tenant with its
// counts. Members may.
func (s *Service) InspectConversation(ctx context.Context, p *access.Principal, tenant, id string) (*ConversationDetail, error) {
	m, err := p.Tenant(tenant, agentowl.RoleMember)
	if err != nil {
		return nil, err
	}
	var d ConversationDetail
	err = s.store.Read(ctx, func(tx agentowl.Tx) (err error) {
		if d.Conversation, err = tenantConversation(ctx, tx, m, id); err != nil {
			return err
		}
		if d.Events, err = tx.EventCountByConversation(ctx, id); err != nil {
			return err
		}
		d.OpenWork, err = tx.WorkCountOpen(ctx, id)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &d, nil
}

// ConversationEvents lists a page of a conversation's events, oldest
// first, each with its handoff state and work. Members may.
func (s *Service) ConversationEvents(ctx context.Context, p *access.Principal, tenant, id string, after *agentowl.Cursor, limit int) (*EventPage, error) {
	m, err := p.Tenant(tenant, agentowl.RoleMember)
	if err != nil {
		return nil, err
	}
	if limit, err = pageLimit(limit, MaxEventPage); err != nil {
		return nil, err
	}
	page := &EventPage{}
	err = s.store.Read(ctx, func(tx agentowl.Tx) error {
		if _, err := tenantConversation(ctx, tx, m, id); err != nil {
			return err
		}
		evs, err := tx.EventList(ctx, agentowl.EventListParams{ConversationID: id, After: after, Limit: limit + 1})
		if err != nil {
			return err
		}
		if len(evs) > limit {
			evs = evs[:limit]
			page.Next = &agentowl.Cursor{At: evs[limit-1].ReceivedAt, ID: evs[limit-1].ID}
		}
		for _, ev := range evs {
			v := &EventView{Event: ev}
			if v.Handoff, v.Work, err = work.HandoffStateTx(ctx, tx, ev); err != nil {
				return err
			}
			page.Items = append(page.Items, v)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return page, nil
}

// Linked is the outcome of a link.
type Linked struct {
	Event *agentowl.Event
	// From is the conversation the event left; it ended if no event was
	// left in it.
	From *agentowl.Conversation
	To   *agentowl.Conversation
}

// LinkEvent moves an event of the tenant into conversation to, of the same
// binding and open, as if it had arrived in it: its work and any handoff
// not attempted yet carry the new conversation (and its runtime session).
// Only before the event is handed off: after any delivery attempt of it,
// event_handed_off. A conversation left without events ends. Linking an
// event into its own conversation changes nothing. Admin only; audited.
func (s *Service) LinkEvent(ctx context.Context, p *access.Principal, tenant, eventID, to string) (*Linked, error) {
	m, err := p.Tenant(tenant, agentowl.RoleAdmin)
	if err != nil {
		return nil, err
	}
	var out Linked
	err = s.store.Write(ctx, func(tx agentowl.Tx) error {
		ev, err := tx.EventGet(ctx, eventID)
		if errors.Is(err, agentowl.ErrNotFound) || (err == nil && ev.TenantID != m.TenantID) {
			return agentowl.Errorf(agentowl.ECodeNotFound, "No event %q in tenant %q.", eventID, m.TenantName)
		}
		if err != nil {
			return err
		}
		target, err := tenantConversation(ctx, tx, m, to)
		if err != nil {
			return err
		}
		if out.From, err = tx.ConversationGet(ctx, ev.ConversationID); err != nil {
			return err
		}
		out.Event, out.To = ev, target
		if ev.ConversationID == target.ID {
			return nil
		}
		if target.BindingID != ev.BindingID {
			return agentowl.Errorf(agentowl.ECodeBindingMismatch,
				"Conversation %q belongs to another binding than event %q: routing follows the binding, so an event joins conversations of its own binding only.",
				target.ID, ev.ID)
		}
		if target.Status != agentowl.ConversationOpen {
			return agentowl.Errorf(agentowl.ECodeConversationEnded, "Conversation %q has ended; it takes no more events.", target.ID)
		}
		if err := s.work.RelinkTx(ctx, tx, ev, target); err != nil {
			return err
		}
		if err := tx.EventMove(ctx, ev.ID, target.ID, true); err != nil {
			return err
		}
		ev.ConversationID, ev.FollowUp = target.ID, true
		if err := s.joinMailThread(ctx, tx, ev, target); err != nil {
			return err
		}
		if ev.ReceivedAt.After(target.LastEventAt) {
			if err := tx.ConversationTouch(ctx, target.ID, ev.ReceivedAt); err != nil {
				return err
			}
			target.LastEventAt = ev.ReceivedAt
		}
		now := s.clock.Now()
		left, err := tx.EventCountByConversation(ctx, out.From.ID)
		if err != nil {
			return err
		}
		if left == 0 && agentowl.ConversationStatus(out.From.Status).CanBecome(agentowl.ConversationEnded) {
			if err := tx.ConversationEnd(ctx, out.From.ID, now); err != nil {
				return err
			}
			out.From.Status, out.From.EndedAt = agentowl.ConversationEnded, &now
		}
		return access.Audit(ctx, tx, now, m.TenantID, p, "conversation.link", "event:"+ev.ID,
			map[string]any{"from": out.From.ID, "to": target.ID, "from_ended": left == 0})
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// joinMailThread makes an email event linked into c part of c's thread:
// its addresses become c's participants (its Message-ID moved with the
// event, EventMove), so that replies to it continue c.
func (s *Service) joinMailThread(ctx context.Context, tx agentowl.Tx, ev *agentowl.Event, c *agentowl.Conversation) error {
	if ev.Channel != ChannelSMTP && ev.Channel != ChannelCloudflareEmail {
		return nil
	}
	var p mailPayload
	if err := json.Unmarshal(ev.Payload, &p); err != nil {
		return err
	}
	// No MessageID: Joined would record it anew; the record moved instead.
	m := &Mail{From: p.From, To: p.To, Cc: p.Cc, ReplyTo: p.ReplyTo}
	return s.mailThread(m, ev.Sender, p.Envelope.To).Joined(ctx, tx, ev, c)
}

// ResetConversation ends a conversation of the tenant: its session is
// over, and the next event of its thread (the same key, number or call)
// starts a new conversation without the runtime session. Refused with
// open_work while work of it has not ended, unless force; forced, that
// work goes on and reports as before. An ended conversation is
// conversation_ended. Admin only; audited.
func (s *Service) ResetConversation(ctx context.Context, p *access.Principal, tenant, id string, force bool) (*ConversationDetail, error) {
	m, err := p.Tenant(tenant, agentowl.RoleAdmin)
	if err != nil {
		return nil, err
	}
	var d ConversationDetail
	err = s.store.Write(ctx, func(tx agentowl.Tx) error {
		c, err := tenantConversation(ctx, tx, m, id)
		if err != nil {
			return err
		}
		if !agentowl.ConversationStatus(c.Status).CanBecome(agentowl.ConversationEnded) {
			return agentowl.Errorf(agentowl.ECodeConversationEnded, "Conversation %q has already ended.", c.ID)
		}
		if d.OpenWork, err = tx.WorkCountOpen(ctx, c.ID); err != nil {
			return err
		}
		if d.OpenWork > 0 && !force {
			return agentowl.Errorf(agentowl.ECodeOpenWork,
				"Conversation %q has %d work not ended; reset it with force to end the session anyway.", c.ID, d.OpenWork)
		}
		if d.Events, err = tx.EventCountByConversation(ctx, c.ID); err != nil {
			return err
		}
		now := s.clock.Now()
		if err := tx.ConversationEnd(ctx, c.ID, now); err != nil {
			return err
		}
		c.Status, c.EndedAt = agentowl.ConversationEnded, &now
		d.Conversation = c
		return access.Audit(ctx, tx, now, m.TenantID, p, "conversation.reset", "conversation:"+c.ID,
			map[string]any{"force": force, "open_work": d.OpenWork})
	})
	if err != nil {
		return nil, err
	}
	return &d, nil
}
