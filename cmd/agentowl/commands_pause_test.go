package main

import (
	"fmt"
	"net/smtp"
	"strings"
	"testing"
	"time"

	"github.com/agentowl/agentowl/internal/server"
)

// TestCLIPauseRelinkResume fixes a mis-threaded email as docs/channels.md
// tells operators to: pause the endpoint, link the reply into the
// conversation it belongs to, resume. While paused, mail is accepted and
// its handoffs wait (none reaches the runtime); the link works because no
// attempt has started; on resume the runtime gets both messages, in order,
// in one conversation. Without the pause the delivery engine hands the
// reply off at once and the link is refused (event_handed_off).
func TestCLIPauseRelinkResume(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s site) {
		rs := newRuntimeSink(t)
		srv := s.startWorkWith(t, certPEM(rs.srv), func(cfg *server.Config) {
			cfg.SMTP.Listen = "127.0.0.1:0"
			cfg.Ingress.SMTPDomain = "mail.example.com"
		})
		admin, op := s.operator(t, srv)
		ep := cliJSON(t, runCLI(t, "--json", "endpoints", "create", "--tenant", "default", "--name", "support", "--url", rs.srv.URL+"/events",
			"--agent-work", "--api-url", srv.url, "--token", admin))
		epID := ep["id"].(string)
		b := cliJSON(t, op("--json", "bindings", "create", "--tenant", "default", "--channel", "smtp", "--endpoint", epID))
		addr := b["address"].(string)

		out := op("endpoints", "pause", epID).ok(t)
		if !strings.Contains(out, "Paused endpoint "+epID) {
			t.Fatalf("endpoints pause printed:\n%s", out)
		}
		if insp := cliJSON(t, op("--json", "endpoints", "inspect", epID)); insp["paused_at"] == nil {
			t.Fatalf("a paused endpoint shows no paused_at: %v", insp)
		}
		mail := func(id, subject, body string) {
			t.Helper()
			msg := fmt.Sprintf("From: Dana Reyes <dana@example.org>\r\nTo: %s\r\nSubject: %s\r\nMessage-ID: <%s@example.org>\r\n\r\n%s\r\n",
				addr, subject, id, body)
			if err := smtp.SendMail(srv.m.SMTPAddr(), nil, "dana@example.org", []string{addr}, []byte(msg)); err != nil {
				t.Fatalf("send %s: %v", id, err)
			}
		}
		mail("order-1", "Refund for order 1234", "The blender arrived broken.")
		// The reply lost its In-Reply-To on the way: a new conversation.
		mail("order-1-photo", "photo", "Here is a photo of the box.")

		_, rows := parseTable(t, op("conversations", "list", "--tenant", "default", "--channel", "smtp").ok(t))
		if len(rows) != 2 {
			t.Fatalf("conversations list rows %q, want two conversations", rows)
		}
		var first, second string
		for _, r := range rows {
			events := op("conversations", "events", r[0]).ok(t)
			switch {
			case strings.Contains(events, "Refund for order 1234"):
				first = r[0]
			case strings.Contains(events, "photo"):
				second = r[0]
			}
			if !strings.Contains(events, "queued") {
				t.Errorf("while paused, conversation %s shows:\n%s", r[0], events)
			}
		}
		if first == "" || second == "" {
			t.Fatalf("conversations %q and %q", first, second)
		}
		reply := itemsOf(t, cliJSON(t, op("--json", "conversations", "events", second)))[0]["id"].(string)
		out = op("conversations", "link", reply, first).ok(t)
		if !strings.Contains(out, "Linked event "+reply+" into conversation "+first) {
			t.Fatalf("conversations link printed:\n%s", out)
		}
		if n := rs.count(); n != 0 {
			t.Fatalf("the runtime got %d handoffs while the endpoint was paused", n)
		}

		out = op("endpoints", "resume", epID).ok(t)
		if !strings.Contains(out, "Resumed endpoint "+epID) {
			t.Fatalf("endpoints resume printed:\n%s", out)
		}
		eventually(t, 20*time.Second, "both handoffs", func() bool { return rs.count() == 2 })
		rs.mu.Lock()
		docs := rs.docs
		rs.mu.Unlock()
		// Both in the conversation the operator chose. (They are claimed in
		// the order they were queued, which the store suite checks; like any
		// two handoffs they may be in flight together.)
		seen := map[string]bool{}
		for i, d := range docs {
			work, _ := d["work"].(map[string]any)
			if work["conversation_id"] != first {
				t.Errorf("handoff %d: conversation %v, want %s", i, work["conversation_id"], first)
			}
			for _, want := range []string{"blender", "photo of the box"} {
				seen[want] = seen[want] || strings.Contains(fmt.Sprint(d["event"]), want)
			}
		}
		if !seen["blender"] || !seen["photo of the box"] {
			t.Errorf("handoffs %v, want both messages", docs)
		}
		if insp := cliJSON(t, op("--json", "endpoints", "inspect", epID)); insp["paused_at"] != nil {
			t.Errorf("a resumed endpoint shows paused_at: %v", insp)
		}
		// Both moves are in the audit log.
		audit := op("audit", "list", "--tenant", "default").ok(t)
		if !strings.Contains(audit, "endpoint.pause") || !strings.Contains(audit, "endpoint.resume") {
			t.Errorf("audit list:\n%s", audit)
		}
	})
}

// TestCLIBindingHandoffDelay: a binding's handoff delay is set and shown
// by the CLI, bounded to 10 minutes.
func TestCLIBindingHandoffDelay(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s site) {
		srv := s.startWith(t, nil, func(cfg *server.Config) { cfg.NoDelivery = true })
		admin, op := s.operator(t, srv)
		ep := cliJSON(t, runCLI(t, "--json", "endpoints", "create", "--tenant", "default", "--name", "rt", "--url",
			"https://runtime.example.com/events", "--agent-work", "--api-url", srv.url, "--token", admin))
		b := cliJSON(t, op("--json", "bindings", "create", "--tenant", "default", "--channel", "webhook", "--endpoint", ep["id"].(string),
			"--handoff-delay", "2m"))
		if b["handoff_delay_seconds"] != 120.0 {
			t.Fatalf("bindings create = %v, want handoff_delay_seconds 120", b)
		}
		if insp := op("bindings", "inspect", b["id"].(string)).ok(t); !strings.Contains(insp, "120") {
			t.Errorf("bindings inspect:\n%s", insp)
		}
		op("bindings", "create", "--tenant", "default", "--channel", "webhook", "--endpoint", ep["id"].(string),
			"--handoff-delay", "11m").failed(t, "invalid_field")
	})
}
