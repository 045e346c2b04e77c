package main

import (
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentowl/agentowl/internal/ingress/twilio"
	"github.com/agentowl/agentowl/internal/server"
)

// TestCLIConversations runs the conversation commands as docs/channels.md
// shows them, on a server without a delivery engine (handoffs stay queued,
// so an event can be linked), against SMS received through signed
// webhooks.
func TestCLIConversations(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s site) {
		srv := s.startWith(t, nil, func(cfg *server.Config) { cfg.NoDelivery = true })
		admin, op := s.operator(t, srv)
		ep := cliJSON(t, runCLI(t, "--json", "endpoints", "create", "--tenant", "default", "--name", "rt", "--url",
			"https://runtime.example.com/events", "--agent-work", "--api-url", srv.url, "--token", admin))
		const token = "0123456789abcdef0123456789abcdef"
		tokenFile := filepath.Join(t.TempDir(), "auth-token")
		if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		b := cliJSON(t, op("--json", "bindings", "create", "--tenant", "default", "--channel", "sms", "--endpoint", ep["id"].(string),
			"--auth-token-file", tokenFile))
		ingressURL := b["ingress_url"].(string)
		sms := func(sid, from, body string) {
			t.Helper()
			form := url.Values{"MessageSid": {sid}, "From": {from}, "To": {"+15550000000"}, "Body": {body}, "SmsStatus": {"received"}}
			req, err := http.NewRequest(http.MethodPost, ingressURL, strings.NewReader(form.Encode()))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", twilio.ContentType)
			req.Header.Set(twilio.HeaderSignature, twilio.Signature([]byte(token), ingressURL, form))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			answer, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || string(answer) != twilio.EmptyResponse {
				t.Fatalf("SMS %s: %d %s", sid, resp.StatusCode, answer)
			}
		}
		sms("SM1", "+15551230001", "my order is late")
		sms("SM2", "+15551230002", "same order, other phone")

		header, rows := parseTable(t, op("conversations", "list", "--tenant", "default", "--channel", "sms").ok(t))
		expectHeader(t, "conversations list", header, "ID", "CHANNEL", "KEY", "STATUS", "LAST", "EVENT", "BINDING")
		if len(rows) != 2 {
			t.Fatalf("conversations list rows %q", rows)
		}
		byKey := map[string]string{}
		for _, r := range rows {
			byKey[r[2]] = r[0]
		}
		first, second := byKey["+15551230001"], byKey["+15551230002"]
		if first == "" || second == "" {
			t.Fatalf("conversations by number: %v", byKey)
		}
		if _, rows := parseTable(t, op("conversations", "list", "--tenant", "default", "--binding", b["id"].(string), "--limit", "1").ok(t)); len(rows) != 2 ||
			!strings.HasPrefix(strings.Join(rows[1], " "), "(more: agentowl conversations list --after ") {
			t.Errorf("a page of one: %q", rows)
		}

		out := op("conversations", "events", first).ok(t)
		header, rows = parseTable(t, out)
		expectHeader(t, "conversations events", header, "RECEIVED", "EVENT", "SENDER", "HANDOFF", "WORK", "CONTENT")
		if len(rows) != 1 || rows[0][2] != "+15551230001" || rows[0][3] != "queued" || !strings.Contains(out, "my order is late") {
			t.Fatalf("conversations events:\n%s", out)
		}
		moved := itemsOf(t, cliJSON(t, op("--json", "conversations", "events", second)))[0]["id"].(string)

		out = op("conversations", "link", moved, first).ok(t)
		if !strings.Contains(out, "Linked event "+moved+" into conversation "+first+" (from "+second+", now ended)") {
			t.Errorf("conversations link printed:\n%s", out)
		}
		if _, rows := parseTable(t, op("conversations", "events", first, "--all").ok(t)); len(rows) != 2 {
			t.Errorf("after the link, events rows %q", rows)
		}
		op("conversations", "link", moved, second).failed(t, "conversation_ended")

		op("conversations", "reset", first).failed(t, "open_work")
		out = op("conversations", "reset", first, "--force").ok(t)
		if !strings.Contains(out, "Reset conversation "+first) || !strings.Contains(out, "2 work not ended goes on") {
			t.Errorf("conversations reset printed:\n%s", out)
		}
		insp := cliJSON(t, op("--json", "conversations", "inspect", first))
		if insp["status"] != "ended" || insp["events"] != float64(2) || insp["key"] != "+15551230001" {
			t.Errorf("conversations inspect = %v", insp)
		}
		if out := op("conversations", "inspect", first).ok(t); !strings.Contains(out, "status:") || !strings.Contains(out, "ended") {
			t.Errorf("conversations inspect printed:\n%s", out)
		}
		op("conversations", "inspect", "conv_nope").failed(t, "not_found")
		// The next message from that number starts a new conversation.
		sms("SM3", "+15551230001", "hello again")
		if n := len(itemsOf(t, cliJSON(t, op("--json", "conversations", "list", "--status", "open")))); n != 1 {
			t.Errorf("%d open conversations after the reset, want 1", n)
		}
	})
}

