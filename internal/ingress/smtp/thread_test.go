package smtp_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentowl/agentowl"
)

// mail is a message of a thread built in a test.
type mail struct {
	from, to, cc, subject, id, inReplyTo, references string
}

func (m mail) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "From: %s\nTo: %s\n", m.from, m.to)
	if m.cc != "" {
		fmt.Fprintf(&b, "Cc: %s\n", m.cc)
	}
	fmt.Fprintf(&b, "Subject: %s\n", m.subject)
	if m.id != "" {
		fmt.Fprintf(&b, "Message-ID: <%s>\n", m.id)
	}
	if m.inReplyTo != "" {
		fmt.Fprintf(&b, "In-Reply-To: %s\n", m.inReplyTo)
	}
	if m.references != "" {
		fmt.Fprintf(&b, "References: %s\n", m.references)
	}
	b.WriteString("\nText of " + m.subject + ".\n")
	return crlf(b.String())
}

// deliver sends m to rcpt and returns its event.
func (e *env) deliver(t *testing.T, rcpt string, m mail) *agentowl.Event {
	t.Helper()
	e.clock.Advance(time.Second)
	envFrom := m.from
	if i := strings.IndexByte(envFrom, '<'); i >= 0 {
		envFrom = strings.Trim(envFrom[i:], "<>")
	}
	if err := e.send(envFrom, []string{rcpt}, m.String()); err != nil {
		t.Fatalf("send %q: %v", m.subject, err)
	}
	return bySubject(t, e.events(), m.subject)
}

// Email threading, rule by rule: a reply (by In-Reply-To or References
// alone) from a participant continues the conversation; a missing or
// unknown reference, references to two conversations, a stranger, a reply
// to another binding's message and a reply after a reset start new ones.
func TestSMTPThreading(t *testing.T) {
	t.Parallel()
	forEachBackend(t, nil, func(t *testing.T, e *env) {
		_, addr := e.binding("support@mail.example.com")
		_, other := e.binding("sales@mail.example.com")
		first := e.deliver(t, addr, mail{from: "Alice <alice@example.org>", to: addr, cc: "bob@example.org", subject: "first", id: "1@example.org"})
		if first.FollowUp {
			t.Fatal("the first message is a follow-up")
		}
		same := func(what string, ev *agentowl.Event, want *agentowl.Event) {
			t.Helper()
			if ev.ConversationID != want.ConversationID || !ev.FollowUp {
				t.Errorf("%s: conversation %s (follow-up %v), want %s", what, ev.ConversationID, ev.FollowUp, want.ConversationID)
			}
		}
		fresh := func(what string, ev *agentowl.Event, others ...*agentowl.Event) {
			t.Helper()
			for _, o := range others {
				if ev.ConversationID == o.ConversationID || ev.FollowUp {
					t.Errorf("%s joined conversation %s (follow-up %v); want a new one", what, o.ConversationID, ev.FollowUp)
				}
			}
		}

		reply := e.deliver(t, addr, mail{from: "alice@example.org", to: addr, subject: "reply", id: "2@example.org",
			inReplyTo: "<1@example.org>", references: "<1@example.org>"})
		same("a reply by In-Reply-To", reply, first)
		refsOnly := e.deliver(t, addr, mail{from: "ALICE@example.org", to: addr, subject: "references only", id: "3@example.org",
			references: "<unknown@elsewhere> <2@example.org>"})
		same("a reply by References alone, sender in another case", refsOnly, first)
		cc := e.deliver(t, addr, mail{from: "bob@example.org", to: addr, subject: "cc replies", id: "4@example.org",
			inReplyTo: "<3@example.org>"})
		same("a reply from a Cc'd participant", cc, first)
		agentReply := e.deliver(t, addr, mail{from: "alice@example.org", to: addr, subject: "reply to the agent's reply", id: "5@example.org",
			inReplyTo: "<agent-reply@runtime.example>", references: "<1@example.org> <agent-reply@runtime.example>"})
		same("a reply to a message AgentOwl never saw, referring to the thread", agentReply, first)

		noRef := e.deliver(t, addr, mail{from: "alice@example.org", to: addr, subject: "no reference", id: "6@example.org"})
		fresh("a message without references", noRef, first)
		unknown := e.deliver(t, addr, mail{from: "alice@example.org", to: addr, subject: "unknown reference", id: "7@example.org",
			inReplyTo: "<never-seen@example.org>"})
		fresh("a reply to an unknown message", unknown, first, noRef)
		stranger := e.deliver(t, addr, mail{from: "mallory@example.net", to: addr, subject: "stranger", id: "8@example.org",
			inReplyTo: "<1@example.org>"})
		fresh("a reply from a stranger", stranger, first)
		ambiguous := e.deliver(t, addr, mail{from: "alice@example.org", to: addr, subject: "ambiguous", id: "9@example.org",
			inReplyTo: "<2@example.org>", references: "<1@example.org> <6@example.org>"})
		fresh("references to two conversations", ambiguous, first, noRef)
		elsewhere := e.deliver(t, other, mail{from: "alice@example.org", to: other, subject: "another binding", id: "10@example.org",
			inReplyTo: "<1@example.org>", references: "<1@example.org>"})
		fresh("a reply to another binding's message", elsewhere, first)
		// The support address itself is no participant, though it was in To.
		own := e.deliver(t, addr, mail{from: addr, to: addr, subject: "from our own address", id: "11@example.org", inReplyTo: "<1@example.org>"})
		fresh("a reply from the binding's own address", own, first)

		// A reset conversation takes no more replies.
		e.srv.Store().Write(t.Context(), func(tx agentowl.Tx) error {
			return tx.ConversationEnd(t.Context(), first.ConversationID, e.clock.Now())
		})
		afterReset := e.deliver(t, addr, mail{from: "alice@example.org", to: addr, subject: "after the reset", id: "12@example.org",
			inReplyTo: "<5@example.org>"})
		fresh("a reply after the reset", afterReset, first)
		again := e.deliver(t, addr, mail{from: "alice@example.org", to: addr, subject: "again", id: "13@example.org",
			inReplyTo: "<12@example.org>"})
		same("a reply in the new conversation", again, afterReset)

		// Routing stays authoritative: every event went to the one endpoint.
		for _, w := range e.api(http.MethodGet, "/work?limit=100", nil, http.StatusOK)["items"].([]any) {
			if w.(map[string]any)["endpoint_id"] != e.endpoint {
				t.Errorf("work went to %v", w)
			}
		}
	})
}
