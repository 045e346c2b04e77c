package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// cliResult is one CLI invocation's outcome.
type cliResult struct {
	args           []string
	stdout, stderr string
	err            error
}

// runCLI runs the agentowl command line in-process with args.
func runCLI(t *testing.T, args ...string) cliResult {
	t.Helper()
	var stdout, stderr bytes.Buffer
	root := newRootCommand(&stdout, &stderr)
	root.SetArgs(args)
	err := root.ExecuteContext(t.Context())
	return cliResult{args: args, stdout: stdout.String(), stderr: stderr.String(), err: err}
}

// cli runs an operator command against r with token.
func (r *running) cli(t *testing.T, token string, args ...string) cliResult {
	t.Helper()
	return runCLI(t, append(args, "--url", r.url, "--token", token)...)
}

// operator is the bootstrap operator of s: its token, and the command line
// run as it against srv.
func (s site) operator(t *testing.T, srv *running) (string, func(args ...string) cliResult) {
	t.Helper()
	admin := s.adminToken(t)
	return admin, func(args ...string) cliResult { return srv.cli(t, admin, args...) }
}

// ok fails the test unless the command succeeded; it returns stdout.
func (c cliResult) ok(t *testing.T) string {
	t.Helper()
	if c.err != nil {
		t.Fatalf("agentowl %s: %v\nstderr: %s", strings.Join(c.args, " "), c.err, c.stderr)
	}
	if c.stderr != "" {
		t.Errorf("agentowl %s succeeded but wrote to stderr: %s", strings.Join(c.args, " "), c.stderr)
	}
	return c.stdout
}

// failed fails the test unless the command failed with an "error: " line on
// stderr containing want and printed nothing on stdout.
func (c cliResult) failed(t *testing.T, want string) {
	t.Helper()
	cmd := "agentowl " + strings.Join(c.args, " ")
	if c.err == nil {
		t.Fatalf("%s succeeded, want an error mentioning %q\nstdout: %s", cmd, want, c.stdout)
	}
	if !strings.HasPrefix(c.stderr, "error: ") {
		t.Errorf("%s: stderr does not start with \"error: \": %q", cmd, c.stderr)
	}
	if !strings.Contains(c.stderr, want) {
		t.Errorf("%s: stderr %q does not mention %q", cmd, c.stderr, want)
	}
	if c.stdout != "" {
		t.Errorf("%s failed but printed on stdout: %s", cmd, c.stdout)
	}
}

// cliJSON runs ok and decodes stdout as one JSON object.
func cliJSON(t *testing.T, c cliResult) map[string]any {
	t.Helper()
	out := c.ok(t)
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("agentowl %s: stdout is not one JSON object: %v\n%s", strings.Join(c.args, " "), err, out)
	}
	return m
}

// itemsOf returns the items of a list document.
func itemsOf(t *testing.T, doc map[string]any) []map[string]any {
	t.Helper()
	raw, ok := doc["items"].([]any)
	if !ok {
		t.Fatalf("list has no items array: %v", doc)
	}
	out := make([]map[string]any, 0, len(raw))
	for _, v := range raw {
		out = append(out, v.(map[string]any))
	}
	return out
}

// findItem returns the first item whose value at path equals want.
func findItem(items []map[string]any, want string, path ...string) map[string]any {
	for _, it := range items {
		if get(it, path...) == want {
			return it
		}
	}
	return nil
}

// parseTable splits table output into its header's words and each row's
// words (values in these tests contain no spaces unless noted).
func parseTable(t *testing.T, out string) (header []string, rows [][]string) {
	t.Helper()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) < 2 {
		t.Fatalf("table has no rows:\n%s", out)
	}
	for _, l := range lines[1:] {
		rows = append(rows, strings.Fields(l))
	}
	return strings.Fields(lines[0]), rows
}

// expectHeader fails unless the table's header line has exactly want.
func expectHeader(t *testing.T, what string, header []string, want ...string) {
	t.Helper()
	if !slices.Equal(header, want) {
		t.Errorf("%s: header %q, want %q", what, header, want)
	}
}

// rowWith returns the row whose first column is key.
func rowWith(t *testing.T, what string, rows [][]string, key string) []string {
	t.Helper()
	for _, r := range rows {
		if len(r) > 0 && r[0] == key {
			return r
		}
	}
	t.Fatalf("%s: no row for %s in %q", what, key, rows)
	return nil
}