// TestCLIBindingChannels creates a binding of each channel with the
// command lines docs/channels.md shows.
func TestCLIBindingChannels(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s site) {
		srv := s.start(t, nil)
		admin, op := s.operator(t, srv)
		ep := cliJSON(t, runCLI(t, "--json", "endpoints", "create", "--tenant", "default", "--name", "rt", "--url",
			"https://runtime.example.com/events", "--agent-work", "--api-url", srv.url, "--token", admin))
		epID := ep["id"].(string)

		op("domains", "add", "mail.example.com", "--tenant", "default").ok(t) // a system admin assigns the tenant its mail domain
		out := op("bindings", "create", "--tenant", "default", "--channel", "smtp", "--endpoint", epID,
			"--address", "Support@Mail.Example.com").ok(t)
		if !strings.Contains(out, "Receiving address: support@mail.example.com") || strings.Contains(out, "Ingress URL") {
			t.Errorf("bindings create --channel smtp printed:\n%s", out)
		}
		// No AGENTOWL_SMTP_DOMAIN on this server: the address is needed.
		op("bindings", "create", "--tenant", "default", "--channel", "smtp", "--endpoint", epID).failed(t, "missing_field")

		out = op("bindings", "create", "--tenant", "default", "--channel", "cloudflare-email", "--endpoint", epID).ok(t)
		if !strings.Contains(out, "Worker secret (shown once") || !strings.Contains(out, "cfe_") ||
			!strings.Contains(out, srv.url+"/in/cloudflare-email/in_") {
			t.Errorf("bindings create --channel cloudflare-email printed:\n%s", out)
		}

		tokenFile := filepath.Join(t.TempDir(), "auth-token")
		if err := os.WriteFile(tokenFile, []byte("0123456789abcdef0123456789abcdef\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		for _, ch := range []string{"sms", "voice"} {
			b := cliJSON(t, op("--json", "bindings", "create", "--tenant", "default", "--channel", ch, "--endpoint", epID,
				"--auth-token-file", tokenFile))
			if !strings.HasPrefix(b["ingress_url"].(string), srv.url+"/in/"+ch+"/in_") || strings.Contains(b["ingress_url"].(string), "0123456789abcdef") {
				t.Errorf("bindings create --channel %s = %v", ch, b)
			}
		}
		op("bindings", "create", "--tenant", "default", "--channel", "sms", "--endpoint", epID).failed(t, "missing_field")

		header, rows := parseTable(t, op("bindings", "list", "--tenant", "default").ok(t))
		expectHeader(t, "bindings list", header, "ID", "CHANNEL", "ENDPOINT", "SIGNED", "ADDRESS", "NAME")
		if len(rows) != 4 {
			t.Errorf("bindings list rows %q", rows)
		}
	})
}
