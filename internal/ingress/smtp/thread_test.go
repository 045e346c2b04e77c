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
		// Each message, found later by its subject, continues the
		// conversation of the message with subject joins, or else starts
		// a new one apart from the conversations of the subjects apart.
		type step struct {
			what  string
			m     mail
			joins string
			apart []string
		}
		delivered := map[string]*agentowl.Event{"first": first}
		run := func(steps []step) {
			t.Helper()
			for _, s := range steps {
				ev := e.deliver(t, s.m.to, s.m)
				delivered[s.m.subject] = ev
				if want := delivered[s.joins]; s.joins != "" && (ev.ConversationID != want.ConversationID || !ev.FollowUp) {
					t.Errorf("%s: conversation %s (follow-up %v), want %s", s.what, ev.ConversationID, ev.FollowUp, want.ConversationID)
				}
				for _, subject := range s.apart {
					if o := delivered[subject]; ev.ConversationID == o.ConversationID || ev.FollowUp {
						t.Errorf("%s joined conversation %s (follow-up %v); want a new one", s.what, o.ConversationID, ev.FollowUp)
					}
				}
			}
		}
		run([]step{
			{"a reply by In-Reply-To", mail{from: "alice@example.org", to: addr, subject: "reply", id: "2@example.org",
				inReplyTo: "<1@example.org>", references: "<1@example.org>"}, "first", nil},
			{"a reply by References alone, sender in another case", mail{from: "ALICE@example.org", to: addr, subject: "references only", id: "3@example.org",
				references: "<unknown@elsewhere> <2@example.org>"}, "first", nil},
			{"a reply from a Cc'd participant", mail{from: "bob@example.org", to: addr, subject: "cc replies", id: "4@example.org",
				inReplyTo: "<3@example.org>"}, "first", nil},
			{"a reply to a message AgentOwl never saw, referring to the thread", mail{from: "alice@example.org", to: addr, subject: "reply to the agent's reply", id: "5@example.org",
				inReplyTo: "<agent-reply@runtime.example>", references: "<1@example.org> <agent-reply@runtime.example>"}, "first", nil},

			{"a message without references", mail{from: "alice@example.org", to: addr, subject: "no reference", id: "6@example.org"},
				"", []string{"first"}},
			{"a reply to an unknown message", mail{from: "alice@example.org", to: addr, subject: "unknown reference", id: "7@example.org",
				inReplyTo: "<never-seen@example.org>"}, "", []string{"first", "no reference"}},
			{"a reply from a stranger", mail{from: "mallory@example.net", to: addr, subject: "stranger", id: "8@example.org",
				inReplyTo: "<1@example.org>"}, "", []string{"first"}},
			{"references to two conversations", mail{from: "alice@example.org", to: addr, subject: "ambiguous", id: "9@example.org",
				inReplyTo: "<2@example.org>", references: "<1@example.org> <6@example.org>"}, "", []string{"first", "no reference"}},
			{"a reply to another binding's message", mail{from: "alice@example.org", to: other, subject: "another binding", id: "10@example.org",
				inReplyTo: "<1@example.org>", references: "<1@example.org>"}, "", []string{"first"}},
			// The support address itself is no participant, though it was in To.
			{"a reply from the binding's own address", mail{from: addr, to: addr, subject: "from our own address", id: "11@example.org",
				inReplyTo: "<1@example.org>"}, "", []string{"first"}},
		})

		// A reset conversation takes no more replies.
		e.srv.Store().Write(t.Context(), func(tx agentowl.Tx) error {
			return tx.ConversationEnd(t.Context(), first.ConversationID, e.clock.Now())
		})
		run([]step{
			{"a reply after the reset", mail{from: "alice@example.org", to: addr, subject: "after the reset", id: "12@example.org",
				inReplyTo: "<5@example.org>"}, "", []string{"first"}},
			{"a reply in the new conversation", mail{from: "alice@example.org", to: addr, subject: "again", id: "13@example.org",
				inReplyTo: "<12@example.org>"}, "after the reset", nil},
		})

		// Routing stays authoritative: every event went to the one endpoint.
		for _, w := range e.api(http.MethodGet, "/work?limit=100", nil, http.StatusOK)["items"].([]any) {
			if w.(map[string]any)["endpoint_id"] != e.endpoint {
				t.Errorf("work went to %v", w)
			}
		}
	})
}
