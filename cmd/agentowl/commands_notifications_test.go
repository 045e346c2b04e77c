package main

import (
	"net/http"
	"strings"
	"testing"
)

// TestCLINotifications runs the seed's `notifications list --tenant` and its
// read and prefs commands, and `console login-link`, against a server on
// each backend.
func TestCLINotifications(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s site) {
		srv := s.startWork(t, nil)
		_, op := s.operator(t, srv)
		if out := op("notifications", "list", "--tenant", "default").ok(t); !strings.Contains(out, "0 unread") || !strings.Contains(out, "(none)") {
			t.Fatalf("empty list:\n%s", out)
		}
		prov := cliJSON(t, op("provisioner-tokens", "create", "--json"))
		h := provision(t, srv.url, prov["token"].(string), "billing-agent")
		for _, key := range []string{"r1", "r2"} {
			expectStatus(t, "POST /v1/requests", h.submit(t, key, map[string]any{"tool": "issue_refund", "arguments": map[string]any{},
				"timeout": "1h"}), http.StatusCreated)
		}
		out := op("notifications", "list", "--tenant", "default").ok(t)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if lines[0] != "2 unread" {
			t.Fatalf("list:\n%s", out)
		}
		header, rows := parseTable(t, strings.Join(lines[1:], "\n"))
		expectHeader(t, "notifications list", header[:6], "ID", "KIND", "CAUSE", "READ", "CREATED", "LINK")
		if len(rows) != 2 || rows[0][1] != "input" || rows[0][2] != "approval_pending" || rows[0][3] != "false" ||
			!strings.HasPrefix(rows[0][5], "/console/t/default/attention/att_aap_") {
			t.Fatalf("rows %q", rows)
		}
		if out := op("notifications", "read", rows[0][0]).ok(t); !strings.Contains(out, "Read "+rows[0][0]) {
			t.Errorf("read:\n%s", out)
		}
		doc := cliJSON(t, op("--json", "notifications", "list", "--unread"))
		if doc["unread"] != float64(1) || len(itemsOf(t, doc)) != 1 {
			t.Fatalf("after one read: %v", doc)
		}
		if out := op("notifications", "read", "--all").ok(t); !strings.Contains(out, "Marked 1 read") {
			t.Errorf("read --all:\n%s", out)
		}
		op("notifications", "read").failed(t, "give one notification ID or --all")
		op("notifications", "read", "ntf_nope").failed(t, "not_found")

		if out := op("notifications", "prefs", "--mute-kinds", "failure,result").ok(t); !strings.Contains(out, "failure,result") {
			t.Errorf("prefs set:\n%s", out)
		}
		if out := op("notifications", "prefs").ok(t); !strings.Contains(out, "failure,result") {
			t.Errorf("prefs show:\n%s", out)
		}
		op("notifications", "prefs", "--mute-kinds", "progress").failed(t, "invalid_field")
		if out := op("notifications", "prefs", "--mute-kinds", "").ok(t); strings.Contains(out, "result") {
			t.Errorf("prefs cleared:\n%s", out)
		}

		link := cliJSON(t, op("--json", "console", "login-link", "--tenant", "default"))
		if !strings.HasPrefix(link["url"].(string), srv.url+"/console/link?code=owl_cl_") || link["operator"] != "admin" {
			t.Fatalf("login link = %v", link)
		}
		op("console", "login-link", "--operator", "nobody").failed(t, "not_found")
	})
}