// decisionValidity is decision.expires_at - decision.decided_at of a request.
func decisionValidity(t *testing.T, req map[string]any) time.Duration {
	t.Helper()
	parse := func(k string) time.Time {
		s, _ := get(req, "decision", k).(string)
		at, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatalf("decision.%s = %q: %v", k, s, err)
		}
		return at
	}
	return parse("expires_at").Sub(parse("decided_at"))
}

func TestCLIApprovalFlow(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s site) {
		srv := s.start(t, nil)
		_, op := s.operator(t, srv)

		// A provisioner token, then a harness provisioning and submitting.
		prov := cliJSON(t, op("provisioner-tokens", "create", "--label", "harness", "--json"))
		provToken, _ := prov["token"].(string)
		provID, _ := prov["id"].(string)
		if !strings.HasPrefix(provToken, "owl_prov_") || provID == "" {
			t.Fatalf("provisioner-tokens create --json: want an id and an owl_prov_ token, got %v", prov)
		}
		h := provision(t, srv.url, provToken, "billing-agent")
		submitted := map[string]any{
			"tool":            "issue_refund",
			"arguments":       map[string]any{"order": "A-1", "amount": 5000},
			"timeout":         "1h",
			"agent_reasoning": "The customer was charged twice.",
		}
		r := h.submit(t, "refund-1", submitted)
		expectStatus(t, "POST /v1/requests", r, http.StatusCreated)
		id, _ := r.object(t)["id"].(string)
		if got := r.object(t)["status"]; got != "pending" || id == "" {
			t.Fatalf("new request: id %q status %v, want pending: %s", id, got, r.body)
		}
		replay := h.submit(t, "refund-1", submitted)
		expectStatus(t, "POST /v1/requests replay", replay, http.StatusOK)
		if got := replay.object(t)["id"]; got != id {
			t.Errorf("replay with the same Idempotency-Key returned request %v, want %s", got, id)
		}

		// approvals list (table and JSON) and inspect.
		header, rows := parseTable(t, op("approvals", "list", "--status", "pending").ok(t))
		expectHeader(t, "approvals list", header, "ID", "TOOL", "STATUS", "CREATED", "DEADLINE", "INSTANCE")
		row := rowWith(t, "approvals list --status pending", rows, id)
		if len(row) != 6 || row[1] != "issue_refund" || row[2] != "pending" || row[5] != h.instanceID {
			t.Errorf("approvals list row = %q, want issue_refund, pending and instance %s", row, h.instanceID)
		}
		listed := findItem(itemsOf(t, cliJSON(t, op("approvals", "list", "--json"))), id, "request", "id")
		if listed == nil {
			t.Fatalf("approvals list --json lacks request %s", id)
		}
		if listed["instance_id"] != h.instanceID || get(listed, "request", "status") != "pending" {
			t.Errorf("approvals list --json item = %v, want instance %s and pending", listed, h.instanceID)
		}
		insp := cliJSON(t, op("approvals", "inspect", id, "--json"))
		if get(insp, "request", "id") != id || get(insp, "request", "status") != "pending" ||
			insp["instance_id"] != h.instanceID || get(insp, "request", "arguments", "amount") != float64(5000) ||
			get(insp, "request", "agent_reasoning") != "The customer was charged twice." {
			t.Errorf("approvals inspect --json = %v", insp)
		}
		human := op("approvals", "inspect", id).ok(t)
		for _, want := range []string{"id:", id, "status:", "pending", "tool:", "issue_refund", "instance_id:", h.instanceID,
			`"amount": 5000`, "agent reasoning (a claim from the agent): The customer was charged twice."} {
			if !strings.Contains(human, want) {
				t.Errorf("approvals inspect output lacks %q:\n%s", want, human)
			}
		}

		// decide: the CLI prints exactly what the harness then reads.
		decided := op("approvals", "decide", id, "--approve", "--note", "ok", "--valid-for", "10m", "--json").ok(t)
		got := h.get(t, id, "")
		expectStatus(t, "GET /v1/requests/{id}", got, http.StatusOK)
		if a, b := normJSON(t, []byte(decided)), normJSON(t, got.body); a != b {
			t.Errorf("approvals decide --json printed\n%s\nbut GET /v1/requests/{id} answers\n%s", a, b)
		}
		req := got.object(t)
		if req["status"] != "approved" || get(req, "decision", "status") != "approved" || get(req, "decision", "note") != "ok" {
			t.Errorf("decided request = %s, want approved with note ok", got.body)
		}
		if v := decisionValidity(t, req); v != 10*time.Minute {
			t.Errorf("--valid-for 10m gave an approval valid for %s", v)
		}
		op("approvals", "decide", id, "--deny").failed(t, "already_terminal")
		op("approvals", "decide", id).failed(t, "--approve")
		op("approvals", "decide", id, "--approve", "--deny").failed(t, "--approve")

		// A denial, in table form.
		r = h.submit(t, "refund-2", map[string]any{"tool": "issue_refund", "arguments": map[string]any{"amount": 9}, "timeout": "30m"})
		expectStatus(t, "POST /v1/requests", r, http.StatusCreated)
		denyID := r.object(t)["id"].(string)
		out := op("approvals", "decide", denyID, "--deny", "--note", "no").ok(t)
		for _, want := range []string{denyID, "denied", "decision.note:", "no"} {
			if !strings.Contains(out, want) {
				t.Errorf("approvals decide --deny output lacks %q:\n%s", want, out)
			}
		}
		_, rows = parseTable(t, op("approvals", "list", "--status", "denied").ok(t))
		if row := rowWith(t, "approvals list --status denied", rows, denyID); row[2] != "denied" {
			t.Errorf("denied row = %q", row)
		}
		if len(rows) != 1 {
			t.Errorf("approvals list --status denied has %d rows, want 1: %q", len(rows), rows)
		}

		// tenants
		header, rows = parseTable(t, op("tenants", "list").ok(t))
		expectHeader(t, "tenants list", header, "NAME", "ROLE", "ID")
		if row := rowWith(t, "tenants list", rows, "default"); row[1] != "admin" {
			t.Errorf("tenants list row = %q, want default admin", row)
		}
		created := cliJSON(t, op("tenants", "create", "globex", "--admin", "gail", "--json"))
		globexAdmin, _ := created["admin"].(map[string]any)
		if created["name"] != "globex" || created["id"] == nil || globexAdmin["operator"] != "gail" ||
			!strings.HasPrefix(str(globexAdmin["token"]), "owl_op_") {
			t.Errorf("tenants create --json = %v", created)
		}
		// The token acts in globex only; the creator's acts in default only.
		if findItem(itemsOf(t, cliJSON(t, op("tenants", "list", "--json"))), "globex", "name") != nil {
			t.Errorf("the creator's tenants list shows the new tenant globex")
		}
		globex := func(args ...string) cliResult { return srv.cli(t, str(globexAdmin["token"]), args...) }
		_, rows = parseTable(t, globex("tenants", "list").ok(t))
		if row := rowWith(t, "globex's tenants list", rows, "globex"); row[1] != "admin" || len(rows) != 1 {
			t.Errorf("globex's tenants list = %q", rows)
		}
		globex("operators", "list", "--tenant", "default").failed(t, "not_found")
		// Without --tenant, a command acts in the token's own tenant.
		if _, rows := parseTable(t, globex("operators", "list").ok(t)); len(rows) != 1 || rows[0][0] != "gail" {
			t.Errorf("globex's operators list without --tenant = %q", rows)
		}
		globex("tenants", "create", "hooli").failed(t, "forbidden")
		// The takeover through the CLI: globex's admin names an operator
		// "admin" (default's admin's name) and mints a token for it; that
		// token acts in globex only.
		globex("operators", "create", "--tenant", "globex", "--name", "admin", "--role", "member").ok(t)
		minted := cliJSON(t, globex("operator-tokens", "create", "--tenant", "globex", "--operator", "admin", "--json"))
		asMinted := func(args ...string) cliResult { return srv.cli(t, str(minted["token"]), args...) }
		asMinted("approvals", "list", "--tenant", "default").failed(t, "not_found")
		asMinted("audit", "list", "--tenant", "default").failed(t, "not_found")
		asMinted("provisioner-tokens", "create", "--tenant", "default").failed(t, "not_found")
		globex("operator-tokens", "create", "--tenant", "default", "--operator", "admin").failed(t, "not_found")
		op("tenants", "create", "globex").failed(t, "already_exists")
		if out := op("tenants", "create", "initech").ok(t); !strings.Contains(out, "Created tenant initech") || !strings.Contains(out, "owl_op_") {
			t.Errorf("tenants create output = %q", out)
		}

		// operators
		alice := cliJSON(t, op("operators", "create", "--name", "alice", "--role", "member", "--json"))
		if alice["name"] != "alice" || alice["role"] != "member" {
			t.Errorf("operators create --json = %v", alice)
		}
		if out := op("operators", "create", "--name", "bob", "--role", "admin").ok(t); out != "Operator bob is admin\n" {
			t.Errorf("operators create output = %q", out)
		}
		header, rows = parseTable(t, op("operators", "list").ok(t))
		expectHeader(t, "operators list", header, "NAME", "ROLE", "ID", "CREATED")
		for name, role := range map[string]string{"admin": "admin", "alice": "member", "bob": "admin"} {
			if row := rowWith(t, "operators list", rows, name); row[1] != role {
				t.Errorf("operators list row = %q, want role %s", row, role)
			}
		}
		if n := len(itemsOf(t, cliJSON(t, op("operators", "list", "--json")))); n != 3 {
			t.Errorf("operators list --json has %d operators, want 3", n)
		}
		op("operators", "list", "--tenant", "no-such-tenant").failed(t, "")

		// operator tokens
		issued := cliJSON(t, op("operator-tokens", "create", "--operator", "alice", "--label", "ci", "--json"))
		aliceToken, _ := issued["token"].(string)
		aliceTokenID, _ := issued["id"].(string)
		if !strings.HasPrefix(aliceToken, "owl_op_") || issued["operator"] != "alice" || issued["status"] != "active" {
			t.Fatalf("operator-tokens create --json = %v", issued)
		}
		mine := itemsOf(t, cliJSON(t, srv.cli(t, aliceToken, "tenants", "list", "--json")))
		if it := findItem(mine, "default", "name"); it == nil || it["role"] != "member" {
			t.Errorf("alice's tenants = %v, want default as member", mine)
		}
		header, rows = parseTable(t, op("operator-tokens", "list").ok(t))
		expectHeader(t, "operator-tokens list", header, "ID", "LABEL", "STATUS", "CREATED", "EXPIRES")
		if row := rowWith(t, "operator-tokens list", rows, aliceTokenID); row[1] != "ci" || row[2] != "active" || row[4] != "-" {
			t.Errorf("operator-tokens list row = %q, want ci active with no expiry", row)
		}
		for _, it := range itemsOf(t, cliJSON(t, op("operator-tokens", "list", "--json"))) {
			if _, leaked := it["token"]; leaked {
				t.Errorf("operator-tokens list --json shows a secret: %v", it)
			}
		}
		if rev := cliJSON(t, op("operator-tokens", "revoke", aliceTokenID, "--json")); rev["status"] != "revoked" || rev["id"] != aliceTokenID {
			t.Errorf("operator-tokens revoke --json = %v", rev)
		}
		srv.cli(t, aliceToken, "tenants", "list").failed(t, "unauthenticated")
		if it := findItem(itemsOf(t, cliJSON(t, op("operator-tokens", "list", "--json"))), aliceTokenID, "id"); it == nil || it["status"] != "revoked" {
			t.Errorf("revoked token lists as %v", it)
		}

		// instances
		header, rows = parseTable(t, op("instances", "list").ok(t))
		expectHeader(t, "instances list", header, "ID", "NAME", "APPROVAL", "VALIDITY", "RECEIVER", "CREATED")
		if row := rowWith(t, "instances list", rows, h.instanceID); row[1] != "billing-agent" || row[2] != "5m" || row[3] != "-" {
			t.Errorf("instances list row = %q, want billing-agent 5m without a receiver", row)
		}
		inst := cliJSON(t, op("instances", "inspect", h.instanceID, "--json"))
		if inst["id"] != h.instanceID || inst["name"] != "billing-agent" || inst["approval_validity"] != "5m" {
			t.Errorf("instances inspect --json = %v", inst)
		}
		if upd := cliJSON(t, op("instances", "update", h.instanceID, "--approval-validity", "10m", "--json")); upd["approval_validity"] != "10m" {
			t.Errorf("instances update --json = %v, want approval_validity 10m", upd)
		}
		if out := op("instances", "inspect", h.instanceID).ok(t); !strings.Contains(out, "approval_validity:") || !strings.Contains(out, "10m") {
			t.Errorf("instances inspect after update:\n%s", out)
		}

		// policies
		pol := cliJSON(t, op("policies", "create", "--name", "small-refunds", "--tool", "issue_refund",
			"--condition", "arguments.amount <= 1000", "--effect", "approve", "--json"))
		polID, _ := pol["id"].(string)
		if polID == "" || pol["condition"] != "arguments.amount <= 1000" || pol["effect"] != "approve" {
			t.Fatalf("policies create --json = %v", pol)
		}
		small := h.submit(t, "refund-small", map[string]any{"tool": "issue_refund", "arguments": map[string]any{"amount": 250}, "timeout": "1h"})
		expectStatus(t, "small refund", small, http.StatusCreated)
		if obj := small.object(t); obj["status"] != "approved" || get(obj, "decision", "status") != "approved" {
			t.Errorf("a refund of 250 under the policy came back %s, want approved", small.body)
		} else if v := decisionValidity(t, obj); v != 10*time.Minute {
			t.Errorf("policy approval valid for %s, want the instance's 10m", v)
		}
		big := h.submit(t, "refund-big", map[string]any{"tool": "issue_refund", "arguments": map[string]any{"amount": 5000}, "timeout": "1h"})
		expectStatus(t, "big refund", big, http.StatusCreated)
		if got := big.object(t)["status"]; got != "pending" {
			t.Errorf("a refund of 5000 came back %v, want pending", got)
		}
		op("policies", "create", "--tool", "issue_refund", "--condition", "arguments.amount <=", "--effect", "approve").failed(t, "invalid_policy")
		op("policies", "create", "--tool", "issue_refund", "--condition", "arguments.amount + 1", "--effect", "approve").failed(t, "invalid_policy")
		out = op("policies", "list").ok(t)
		header, _ = parseTable(t, out)
		expectHeader(t, "policies list", header, "ID", "NAME", "TOOL", "CONDITION", "EFFECT", "PRIORITY", "INSTANCE")
		for _, want := range []string{polID, "small-refunds", "issue_refund", "arguments.amount <= 1000", "approve"} {
			if !strings.Contains(out, want) {
				t.Errorf("policies list lacks %q:\n%s", want, out)
			}
		}
		if n := len(itemsOf(t, cliJSON(t, op("policies", "list", "--json")))); n != 1 {
			t.Errorf("policies list --json has %d rules, want 1 (broken ones must not be stored)", n)
		}
		if del := cliJSON(t, op("policies", "delete", polID, "--json")); del["deleted"] != polID {
			t.Errorf("policies delete --json = %v", del)
		}
		if out := op("policies", "list").ok(t); out != "(none)\n" {
			t.Errorf("policies list after delete = %q, want (none)", out)
		}
		again := h.submit(t, "refund-small-2", map[string]any{"tool": "issue_refund", "arguments": map[string]any{"amount": 250}, "timeout": "1h"})
		expectStatus(t, "small refund after the rule is deleted", again, http.StatusCreated)
		if got := again.object(t)["status"]; got != "pending" {
			t.Errorf("after deleting the rule a small refund came back %v, want pending", got)
		}

		// provisioner tokens
		header, rows = parseTable(t, op("provisioner-tokens", "list").ok(t))
		expectHeader(t, "provisioner-tokens list", header, "ID", "LABEL", "STATUS", "CREATED", "EXPIRES")
		if row := rowWith(t, "provisioner-tokens list", rows, provID); row[1] != "harness" || row[2] != "active" {
			t.Errorf("provisioner-tokens list row = %q", row)
		}
		if rev := cliJSON(t, op("provisioner-tokens", "revoke", provID, "--json")); rev["status"] != "revoked" {
			t.Errorf("provisioner-tokens revoke --json = %v", rev)
		}
		r = send(t, http.MethodPost, srv.url+"/v1/instances", provToken, map[string]any{"instance_name": "late"}, "Idempotency-Key", "late")
		expectStatus(t, "provisioning with a revoked token", r, http.StatusUnauthorized)
		if code := r.errorCode(t); code != "unauthenticated" {
			t.Errorf("revoked provisioner token: code %q, want unauthenticated", code)
		}
		if it := findItem(itemsOf(t, cliJSON(t, op("provisioner-tokens", "list", "--json"))), provID, "id"); it == nil || it["status"] != "revoked" {
			t.Errorf("revoked provisioner token lists as %v", it)
		}
		if out := op("provisioner-tokens", "revoke", provID).ok(t); out != "Revoked provisioner token "+provID+"\n" {
			t.Errorf("revoking again (idempotent) printed %q", out)
		}

		// audit
		entries := itemsOf(t, cliJSON(t, op("audit", "list", "--json")))
		var actions []string
		for _, e := range entries {
			actions = append(actions, e["action"].(string))
		}
		for _, want := range []string{"admin.bootstrap", "provisioner_token.create", "instance.create", "approval.decide",
			"operator.create", "operator_token.create", "operator_token.revoke", "instance.set_approval_validity",
			"policy.create", "policy.delete", "provisioner_token.revoke"} {
			if !slices.Contains(actions, want) {
				t.Errorf("audit list --json lacks %s; has %q", want, actions)
			}
		}
		if e := findItem(entries, "approval-request:"+id, "target"); e == nil || e["actor"] != "operator:admin" || e["action"] != "approval.decide" {
			t.Errorf("audit entry for the decision = %v, want approval.decide by operator:admin", e)
		}
		header, rows = parseTable(t, op("audit", "list", "--limit", "5").ok(t))
		expectHeader(t, "audit list", header, "AT", "ACTOR", "ACTION", "TARGET", "REQUEST")
		if len(rows) != 5 {
			t.Errorf("audit list --limit 5 printed %d rows", len(rows))
		}
		if rows[0][2] != "provisioner_token.revoke" {
			t.Errorf("audit list newest entry = %q, want the provisioner token revocation", rows[0])
		}
	})
}

