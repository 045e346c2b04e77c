package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/workclient"
)

// TestCLIAttention runs the seed's attention command lines against a server
// on each backend: a runtime asks for approval, the operator lists, inspects,
// acknowledges, previews and submits the decision, and the decision is
// pushed to the runtime's decision URL, whose acceptance is the receipt.
func TestCLIAttention(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s site) {
		rs := newRuntimeSink(t)
		var mu sync.Mutex
		var pushes []string
		decisions := newTLSServer(t, func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			var doc map[string]any
			_ = json.Unmarshal(body, &doc)
			mu.Lock()
			pushes = append(pushes, r.Header.Get("Authorization"))
			mu.Unlock()
			fmt.Fprintf(w, `{"accepted": true, "decision_id": %q}`, doc["decision_id"])
		})
		srv := s.startWork(t, certPEM(rs.srv))
		admin, op := s.operator(t, srv)
		dir := t.TempDir()
		secretFile := filepath.Join(dir, "decision-secret")
		if err := os.WriteFile(secretFile, []byte("decision-bearer-secret-0123456789\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		ep := cliJSON(t, runCLI(t, "--json", "endpoints", "create", "--tenant", "default", "--name", "rt", "--url", rs.srv.URL+"/events",
			"--agent-work", "--decision-url", decisions.URL+"/decisions", "--decision-secret-file", secretFile, "--api-url", srv.url, "--token", admin))
		epID := ep["id"].(string)
		cred := cliJSON(t, op("--json", "runtime-credentials", "create", epID, "--scope", "callbacks:write,decisions:read"))
		token := cred["token"].(string)
		out := op("bindings", "create", "--tenant", "default", "--channel", "webhook", "--endpoint", epID).ok(t)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		expectStatus(t, "POST ingress", send(t, http.MethodPost, lines[len(lines)-1], "", map[string]any{"text": "refund"}), http.StatusAccepted)
		var items []map[string]any
		eventually(t, 10*time.Second, "the work", func() bool {
			items = itemsOf(t, cliJSON(t, op("--json", "work", "list", "--tenant", "default")))
			return len(items) == 1
		})
		workID := items[0]["id"].(string)
		digest := strings.Repeat("c", 64)
		cb := map[string]any{"version": "agent-work.v1", "callback_id": "c1", "work_id": workID, "sequence": 1, "status": "needs_input",
			"occurred_at": time.Now().UTC().Format(time.RFC3339), "requests": []any{map[string]any{"id": "refund", "revision": 1,
				"kind": "approval", "prompt": "Refund?", "allowed_decisions": []any{"approve", "reject"},
				"expires_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
				"action":     map[string]any{"description": "Refund $20 to order 1234", "digest": digest}}}}
		expectStatus(t, "needs_input", send(t, http.MethodPost, srv.url+"/runtime/v1/work/"+workID+"/callbacks", token, cb), http.StatusOK)

		header, rows := parseTable(t, op("attention", "list", "--tenant", "default", "--status", "open").ok(t))
		expectHeader(t, "attention list", header, "ID", "KIND", "STATUS", "REQUEST", "REV", "EXPIRES", "ASSIGNEE", "WORK")
		if len(rows) != 1 || rows[0][1] != "approval" {
			t.Fatalf("attention list rows %q", rows)
		}
		att := rows[0][0]
		// A file retained from the work's message (blocked: a record, no
		// bytes) is listed by inspect with the command that downloads it.
		ctx := context.Background()
		var eventID string
		if err := srv.m.Store().Write(ctx, func(tx agentowl.Tx) error {
			w, err := tx.WorkGet(ctx, workID)
			if err != nil {
				return err
			}
			eventID = w.EventID
			now := time.Now()
			return tx.AttachmentCreate(ctx, &agentowl.Attachment{ID: agentowl.NewID("att"), TenantID: w.TenantID, EventID: w.EventID,
				Name: "scan.pdf", Size: 11 << 20, DeclaredType: "application/pdf", SniffedType: "application/pdf", Blocked: "file_too_large",
				CreatedAt: now, ExpiresAt: now.Add(time.Hour)})
		}); err != nil {
			t.Fatal(err)
		}
		if out := op("attention", "inspect", att).ok(t); !strings.Contains(out, "Refund $20 to order 1234") || !strings.Contains(out, digest) ||
			!strings.Contains(out, "retained files of event "+eventID) || !strings.Contains(out, "scan.pdf") {
			t.Errorf("attention inspect:\n%s", out)
		}
		if out := op("attention", "ack", att, "--assignee", "alice").ok(t); !strings.Contains(out, "assigned to alice") {
			t.Errorf("attention ack:\n%s", out)
		}
		op("attention", "resolve", att).failed(t, "not_a_request")
		file := filepath.Join(dir, "decision.json")
		write := func(v any) {
			data, _ := json.Marshal(v)
			if err := os.WriteFile(file, data, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		write(map[string]any{"decision_id": "dec-1", "request_revision": 1, "decision": "approve", "expected_action_digest": strings.Repeat("d", 64)})
		op("attention", "decide", att, file).failed(t, "digest_mismatch")
		write(map[string]any{"decision_id": "dec-1", "request_revision": 1, "decision": "approve", "expected_action_digest": digest})
		if out := op("attention", "decide", att, file).ok(t); !strings.Contains(out, "would submit") || !strings.Contains(out, "Refund $20") {
			t.Errorf("attention decide preview:\n%s", out)
		}
		if n := len(itemsOf(t, cliJSON(t, op("--json", "attention", "list", "--status", "acknowledged")))); n != 1 {
			t.Fatalf("a preview changed the item (%d acknowledged)", n)
		}
		if out := op("attention", "decide", att, file, "--submit").ok(t); !strings.Contains(out, "submitted decision dec-1") {
			t.Errorf("attention decide --submit:\n%s", out)
		}
		eventually(t, 10*time.Second, "the receipt", func() bool {
			it := cliJSON(t, op("--json", "attention", "inspect", att))
			return get(it, "decision", "receipt", "status") == "received" && it["status"] == "resolved"
		})
		mu.Lock()
		if len(pushes) != 1 || pushes[0] != "Bearer decision-bearer-secret-0123456789" {
			t.Errorf("pushes %q", pushes)
		}
		mu.Unlock()
		if out := op("attention", "inspect", att).ok(t); !strings.Contains(out, "decision receipt (runtime acceptance):") || !strings.Contains(out, "received") {
			t.Errorf("attention inspect after receipt:\n%s", out)
		}
	})
}

// TestCLIAttentionAAP decides a pending AAP approval request from the
// Needs-attention inbox: it is listed as att_aap_<id>, `attention decide`
// previews, `--submit` approves it, and the harness reads it approved.
func TestCLIAttentionAAP(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s site) {
		srv := s.startWork(t, nil)
		_, op := s.operator(t, srv)
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
