package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentowl/agentowl/workclient"
)

// TestCLIAttentionAAP decides a pending AAP approval request from the
// Needs-attention inbox: it is listed as att_aap_<id>, `attention decide`
// previews, `--submit` approves it, and the harness reads it approved.
func TestCLIAttentionAAP(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, s site) {
		srv := s.startWork(t, nil)
		admin := s.adminToken(t)
		op := func(args ...string) cliResult { return srv.cli(t, admin, args...) }
		prov := cliJSON(t, op("provisioner-tokens", "create", "--label", "harness", "--json"))
		h := provision(t, srv.url, prov["token"].(string), "billing-agent")
		args := map[string]any{"order": "A-1", "amount": 5000}
		r := h.submit(t, "refund-1", map[string]any{"tool": "issue_refund", "arguments": args, "timeout": "1h",
			"agent_reasoning": "The customer was charged twice."})
		expectStatus(t, "POST /v1/requests", r, http.StatusCreated)
		id := r.object(t)["id"].(string)
		att := "att_aap_" + id

		header, rows := parseTable(t, op("attention", "list", "--tenant", "default", "--status", "open").ok(t))
		expectHeader(t, "attention list", header, "ID", "KIND", "STATUS", "REQUEST", "REV", "EXPIRES", "ASSIGNEE", "WORK")
		row := rowWith(t, "attention list", rows, att)
		if row[1] != "approval" || row[2] != "open" {
			t.Fatalf("attention list row %q", row)
		}
		digest, err := workclient.ActionDigest(map[string]any{"tool": "issue_refund", "arguments": args})
		if err != nil {
			t.Fatal(err)
		}
		if out := op("attention", "inspect", att).ok(t); !strings.Contains(out, digest) || !strings.Contains(out, "issue_refund") {
			t.Errorf("attention inspect:\n%s", out)
		}

		file := filepath.Join(t.TempDir(), "decision.json")
		data, _ := json.Marshal(map[string]any{"decision_id": "dec-aap-1", "request_revision": 1, "decision": "approve",
			"expected_action_digest": digest})
		if err := os.WriteFile(file, data, 0o600); err != nil {
			t.Fatal(err)
		}
		out := op("attention", "decide", att, file).ok(t)
		if !strings.Contains(out, "would submit") || !strings.Contains(out, digest) {
			t.Errorf("attention decide preview:\n%s", out)
		}
		if got := h.get(t, id, "").object(t)["status"]; got != "pending" {
			t.Fatalf("after the preview the request is %v, want pending", got)
		}
		if out := op("attention", "decide", att, file, "--submit").ok(t); !strings.Contains(out, "submitted decision dec-aap-1") {
			t.Errorf("attention decide --submit:\n%s", out)
		}
		got := h.get(t, id, "")
		expectStatus(t, "GET /v1/requests/{id}", got, http.StatusOK)
		if req := got.object(t); req["status"] != "approved" || get(req, "decision", "status") != "approved" {
			t.Fatalf("decided request = %s, want approved", got.body)
		}
		if out := op("attention", "decide", att, file, "--submit").ok(t); !strings.Contains(out, "already submitted") {
			t.Errorf("attention decide --submit again (replay):\n%s", out)
		}
		for _, it := range itemsOf(t, cliJSON(t, op("--json", "attention", "list", "--tenant", "default", "--status", "open"))) {
			if it["id"] == att {
				t.Errorf("decided item still listed open: %v", it)
			}
		}
	})
}