func TestCLIAdminBootstrap(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s site) {
		srv := s.start(t, nil)
		defaultToken := s.adminToken(t)
		where := []string{"--database-url", s.dbURL}
		if s.dbURL == "" {
			// SQLite: administer offline, with the server stopped.
			where = []string{"--data-dir", s.dataDir}
			if err := srv.close(); err != nil {
				t.Fatal(err)
			}
		}
		boot := func(extra ...string) cliResult {
			return runCLI(t, append(append([]string{"admin", "bootstrap", "--tenant", "acme"}, where...), extra...)...)
		}
		first := cliJSON(t, boot("--json"))
		tok1, _ := first["operator_token"].(string)
		tenantID, _ := get(first, "tenant", "id").(string)
		if !strings.HasPrefix(tok1, "owl_op_") || get(first, "tenant", "name") != "acme" || tenantID == "" || get(first, "tenant", "created_at") == nil {
			t.Fatalf("admin bootstrap --json = %v, want {tenant:{id,name:acme,created_at}, operator_token:owl_op_…}", first)
		}
		second := cliJSON(t, boot("--json"))
		tok2, _ := second["operator_token"].(string)
		if get(second, "tenant", "id") != tenantID {
			t.Errorf("bootstrapping acme again made tenant %v, want the existing %s", get(second, "tenant", "id"), tenantID)
		}
		if !strings.HasPrefix(tok2, "owl_op_") || tok2 == tok1 {
			t.Errorf("bootstrapping acme again gave token %q, want a new owl_op_ token", tok2)
		}
		human := boot().ok(t)
		lines := strings.Split(strings.TrimRight(human, "\n"), "\n")
		if len(lines) != 2 || !strings.HasPrefix(lines[0], "Tenant acme ("+tenantID+")") || !strings.HasPrefix(lines[1], "owl_op_") {
			t.Errorf("admin bootstrap output:\n%s", human)
		}
		// (Missing --tenant and conflicting flags: TestCLIUsageErrorsGoToStderr.)
		runCLI(t, append([]string{"admin", "bootstrap", "--tenant", "Not A Slug"}, where...)...).failed(t, "invalid_field")

		if s.dbURL == "" {
			srv = s.start(t, nil)
			if srv.stdout != "" {
				t.Errorf("restart after admin bootstrap printed a first-start notice:\n%s", srv.stdout)
			}
		}
		for i, tok := range []string{tok1, tok2, lines[1]} {
			tenants := itemsOf(t, cliJSON(t, srv.cli(t, tok, "tenants", "list", "--json")))
			if it := findItem(tenants, "acme", "name"); it == nil || it["role"] != "admin" || it["id"] != tenantID {
				t.Errorf("token %d: tenants list = %v, want acme as admin", i+1, tenants)
			}
			srv.cli(t, tok, "operators", "list", "--tenant", "acme").ok(t)
		}
		if out := srv.cli(t, defaultToken, "tenants", "list").ok(t); !strings.Contains(out, "default") {
			t.Errorf("the first-start token stopped working after admin bootstrap:\n%s", out)
		}
		audit := itemsOf(t, cliJSON(t, srv.cli(t, tok1, "audit", "list", "--tenant", "acme", "--json")))
		n := 0
		for _, e := range audit {
			if e["action"] == "admin.bootstrap" {
				n++
			}
		}
		if n != 3 {
			t.Errorf("acme's audit has %d admin.bootstrap entries, want 3: %v", n, audit)
		}
	})
}

