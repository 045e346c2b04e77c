package main

import (
	"strings"
	"testing"

	"github.com/agentowl/agentowl/internal/server"
)

// TestCLIMailDomains tries mail domains as a new user would: a new tenant
// cannot bind anything@<a domain not its own> — the server's SMTP domain,
// another tenant's domain, an unassigned one — nor learn whether an
// address is taken (one error for all); a system admin assigns it a domain
// with `agentowl domains add`, after which its addresses there work, and
// generated addresses at the server's domain work throughout.
func TestCLIMailDomains(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s site) {
		srv := s.startWith(t, nil, func(cfg *server.Config) { cfg.Ingress.SMTPDomain = "mail.example.com" })
		_, sys := s.operator(t, srv) // an admin of the system tenant, default
		created := cliJSON(t, sys("--json", "tenants", "create", "acme"))
		acmeToken := created["admin"].(map[string]any)["token"].(string)
		acme := func(args ...string) cliResult { return srv.cli(t, acmeToken, args...) }
		endpoint := func(token, url string) string {
			return cliJSON(t, runCLI(t, "--json", "endpoints", "create", "--name", "rt", "--url", url, "--api-url", srv.url,
				"--token", token))["id"].(string)
		}
		ep := endpoint(acmeToken, "https://runtime.example.com/acme")
		epDefault := endpoint(s.adminToken(t), "https://runtime.example.com/default")
		bind := func(as func(...string) cliResult, endpoint, address string) cliResult {
			args := []string{"bindings", "create", "--channel", "smtp", "--endpoint", endpoint}
			if address != "" {
				args = append(args, "--address", address)
			}
			return as(args...)
		}

		// default's own domain, assigned by its system admin.
		out := sys("domains", "add", "Default.Example", "--tenant", "default").ok(t)
		if !strings.Contains(out, "Assigned default.example to tenant default") {
			t.Errorf("domains add printed:\n%s", out)
		}
		bind(sys, epDefault, "taken@default.example").ok(t)

		// acme, new, before any domain is its own.
		var message string
		for _, addr := range []string{"anything@mail.example.com", "anything@default.example", "taken@default.example",
			"anything@acme.example"} {
			r := bind(acme, ep, addr)
			r.failed(t, "400 invalid_field, param address")
			m, _, _ := strings.Cut(r.stderr, " (400")
			if message == "" {
				message = m
			} else if m != message {
				t.Errorf("%s: the refusal differs:\n%s\n%s", addr, m, message)
			}
		}
		out = bind(acme, ep, "").ok(t) // generated at the server's domain
		if !strings.Contains(out, "Receiving address: agent-") || !strings.Contains(out, "@mail.example.com") {
			t.Errorf("a generated address:\n%s", out)
		}

		// Only system admins manage domains.
		acme("domains", "add", "acme.example", "--tenant", "acme").failed(t, "403 forbidden")
		acme("domains", "list").failed(t, "403 forbidden")
		sys("domains", "add", "acme.example", "--tenant", "acme").ok(t)
		sys("domains", "add", "acme.example", "--tenant", "default").failed(t, "409 already_exists")
		bind(acme, ep, "Support@Acme.Example").ok(t)
		r := bind(acme, ep, "support@acme.example") // taken now, in acme's own domain
		r.failed(t, "400 invalid_field")
		if m, _, _ := strings.Cut(r.stderr, " (400"); m != message {
			t.Errorf("a taken address of its own: the refusal differs:\n%s\n%s", m, message)
		}

		header, rows := parseTable(t, sys("domains", "list").ok(t))
		expectHeader(t, "domains list", header, "DOMAIN", "TENANT", "CREATED")
		if len(rows) != 2 || rows[0][0] != "acme.example" || rows[0][1] != "acme" || rows[1][0] != "default.example" {
			t.Errorf("domains list rows %q", rows)
		}
		if _, rows := parseTable(t, sys("domains", "list", "--tenant", "default").ok(t)); len(rows) != 1 || rows[0][1] != "default" {
			t.Errorf("domains list --tenant default rows %q", rows)
		}
		out = sys("domains", "remove", "acme.example").ok(t)
		if !strings.Contains(out, "Removed mail domain acme.example") {
			t.Errorf("domains remove printed:\n%s", out)
		}
		bind(acme, ep, "new@acme.example").failed(t, "400 invalid_field")
		sys("domains", "remove", "acme.example").failed(t, "404 not_found")
	})
}
