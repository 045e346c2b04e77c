package ingress

import (
	"context"
	"slices"
	"time"

	"github.com/agentowl/agentowl"
)

// Email threading (docs/channels.md). A message continues a conversation
// when the Message-IDs it refers to (In-Reply-To and References) name
// messages that joined exactly one conversation, and:
//   - those messages were received at the same binding (so the same
//     tenant): a reply to another binding's message starts a conversation;
//   - that conversation is open (a reset ended it: the reply starts anew);
//   - the reply's sender (its From address, else the envelope sender) is a
//     participant of that conversation: an address in the From, To, Cc or
//     Reply-To of one of its messages, the binding's own address aside.
//
// A message that refers to nothing known, to messages of two or more
// conversations (ambiguous), or comes from a stranger starts a new
// conversation. Routing never depends on any of it.

// mailThread is the Thread of message m from sender, delivered to the
// binding's own addresses own.
func (s *Service) mailThread(m *Mail, sender string, own []string) Thread {
	refs := make([]string, 0, len(m.InReplyTo)+len(m.References))
	for _, id := range append(slices.Clone(m.InReplyTo), m.References...) {
		if !slices.Contains(refs, id) {
			refs = append(refs, id)
		}
	}
	return &mailThread{m: m, sender: sender, refs: refs, own: own}
}

type mailThread struct {
	m      *Mail
	sender string
	refs   []string
	own    []string
}

// OpenKey implements Thread: a reply is threaded by its references, read
// in Continue.
func (t *mailThread) OpenKey() string { return "" }

func (t *mailThread) Continue(ctx context.Context, tx agentowl.Tx, b *agentowl.Binding, _ *agentowl.Conversation, _ time.Time) (*agentowl.Conversation, error) {
	if len(t.refs) == 0 || t.sender == "" {
		return nil, nil
	}
	ids, err := tx.EmailConversations(ctx, b.TenantID, b.ID, t.refs)
	if err != nil || len(ids) != 1 {
		return nil, err // none known, or ambiguous
	}
	c, err := tx.ConversationGet(ctx, ids[0])
	if err != nil || c.Status != agentowl.ConversationOpen {
		return nil, err
	}
	if ok, err := tx.ConversationHasParticipant(ctx, c.ID, t.sender); err != nil || !ok {
		return nil, err
	}
	return c, nil
}

func (t *mailThread) Start(*agentowl.Conversation) {}

// Joined records the message's Message-ID and its addresses as
// participants.
func (t *mailThread) Joined(ctx context.Context, tx agentowl.Tx, ev *agentowl.Event, c *agentowl.Conversation) error {
	if t.m.MessageID != "" {
		if err := tx.EmailMessageCreate(ctx, &agentowl.EmailMessage{TenantID: ev.TenantID, BindingID: ev.BindingID,
			MessageID: t.m.MessageID, ConversationID: c.ID, EventID: ev.ID}); err != nil {
			return err
		}
	}
	b, err := tx.BindingGet(ctx, ev.BindingID)
	if err != nil {
		return err
	}
	seen := map[string]bool{b.Address: true, "": true}
	for _, a := range t.own {
		if norm, ok := NormalizeAddress(a); ok {
			seen[norm] = true
		}
	}
	add := func(addr string) error {
		if seen[addr] {
			return nil
		}
		seen[addr] = true
		return tx.ConversationParticipantAdd(ctx, c.ID, addr)
	}
	if err := add(t.sender); err != nil {
		return err
	}
	for _, list := range [][]MailAddress{t.m.From, t.m.To, t.m.Cc, t.m.ReplyTo} {
		for _, a := range list {
			if err := add(a.Address); err != nil {
				return err
			}
		}
	}
	return nil
}