// Environment variables supply --url and --token; flags win. Not parallel:
// it sets the process environment.
func TestCLIEnvAndFlags(t *testing.T) {
	t.Setenv("AGENTOWL_TENANT", "")
	s := site{backend: "sqlite", dataDir: t.TempDir()}
	srv := s.start(t, nil)
	admin := s.adminToken(t)
	var decoyHits atomic.Int32
	decoy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		decoyHits.Add(1)
		w.WriteHeader(http.StatusTeapot)
	}))
	defer decoy.Close()
	listsDefault := func(t *testing.T, c cliResult) {
		t.Helper()
		if findItem(itemsOf(t, cliJSON(t, c)), "default", "name") == nil {
			t.Errorf("tenants list did not show default: %s", c.stdout)
		}
	}

	t.Run("env supplies url and token", func(t *testing.T) {
		t.Setenv("AGENTOWL_URL", srv.url)
		t.Setenv("AGENTOWL_TOKEN", admin)
		listsDefault(t, runCLI(t, "tenants", "list", "--json"))
	})
	t.Run("token flag wins over env", func(t *testing.T) {
		t.Setenv("AGENTOWL_URL", srv.url)
		t.Setenv("AGENTOWL_TOKEN", "owl_op_not-a-real-token")
		listsDefault(t, runCLI(t, "tenants", "list", "--json", "--token", admin))
	})
	t.Run("token flag wins over a valid env token", func(t *testing.T) {
		t.Setenv("AGENTOWL_URL", srv.url)
		t.Setenv("AGENTOWL_TOKEN", admin)
		runCLI(t, "tenants", "list", "--token", "owl_op_not-a-real-token").failed(t, "unauthenticated")
	})
	t.Run("url flag wins over env", func(t *testing.T) {
		t.Setenv("AGENTOWL_URL", decoy.URL)
		t.Setenv("AGENTOWL_TOKEN", admin)
		before := decoyHits.Load()
		listsDefault(t, runCLI(t, "tenants", "list", "--json", "--url", srv.url))
		if n := decoyHits.Load() - before; n != 0 {
			t.Errorf("the CLI called AGENTOWL_URL %d times although --url was given", n)
		}
	})
	t.Run("url flag wins over a working env url", func(t *testing.T) {
		t.Setenv("AGENTOWL_URL", srv.url)
		t.Setenv("AGENTOWL_TOKEN", admin)
		before := decoyHits.Load()
		runCLI(t, "tenants", "list", "--url", decoy.URL).failed(t, "418")
		if n := decoyHits.Load() - before; n != 1 {
			t.Errorf("--url was called %d times, want 1", n)
		}
	})
	t.Run("missing token names AGENTOWL_TOKEN", func(t *testing.T) {
		t.Setenv("AGENTOWL_URL", decoy.URL)
		t.Setenv("AGENTOWL_TOKEN", "")
		before := decoyHits.Load()
		runCLI(t, "tenants", "list").failed(t, "AGENTOWL_TOKEN")
		if n := decoyHits.Load() - before; n != 0 {
			t.Errorf("the CLI called the server %d times without a token", n)
		}
	})
	t.Run("flags alone", func(t *testing.T) {
		t.Setenv("AGENTOWL_URL", "")
		t.Setenv("AGENTOWL_TOKEN", "")
		listsDefault(t, runCLI(t, "tenants", "list", "--json", "--url", srv.url, "--token", admin))
	})
}

// A write the server refuses with 503 overloaded stored nothing: the CLI
// sends it again after Retry-After, with the same body, and the operator
// sees only the outcome. Any other 503 is reported, not retried.
func TestCLIRetriesOverloaded(t *testing.T) {
	t.Parallel()
	s := site{backend: "sqlite", dataDir: t.TempDir()}
	srv := s.start(t, nil)
	admin := s.adminToken(t)
	provToken := str(cliJSON(t, srv.cli(t, admin, "provisioner-tokens", "create", "--label", "h", "--json"))["token"])
	h := provision(t, srv.url, provToken, "overloaded-agent")
	submit := func(key string) string {
		r := h.submit(t, key, map[string]any{"tool": "t", "arguments": map[string]any{}, "timeout": "1h"})
		expectStatus(t, "POST /v1/requests", r, http.StatusCreated)
		return str(r.object(t)["id"])
	}

	// A front that refuses the first decisions it sees as an overloaded
	// server does, then passes everything to the real server.
	target, err := url.Parse(srv.url)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	var refuse atomic.Int32
	var code atomic.Value
	var bodies []string
	var mu sync.Mutex
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/decision") {
			b, _ := io.ReadAll(r.Body)
			mu.Lock()
			bodies = append(bodies, string(b))
			mu.Unlock()
			r.Body = io.NopCloser(bytes.NewReader(b))
			if refuse.Add(-1) >= 0 {
				w.Header().Set("Retry-After", "0")
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusServiceUnavailable)
				fmt.Fprintf(w, `{"error":{"type":"api_error","code":%q,"message":"busy","request_id":"req_x"}}`, code.Load())
				return
			}
		}
		proxy.ServeHTTP(w, r)
	}))
	defer front.Close()
	// decide runs the CLI's decision through the front, which refuses the
	// first n sends with code, and returns the bodies it was sent.
	decide := func(n int32, refusal string, args ...string) (cliResult, []string) {
		mu.Lock()
		bodies = nil
		mu.Unlock()
		refuse.Store(n)
		code.Store(refusal)
		r := runCLI(t, append(append([]string{"approvals", "decide"}, args...), "--url", front.URL, "--token", admin)...)
		mu.Lock()
		defer mu.Unlock()
		return r, slices.Clone(bodies)
	}

	t.Run("overloaded is sent again", func(t *testing.T) {
		id := submit("overloaded-1")
		r, bodies := decide(2, "overloaded", id, "--approve", "--note", "twice refused")
		r.ok(t)
		if len(bodies) != 3 || bodies[0] != bodies[2] || !strings.Contains(bodies[2], "twice refused") {
			t.Errorf("the decision was sent %d times with bodies %q, want three identical sends", len(bodies), bodies)
		}
		if got := str(h.get(t, id, "").object(t)["status"]); got != "approved" {
			t.Errorf("request after the retried decision is %s, want approved", got)
		}
	})
	t.Run("another 503 is reported", func(t *testing.T) {
		id := submit("unavailable-1")
		r, bodies := decide(1, "unavailable", id, "--approve")
		r.failed(t, "unavailable")
		if len(bodies) != 1 {
			t.Errorf("a 503 unavailable was sent %d times, want once", len(bodies))
		}
		if got := str(h.get(t, id, "").object(t)["status"]); got != "pending" {
			t.Errorf("request after the refused decision is %s, want pending", got)
		}
	})
}

// Usage mistakes that cobra itself detects (argument counts, unknown
// commands, required and mutually exclusive flags) are errors like any other:
// a non-zero exit and one "error: " line on stderr, never silence.
func TestCLIUsageErrorsGoToStderr(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"tenants", "list", "--bogus"}, "unknown flag"},
		{[]string{"approvals", "inspect"}, "accepts 1 arg"},
		{[]string{"approvals", "decide", "a", "b", "--approve"}, "accepts 1 arg"},
		{[]string{"no-such-command"}, "unknown command"},
		{[]string{"policies", "create", "--effect", "approve"}, "tool"},
		{[]string{"operators", "create"}, "name"},
		{[]string{"instances", "update", "some-id"}, "approval-validity"},
		{[]string{"admin", "bootstrap", "--data-dir", t.TempDir()}, "tenant"},
		{[]string{"admin", "bootstrap", "--tenant", "acme", "--data-dir", t.TempDir(), "--database-url", "postgres://x/y"}, "database-url"},
	} {
		runCLI(t, c.args...).failed(t, c.want)
	}
}
