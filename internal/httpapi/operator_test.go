package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/buildinfo"
	"github.com/agentowl/agentowl/internal/egress"
	"github.com/agentowl/agentowl/internal/server/servertest"
	"github.com/agentowl/agentowl/internal/store/storetest"
)

// opHarness drives the operator API of one test's server. Its helpers are
// methods so that they cannot collide with helpers of other test files.
type opHarness struct {
	t *testing.T
	e *env
}

// opTenant is the path prefix of the bootstrap tenant.
const opTenant = "/api/v1/tenants/default"

func newOpHarness(t *testing.T, e *env) *opHarness { return &opHarness{t: t, e: e} }

// call sends a request with token; the response is already checked against
// api/openapi.yaml by e.do.
func (h *opHarness) call(method, path, token string, body any, headers ...string) *response {
	h.t.Helper()
	return h.e.do(method, path, token, body, headers...)
}

// admin sends a request as an admin of the tenant in path: the bootstrap
// admin of "default", or the first admin of a tenant made by createTenant.
func (h *opHarness) admin(method, path string, body any, headers ...string) *response {
	h.t.Helper()
	token := h.e.operatorToken
	if rest, ok := strings.CutPrefix(path, "/api/v1/tenants/"); ok {
		tenant, _, _ := strings.Cut(rest, "/")
		token = h.e.adminOf(tenant)
	}
	return h.e.do(method, path, token, body, headers...)
}

// ok asserts the status and returns the decoded body (nil when empty).
func (h *opHarness) ok(r *response, status int) map[string]any {
	h.t.Helper()
	if r.Status != status {
		h.t.Fatalf("status %d, want %d: %s", r.Status, status, r.Body)
	}
	if len(r.Body) == 0 {
		return nil
	}
	return r.JSON(h.t)
}

// fails asserts an error response: status, code, param (when not empty) and
// request_id equal to the X-Request-ID header.
func (h *opHarness) fails(r *response, status int, code, param string) {
	h.t.Helper()
	if r.Status != status || r.ErrorCode(h.t) != code {
		h.t.Fatalf("got %d %s, want %d %s", r.Status, r.Body, status, code)
	}
	e, _ := r.JSON(h.t)["error"].(map[string]any)
	if param != "" && e["param"] != param {
		h.t.Fatalf("error.param = %v, want %q: %s", e["param"], param, r.Body)
	}
	if e["request_id"] != r.Header.Get("X-Request-ID") || e["request_id"] == "" {
		h.t.Fatalf("error.request_id %v != X-Request-ID %q", e["request_id"], r.Header.Get("X-Request-ID"))
	}
}

// items returns the items of a list response.
func (h *opHarness) items(m map[string]any) []map[string]any {
	h.t.Helper()
	return itemsOf(h.t, m)
}

// itemsOf returns the items of a list response's document.
func itemsOf(t *testing.T, m map[string]any) []map[string]any {
	t.Helper()
	raw, ok := m["items"].([]any)
	if !ok {
		t.Fatalf("no items array in %v", m)
	}
	out := make([]map[string]any, 0, len(raw))
	for _, v := range raw {
		out = append(out, v.(map[string]any))
	}
	return out
}

// find returns the item whose key equals value, or nil.
func (h *opHarness) find(list []map[string]any, key string, value any) map[string]any {
	for _, it := range list {
		if it[key] == value {
			return it
		}
	}
	return nil
}

func (h *opHarness) list(token, path string) []map[string]any {
	h.t.Helper()
	return h.items(h.ok(h.call("GET", path, token, nil), 200))
}

// now is the fake clock's time in the wire format.
func (h *opHarness) now() string { return h.e.clock.Now().UTC().Format(time.RFC3339) }

func (h *opHarness) time(v any) time.Time {
	h.t.Helper()
	s, _ := v.(string)
	tm, err := time.Parse(time.RFC3339, s)
	if err != nil {
		h.t.Fatalf("not a timestamp: %v", v)
	}
	return tm
}

// operator adds name to tenant with role (as the bootstrap admin) and
// returns a fresh operator token for them.
func (h *opHarness) operator(tenant, name, role string) string {
	h.t.Helper()
	h.ok(h.admin("POST", "/api/v1/tenants/"+tenant+"/operators", map[string]any{"name": name, "role": role}), 201)
	m := h.ok(h.admin("POST", "/api/v1/tenants/"+tenant+"/operator-tokens", map[string]any{"operator": name}), 201)
	return m["token"].(string)
}

// provisioner issues a provisioner token of tenant as the bootstrap admin and
// returns its secret and ID.
func (h *opHarness) provisioner(tenant string) (secret, id string) {
	h.t.Helper()
	m := h.ok(h.admin("POST", "/api/v1/tenants/"+tenant+"/provisioner-tokens", map[string]any{"label": "test"}), 201)
	return m["token"].(string), m["id"].(string)
}

// provision creates an instance through /v1 and returns its ID and credential.
func (h *opHarness) provision(prov string, body map[string]any) (id, cred string) {
	h.t.Helper()
	if body == nil {
		body = map[string]any{}
	}
	m := h.ok(h.call("POST", "/v1/instances", prov, body, "Idempotency-Key", agentowl.NewID("")), 201)
	return m["instance"].(map[string]any)["id"].(string), m["credential"].(map[string]any)["token"].(string)
}

// instance provisions an instance of tenant "default" with a new provisioner token.
func (h *opHarness) instance() (id, cred string) {
	h.t.Helper()
	prov, _ := h.provisioner("default")
	return h.provision(prov, nil)
}

// submitResp sends POST /v1/requests with a fresh Idempotency-Key.
func (h *opHarness) submitResp(cred, tool string, args map[string]any, timeout string) *response {
	h.t.Helper()
	return h.call("POST", "/v1/requests", cred, map[string]any{"tool": tool, "arguments": args, "timeout": timeout},
		"Idempotency-Key", agentowl.NewID(""))
}

// submit creates a request through /v1 and returns its body.
func (h *opHarness) submit(cred, tool string, args map[string]any, timeout string) map[string]any {
	h.t.Helper()
	return h.ok(h.submitResp(cred, tool, args, timeout), 201)
}

// request reads a request through /v1 as its instance.
func (h *opHarness) request(cred, id string) *response {
	h.t.Helper()
	r := h.call("GET", "/v1/requests/"+id, cred, nil)
	h.ok(r, 200)
	return r
}

func (h *opHarness) decide(token, tenant, id string, body any) *response {
	h.t.Helper()
	return h.call("POST", "/api/v1/tenants/"+tenant+"/approvals/"+id+"/decision", token, body)
}

// wantStatus asserts an ApprovalRequest body's status.
func (h *opHarness) wantStatus(req map[string]any, status string) {
	h.t.Helper()
	if req["status"] != status {
		h.t.Fatalf("status %v, want %s: %v", req["status"], status, req)
	}
}

// validity returns decision.expires_at - decision.decided_at.
func (h *opHarness) validity(req map[string]any) time.Duration {
	h.t.Helper()
	d, ok := req["decision"].(map[string]any)
	if !ok {
		h.t.Fatalf("no decision: %v", req)
	}
	if _, has := d["expires_at"]; !has {
		h.t.Fatalf("no decision.expires_at: %v", req)
	}
	return h.time(d["expires_at"]).Sub(h.time(d["decided_at"]))
}

// auditEntry finds the entry of tenant with action and target.
func (h *opHarness) auditEntry(tenant, action, target string) map[string]any {
	h.t.Helper()
	entries := h.list(h.e.adminOf(tenant), "/api/v1/tenants/"+tenant+"/audit?limit=1000")
	for _, en := range entries {
		if en["action"] == action && en["target"] == target {
			return en
		}
	}
	h.t.Fatalf("no audit entry %s %s in %s: %v", action, target, tenant, entries)
	return nil
}

func TestOperatorWhoami(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		h := newOpHarness(t, e)
		m := h.ok(h.admin("GET", "/api/v1/whoami", nil), 200)
		want := map[string]any{"operator": "admin", "tenants": []any{map[string]any{"tenant": "default", "role": "admin"}}}
		if !reflect.DeepEqual(m, want) {
			t.Fatalf("whoami = %v, want %v", m, want)
		}

		// A tenant the caller creates is not theirs: the token still acts in
		// its own tenant only.
		createTenant(t, e, "acme")
		m = h.ok(h.admin("GET", "/api/v1/whoami", nil), 200)
		if !reflect.DeepEqual(m, want) {
			t.Fatalf("whoami after creating a tenant = %v, want %v", m, want)
		}
		acme := e.adminOf("acme")
		m = h.ok(h.call("GET", "/api/v1/whoami", acme, nil), 200)
		if w := (map[string]any{"operator": "admin", "tenants": []any{map[string]any{"tenant": "acme", "role": "admin"}}}); !reflect.DeepEqual(m, w) {
			t.Fatalf("whoami(acme's admin) = %v, want %v", m, w)
		}

		mia := h.operator("default", "mia", "member")
		m = h.ok(h.call("GET", "/api/v1/whoami", mia, nil), 200)
		want = map[string]any{"operator": "mia", "tenants": []any{map[string]any{"tenant": "default", "role": "member"}}}
		if !reflect.DeepEqual(m, want) {
			t.Fatalf("whoami(mia) = %v, want %v", m, want)
		}
	})
}

func TestOperatorTenants(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		h := newOpHarness(t, e)
		list := h.list(e.operatorToken, "/api/v1/tenants")
		if len(list) != 1 || list[0]["name"] != "default" || list[0]["role"] != "admin" {
			t.Fatalf("tenants = %v", list)
		}

		h.fails(h.admin("POST", "/api/v1/tenants", map[string]any{"name": "acme", "admin": "lee", "label": "x"}), 400, "unknown_field", "label")
		m := h.ok(h.admin("POST", "/api/v1/tenants", map[string]any{"name": "acme", "admin": "lee", "days": 7}), 201)
		admin := m["admin"].(map[string]any)
		if m["name"] != "acme" || m["created_at"] != h.now() || m["id"] == "" || admin["operator"] != "lee" ||
			admin["expires_at"] != h.e.clock.Now().Add(7*24*time.Hour).UTC().Format(time.RFC3339) {
			t.Fatalf("created tenant = %v", m)
		}
		lee := admin["token"].(string)
		// The creator gets no role in the new tenant; the new admin has no
		// role anywhere else.
		if got := h.list(e.operatorToken, "/api/v1/tenants"); len(got) != 1 || got[0]["name"] != "default" {
			t.Fatalf("the creator's tenants = %v", got)
		}
		h.fails(h.call("GET", "/api/v1/tenants/acme/operators", e.operatorToken, nil), 404, "not_found", "")
		if got := h.list(lee, "/api/v1/tenants"); len(got) != 1 || got[0]["name"] != "acme" || got[0]["role"] != "admin" {
			t.Fatalf("lee's tenants = %v", got)
		}
		ops := h.list(lee, "/api/v1/tenants/acme/operators")
		if len(ops) != 1 || ops[0]["name"] != "lee" || ops[0]["role"] != "admin" {
			t.Fatalf("acme operators = %v", ops)
		}
		h.fails(h.call("GET", opTenant+"/operators", lee, nil), 404, "not_found", "")
		// Both audit logs record the creation.
		h.auditEntry("default", "tenant.create", "tenant:acme")
		if entries := h.list(lee, "/api/v1/tenants/acme/audit"); len(entries) != 1 || entries[0]["action"] != "tenant.create" {
			t.Fatalf("acme's audit log = %v", entries)
		}

		// The default admin name is the caller's.
		if m := h.ok(h.admin("POST", "/api/v1/tenants", map[string]any{"name": "beta"}), 201); m["admin"].(map[string]any)["operator"] != "admin" {
			t.Fatalf("created tenant = %v", m)
		}

		h.fails(h.admin("POST", "/api/v1/tenants", map[string]any{"name": "acme"}), 409, "already_exists", "")
		for _, bad := range []any{"Not A Slug", "", "-lead", strings.Repeat("a", 64), "acme_corp", 5} {
			h.fails(h.admin("POST", "/api/v1/tenants", map[string]any{"name": bad}), 400, "invalid_field", "name")
			h.fails(h.admin("POST", "/api/v1/tenants", map[string]any{"name": "gamma", "admin": bad}), 400, "invalid_field", "admin")
		}
		h.fails(h.admin("POST", "/api/v1/tenants", map[string]any{"name": "gamma", "days": -1}), 400, "invalid_field", "days")

		// Only admins of the system tenant create tenants: not a member of
		// it, and not the admin of any other tenant.
		mia := h.operator("default", "mia", "member")
		h.fails(h.call("POST", "/api/v1/tenants", mia, map[string]any{"name": "mias"}), 403, "forbidden", "")
		h.fails(h.call("POST", "/api/v1/tenants", lee, map[string]any{"name": "lees"}), 403, "forbidden", "")
		if got := h.list(mia, "/api/v1/tenants"); len(got) != 1 || got[0]["role"] != "member" {
			t.Fatalf("mia's tenants = %v", got)
		}
		var names []string
		if err := e.store.Read(context.Background(), func(tx agentowl.Tx) error {
			ts, err := tx.TenantList(context.Background())
			for _, t := range ts {
				names = append(names, t.Name)
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(names, []string{"acme", "beta", "default"}) {
			t.Fatalf("refused creations left tenants behind: %v", names)
		}
	})
}

func TestOperatorOperators(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		h := newOpHarness(t, e)
		path := opTenant + "/operators"
		m := h.ok(h.admin("POST", path, map[string]any{"name": "alice", "role": "admin"}), 201)
		if m["name"] != "alice" || m["role"] != "admin" || m["created_at"] != h.now() {
			t.Fatalf("created operator = %v", m)
		}
		h.ok(h.admin("POST", path, map[string]any{"name": "mia", "role": "member"}), 201)

		list := h.list(e.operatorToken, path)
		for name, role := range map[string]string{"admin": "admin", "alice": "admin", "mia": "member"} {
			if got := h.find(list, "name", name); got == nil || got["role"] != role {
				t.Fatalf("operator %s with role %s not listed: %v", name, role, list)
			}
		}
		if len(list) != 3 {
			t.Fatalf("operators = %v", list)
		}

		h.fails(h.admin("POST", path, map[string]any{"name": "bob", "role": "owner"}), 400, "invalid_field", "role")
		h.fails(h.admin("POST", path, map[string]any{"name": "bob"}), 400, "missing_field", "role")
		h.fails(h.admin("POST", path, map[string]any{"name": "Bob", "role": "member"}), 400, "invalid_field", "name")
		h.fails(h.admin("POST", "/api/v1/tenants/nowhere/operators", map[string]any{"name": "bob", "role": "member"}), 404, "not_found", "")

		tok := h.ok(h.admin("POST", opTenant+"/operator-tokens", map[string]any{"operator": "mia"}), 201)["token"].(string)
		h.fails(h.call("POST", path, tok, map[string]any{"name": "bob", "role": "member"}), 403, "forbidden", "")
		if got := h.list(tok, path); len(got) != 3 {
			t.Fatalf("a member lists operators: %v", got)
		}

		// Adding an existing operator again changes their role, at once.
		h.ok(h.admin("POST", path, map[string]any{"name": "mia", "role": "admin"}), 201)
		h.ok(h.call("POST", path, tok, map[string]any{"name": "bob", "role": "member"}), 201)
		if got := h.find(h.list(e.operatorToken, path), "name", "mia"); got["role"] != "admin" {
			t.Fatalf("mia after promotion = %v", got)
		}
	})
}

func TestOperatorTokens(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		h := newOpHarness(t, e)
		path := opTenant + "/operator-tokens"
		m := h.ok(h.admin("POST", path, map[string]any{"label": "laptop"}), 201)
		secret, id := m["token"].(string), m["id"].(string)
		if !strings.HasPrefix(secret, "owl_op_") || m["kind"] != "operator" || m["operator"] != "admin" ||
			m["label"] != "laptop" || m["status"] != "active" || m["created_at"] != h.now() {
			t.Fatalf("issued token = %v", m)
		}
		if _, has := m["expires_at"]; has {
			t.Fatalf("a token without days has expires_at: %v", m)
		}
		if got := h.ok(h.call("GET", "/api/v1/whoami", secret, nil), 200); got["operator"] != "admin" {
			t.Fatalf("new token whoami = %v", got)
		}

		r := h.admin("GET", path, nil)
		list := h.items(h.ok(r, 200))
		if bytes.Contains(r.Body, []byte(secret)) {
			t.Fatalf("token list contains a secret: %s", r.Body)
		}
		for _, it := range list {
			if _, has := it["token"]; has {
				t.Fatalf("token list item has a secret: %v", it)
			}
		}
		if got := h.find(list, "id", id); got == nil || got["label"] != "laptop" || got["status"] != "active" {
			t.Fatalf("issued token not listed: %v", list)
		}
		if h.find(list, "label", "bootstrap") == nil {
			t.Fatalf("bootstrap token not listed: %v", list)
		}

		m = h.ok(h.admin("DELETE", path+"/"+id, nil), 200)
		if m["status"] != "revoked" || m["revoked_at"] != h.now() || m["id"] != id {
			t.Fatalf("revoked token = %v", m)
		}
		h.fails(h.call("GET", "/api/v1/whoami", secret, nil), 401, "unauthenticated", "")
		if got := h.ok(h.admin("DELETE", path+"/"+id, nil), 200); got["status"] != "revoked" {
			t.Fatalf("revoking again = %v", got)
		}
		if got := h.find(h.list(e.operatorToken, path), "id", id); got["status"] != "revoked" {
			t.Fatalf("listed after revocation = %v", got)
		}
		h.fails(h.admin("DELETE", path+"/"+agentowl.NewID(""), nil), 404, "not_found", "")
		h.fails(h.admin("DELETE", path+"/not-an-id", nil), 404, "not_found", "")
		_, provID := h.provisioner("default")
		h.fails(h.admin("DELETE", path+"/"+provID, nil), 404, "not_found", "")

		// Tokens for someone else: admins only, and only for members.
		h.ok(h.admin("POST", opTenant+"/operators", map[string]any{"name": "mia", "role": "member"}), 201)
		m = h.ok(h.admin("POST", path, map[string]any{"operator": "mia", "label": "for mia"}), 201)
		mia, miaID := m["token"].(string), m["id"].(string)
		if m["operator"] != "mia" {
			t.Fatalf("token for mia = %v", m)
		}
		if got := h.ok(h.call("GET", "/api/v1/whoami", mia, nil), 200); got["operator"] != "mia" {
			t.Fatalf("mia's whoami = %v", got)
		}
		h.fails(h.admin("POST", path, map[string]any{"operator": "ghost"}), 404, "not_found", "")
		h.fails(h.call("POST", path, mia, map[string]any{"operator": "admin"}), 403, "forbidden", "")
		own := h.ok(h.call("POST", path, mia, map[string]any{"label": "own"}), 201)
		if own["operator"] != "mia" {
			t.Fatalf("mia's own token = %v", own)
		}
		miaList := h.list(mia, path)
		if len(miaList) != 2 || h.find(miaList, "id", miaID) == nil || h.find(miaList, "id", own["id"]) == nil {
			t.Fatalf("a member must list exactly their own tokens: %v", miaList)
		}
		bootstrap := h.find(h.list(e.operatorToken, path), "label", "bootstrap")
		h.fails(h.call("DELETE", path+"/"+bootstrap["id"].(string), mia, nil), 403, "forbidden", "")
		h.ok(h.admin("GET", "/api/v1/whoami", nil), 200) // the refused revocation did not happen
		if got := h.ok(h.call("DELETE", path+"/"+own["id"].(string), mia, nil), 200); got["status"] != "revoked" {
			t.Fatalf("mia revoking her own token = %v", got)
		}
		h.fails(h.call("GET", "/api/v1/whoami", own["token"].(string), nil), 401, "unauthenticated", "")

		for _, bad := range []any{-1, 366, "1", 1.5} {
			h.fails(h.admin("POST", path, map[string]any{"days": bad}), 400, "invalid_field", "days")
		}
		h.fails(h.admin("POST", path, map[string]any{"label": strings.Repeat("x", 257)}), 400, "invalid_field", "label")

		// days: the token expires that many days later.
		m = h.ok(h.admin("POST", path, map[string]any{"label": "day", "days": 1}), 201)
		day := m["token"].(string)
		if want := e.clock.Now().Add(24 * time.Hour).UTC().Format(time.RFC3339); m["expires_at"] != want {
			t.Fatalf("expires_at = %v, want %s", m["expires_at"], want)
		}
		h.ok(h.call("GET", "/api/v1/whoami", day, nil), 200)
		e.clock.Advance(23 * time.Hour)
		h.ok(h.call("GET", "/api/v1/whoami", day, nil), 200)
		e.clock.Advance(2 * time.Hour)
		h.fails(h.call("GET", "/api/v1/whoami", day, nil), 401, "unauthenticated", "")
		if got := h.find(h.list(e.operatorToken, path), "id", m["id"]); got["status"] != "expired" {
			t.Fatalf("expired token listed as %v", got)
		}
	})
}

func TestOperatorProvisionerTokens(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		h := newOpHarness(t, e)
		path := opTenant + "/provisioner-tokens"
		m := h.ok(h.admin("POST", path, map[string]any{"label": "ci"}), 201)
		secret, id := m["token"].(string), m["id"].(string)
		if !strings.HasPrefix(secret, "owl_prov_") || m["kind"] != "provisioner" || m["label"] != "ci" || m["status"] != "active" {
			t.Fatalf("issued token = %v", m)
		}
		if _, has := m["operator"]; has {
			t.Fatalf("a provisioner token names an operator: %v", m)
		}
		inst, cred := h.provision(secret, map[string]any{"instance_name": "worker"})

		r := h.admin("GET", path, nil)
		list := h.items(h.ok(r, 200))
		if bytes.Contains(r.Body, []byte(secret)) || h.find(list, "id", id) == nil {
			t.Fatalf("list = %s", r.Body)
		}
		for _, it := range list {
			if _, has := it["token"]; has || it["kind"] != "provisioner" {
				t.Fatalf("provisioner token list item = %v", it)
			}
		}

		m = h.ok(h.admin("DELETE", path+"/"+id, nil), 200)
		if m["status"] != "revoked" || m["revoked_at"] != h.now() {
			t.Fatalf("revoked = %v", m)
		}
		h.fails(h.call("POST", "/v1/instances", secret, map[string]any{}, "Idempotency-Key", agentowl.NewID("")), 401, "unauthenticated", "")
		h.fails(h.call("GET", "/v1/instances/"+inst, secret, nil), 401, "unauthenticated", "")
		// The instances it created keep working.
		h.submit(cred, "issue_refund", map[string]any{"amount": 1}, "5m")

		h.fails(h.admin("DELETE", path+"/"+agentowl.NewID(""), nil), 404, "not_found", "")
		opTok := h.ok(h.admin("POST", opTenant+"/operator-tokens", map[string]any{}), 201)
		h.fails(h.admin("DELETE", path+"/"+opTok["id"].(string), nil), 404, "not_found", "")

		mia := h.operator("default", "mia", "member")
		_, otherID := h.provisioner("default")
		h.fails(h.call("POST", path, mia, map[string]any{}), 403, "forbidden", "")
		h.fails(h.call("GET", path, mia, nil), 403, "forbidden", "")
		h.fails(h.call("DELETE", path+"/"+otherID, mia, nil), 403, "forbidden", "")
		h.fails(h.admin("POST", path, map[string]any{"operator": "admin"}), 400, "unknown_field", "operator")

		m = h.ok(h.admin("POST", path, map[string]any{"days": 1}), 201)
		day := m["token"].(string)
		if want := e.clock.Now().Add(24 * time.Hour).UTC().Format(time.RFC3339); m["expires_at"] != want {
			t.Fatalf("expires_at = %v, want %s", m["expires_at"], want)
		}
		h.provision(day, nil)
		e.clock.Advance(25 * time.Hour)
		h.fails(h.call("POST", "/v1/instances", day, map[string]any{}, "Idempotency-Key", agentowl.NewID("")), 401, "unauthenticated", "")
		if got := h.find(h.list(e.operatorToken, path), "id", m["id"]); got["status"] != "expired" {
			t.Fatalf("expired token listed as %v", got)
		}
	})
}

func TestOperatorTenantIsolation(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		h := newOpHarness(t, e)
		// Tenant B, created by the bootstrap admin and populated by its own
		// admin.
		createTenant(t, e, "tenant-b")
		bProv, _ := h.provisioner("tenant-b")
		bInst, bCred := h.provision(bProv, map[string]any{"instance_name": "b-agent"})
		bReq := h.submit(bCred, "wire_money", map[string]any{"amount": 10}, "30m")["id"].(string)
		aInst, aCred := h.instance()
		aReq := h.submit(aCred, "issue_refund", map[string]any{"amount": 1}, "30m")["id"].(string)

		// alice belongs to "default" only.
		alice := h.operator("default", "alice", "admin")
		for _, p := range []string{"/approvals", "/approvals/" + bReq, "/instances", "/instances/" + bInst, "/policies",
			"/audit", "/operators", "/operator-tokens", "/provisioner-tokens"} {
			// A tenant that does not exist answers the same.
			for _, tenant := range []string{"tenant-b", "tenant-z"} {
				path := "/api/v1/tenants/" + tenant + p
				if r := h.call("GET", path, alice, nil); r.Status != 404 || r.ErrorCode(t) != "not_found" {
					t.Errorf("GET %s by an operator of another tenant: %d %s, want 404 not_found", path, r.Status, r.Body)
				}
			}
		}
		h.fails(h.decide(alice, "tenant-b", bReq, map[string]any{"decision": "approve"}), 404, "not_found", "")
		h.fails(h.call("POST", "/api/v1/tenants/tenant-b/provisioner-tokens", alice, map[string]any{}), 404, "not_found", "")
		h.fails(h.call("POST", "/api/v1/tenants/tenant-b/policies", alice, map[string]any{"tool": "*", "effect": "approve"}), 404, "not_found", "")
		h.fails(h.call("PATCH", "/api/v1/tenants/tenant-b/instances/"+bInst, alice, map[string]any{"approval_validity": "1h"}), 404, "not_found", "")
		if got := h.list(alice, "/api/v1/tenants"); len(got) != 1 || got[0]["name"] != "default" {
			t.Fatalf("alice's tenants = %v", got)
		}

		// B's objects are not reachable through A's paths either, whoever asks.
		for _, tok := range []string{alice, e.operatorToken} {
			h.fails(h.call("GET", opTenant+"/approvals/"+bReq, tok, nil), 404, "not_found", "")
			h.fails(h.decide(tok, "default", bReq, map[string]any{"decision": "approve"}), 404, "not_found", "")
			h.fails(h.call("GET", opTenant+"/instances/"+bInst, tok, nil), 404, "not_found", "")
			h.fails(h.call("PATCH", opTenant+"/instances/"+bInst, tok, map[string]any{"approval_validity": "1h"}), 404, "not_found", "")
			approvals := h.list(tok, opTenant+"/approvals")
			if len(approvals) != 1 || approvals[0]["request"].(map[string]any)["id"] != aReq {
				t.Fatalf("tenant A's approvals = %v", approvals)
			}
			if got := h.list(tok, opTenant+"/approvals?instance="+bInst); len(got) != 0 {
				t.Fatalf("filtering A's approvals by B's instance = %v", got)
			}
			instances := h.list(tok, opTenant+"/instances")
			if len(instances) != 1 || instances[0]["id"] != aInst {
				t.Fatalf("tenant A's instances = %v", instances)
			}
		}
		h.fails(h.admin("POST", opTenant+"/policies", map[string]any{"tool": "*", "effect": "approve", "instance_id": bInst}), 404, "not_found", "")
		// A tenant-wide rule of A does not decide B's requests.
		h.ok(h.admin("POST", opTenant+"/policies", map[string]any{"tool": "*", "effect": "deny"}), 201)
		h.wantStatus(h.submit(bCred, "wire_money", map[string]any{"amount": 11}, "30m"), "pending")

		// B's request is untouched and B's admin path still sees it.
		h.wantStatus(h.request(bCred, bReq).JSON(t), "pending")
		got := h.ok(h.admin("GET", "/api/v1/tenants/tenant-b/approvals/"+bReq, nil), 200)
		if got["instance_id"] != bInst {
			t.Fatalf("B's approval via B = %v", got)
		}
		// B's audit log holds only B's changes.
		for _, en := range h.list(e.adminOf("tenant-b"), "/api/v1/tenants/tenant-b/audit") {
			if en["target"] == "operator:alice" || en["target"] == "instance:"+aInst {
				t.Fatalf("A's change in B's audit log: %v", en)
			}
		}
		// Provider credentials are tenant-bound too.
		h.fails(h.call("GET", "/v1/instances/"+aInst, bProv, nil), 404, "not_found", "")
		h.fails(h.call("GET", "/v1/requests/"+aReq, bCred, nil), 404, "not_found", "")
	})
}

func TestOperatorCredentialKinds(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		h := newOpHarness(t, e)
		prov, _ := h.provisioner("default")
		inst, cred := h.provision(prov, nil)
		req := h.submit(cred, "issue_refund", map[string]any{"amount": 1}, "30m")["id"].(string)
		op := e.operatorToken
		key := func() []string { return []string{"Idempotency-Key", agentowl.NewID("")} }

		// An operator token on the provider API.
		h.fails(h.call("POST", "/v1/instances", op, map[string]any{}, key()...), 403, "forbidden", "")
		h.fails(h.call("GET", "/v1/instances/"+inst, op, nil), 403, "forbidden", "")
		h.fails(h.call("PATCH", "/v1/instances/"+inst, op, map[string]any{"instance_name": "x"}, key()...), 403, "forbidden", "")
		h.fails(h.call("DELETE", "/v1/instances/"+inst, op, nil), 403, "forbidden", "")
		h.fails(h.call("POST", "/v1/requests", op, map[string]any{"tool": "t", "arguments": map[string]any{}, "timeout": "1m"}, key()...), 403, "forbidden", "")
		h.fails(h.call("GET", "/v1/requests/"+req, op, nil), 403, "forbidden", "")
		h.fails(h.call("DELETE", "/v1/requests/"+req, op, nil), 403, "forbidden", "")

		// Instance credentials and provisioner tokens on the operator API.
		for _, tok := range []string{cred, prov} {
			h.fails(h.call("GET", "/api/v1/whoami", tok, nil), 403, "forbidden", "")
			h.fails(h.call("GET", opTenant+"/approvals", tok, nil), 403, "forbidden", "")
			h.fails(h.decide(tok, "default", req, map[string]any{"decision": "approve"}), 403, "forbidden", "")
			h.fails(h.call("POST", opTenant+"/policies", tok, map[string]any{"tool": "*", "effect": "approve"}), 403, "forbidden", "")
		}
		h.wantStatus(h.request(cred, req).JSON(t), "pending")

		// A revoked operator token authenticates nowhere: 401, not 403.
		m := h.ok(h.admin("POST", opTenant+"/operator-tokens", map[string]any{}), 201)
		h.ok(h.admin("DELETE", opTenant+"/operator-tokens/"+m["id"].(string), nil), 200)
		h.fails(h.call("POST", "/v1/instances", m["token"].(string), map[string]any{}, key()...), 401, "unauthenticated", "")
	})
}

func TestOperatorAudit(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		h := newOpHarness(t, e)
		type change struct{ tenant, actor, action, target, requestID string }
		var changes []change
		rid := func(r *response) string { return r.Header.Get("X-Request-ID") }
		record := func(r *response, status int, tenant, actor, action, target string) map[string]any {
			t.Helper()
			m := h.ok(r, status)
			changes = append(changes, change{tenant, actor, action, target, rid(r)})
			return m
		}
		const admin = "operator:admin"

		record(h.admin("POST", "/api/v1/tenants", map[string]any{"name": "acme"}), 201, "default", admin, "tenant.create", "tenant:acme")
		record(h.admin("POST", opTenant+"/operators", map[string]any{"name": "alice", "role": "admin"}), 201, "default", admin, "operator.create", "operator:alice")
		r := h.admin("POST", opTenant+"/operator-tokens", map[string]any{"operator": "alice"})
		alice := h.ok(r, 201)
		aliceTarget := "operator-token:" + alice["id"].(string)
		changes = append(changes, change{"default", admin, "operator_token.create", aliceTarget, rid(r)})
		record(h.call("DELETE", opTenant+"/operator-tokens/"+alice["id"].(string), alice["token"].(string), nil), 200,
			"default", "operator:alice", "operator_token.revoke", aliceTarget)

		r = h.admin("POST", opTenant+"/provisioner-tokens", map[string]any{"label": "ci"})
		prov := h.ok(r, 201)
		provTarget, provActor := "provisioner-token:"+prov["id"].(string), "provisioner:"+prov["id"].(string)
		changes = append(changes, change{"default", admin, "provisioner_token.create", provTarget, rid(r)})

		r = h.call("POST", "/v1/instances", prov["token"].(string), map[string]any{"instance_name": "bot"}, "Idempotency-Key", agentowl.NewID(""))
		created := h.ok(r, 201)
		inst := created["instance"].(map[string]any)["id"].(string)
		cred := created["credential"].(map[string]any)["token"].(string)
		changes = append(changes, change{"default", provActor, "instance.create", "instance:" + inst, rid(r)})
		record(h.call("PATCH", "/v1/instances/"+inst, prov["token"].(string), map[string]any{"instance_name": "bot-2"}, "Idempotency-Key", agentowl.NewID("")),
			200, "default", provActor, "instance.update", "instance:"+inst)
		record(h.admin("PATCH", opTenant+"/instances/"+inst, map[string]any{"approval_validity": "1h"}), 200,
			"default", admin, "instance.set_approval_validity", "instance:"+inst)

		r = h.admin("POST", opTenant+"/policies", map[string]any{"tool": "noop", "effect": "deny"})
		policy := h.ok(r, 201)["id"].(string)
		changes = append(changes, change{"default", admin, "policy.create", "policy:" + policy, rid(r)})
		record(h.admin("DELETE", opTenant+"/policies/"+policy, nil), 204, "default", admin, "policy.delete", "policy:"+policy)

		req := h.submit(cred, "issue_refund", map[string]any{"amount": 1}, "30m")["id"].(string)
		record(h.decide(e.operatorToken, "default", req, map[string]any{"decision": "approve"}), 200,
			"default", admin, "approval.decide", "approval-request:"+req)
		record(h.admin("DELETE", opTenant+"/provisioner-tokens/"+prov["id"].(string), nil), 200,
			"default", admin, "provisioner_token.revoke", provTarget)

		// Refused changes leave no entry.
		h.fails(h.admin("POST", "/api/v1/tenants", map[string]any{"name": "acme"}), 409, "already_exists", "")
		h.fails(h.decide(e.operatorToken, "default", req, map[string]any{"decision": "deny"}), 409, "already_terminal", "")

		for _, c := range changes {
			en := h.auditEntry(c.tenant, c.action, c.target)
			if en["actor"] != c.actor || en["request_id"] != c.requestID || en["at"] != h.now() {
				t.Fatalf("audit entry %v, want actor %s, request_id %s, at %s", en, c.actor, c.requestID, h.now())
			}
			if c.requestID == "" {
				t.Fatalf("no X-Request-ID recorded for %v", c)
			}
		}
		if d := h.auditEntry("default", "approval.decide", "approval-request:"+req)["details"]; !reflect.DeepEqual(d, map[string]any{"decision": "approved"}) {
			t.Fatalf("approval.decide details = %v", d)
		}
		if d := h.auditEntry("default", "operator.create", "operator:alice")["details"]; !reflect.DeepEqual(d, map[string]any{"role": "admin"}) {
			t.Fatalf("operator.create details = %v", d)
		}

		// Newest first; each change exactly once; the offline bootstrap last.
		entries := h.list(e.operatorToken, opTenant+"/audit")
		wantActions := []string{"admin.bootstrap"}
		for _, c := range changes {
			if c.tenant == "default" {
				wantActions = append(wantActions, c.action)
			}
		}
		if len(entries) != len(wantActions) {
			t.Fatalf("%d audit entries, want %d: %v", len(entries), len(wantActions), entries)
		}
		for i, en := range entries {
			if want := wantActions[len(wantActions)-1-i]; en["action"] != want {
				t.Fatalf("entry %d is %v, want action %s", i, en, want)
			}
			if i > 0 && en["id"].(float64) >= entries[i-1]["id"].(float64) {
				t.Fatalf("audit not newest first: %v", entries)
			}
		}
		if last := entries[len(entries)-1]; last["actor"] != "system" || last["request_id"] != "" {
			t.Fatalf("bootstrap entry = %v", last)
		}

		if got := h.list(e.operatorToken, opTenant+"/audit?limit=2"); len(got) != 2 || got[0]["action"] != "provisioner_token.revoke" {
			t.Fatalf("audit?limit=2 = %v", got)
		}
		for _, bad := range []string{"0", "1001", "ten", "-1"} {
			h.fails(h.admin("GET", opTenant+"/audit?limit="+bad, nil), 400, "invalid_field", "limit")
		}
		mia := h.operator("default", "mia", "member")
		if r := h.call("GET", opTenant+"/audit", mia, nil); r.Status != 403 || r.ErrorCode(t) != "forbidden" {
			t.Fatalf("GET %s/audit by a member: %d %s, want 403 forbidden (the audit log is admin only)", opTenant, r.Status, r.Body)
		}
	})
}

func TestOperatorApprovals(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		h := newOpHarness(t, e)
		inst, cred := h.instance()
		r1 := h.submit(cred, "issue_refund", map[string]any{"amount": 4900, "currency": "GBP"}, "30m")
		id1 := r1["id"].(string)

		list := h.list(e.operatorToken, opTenant+"/approvals")
		if len(list) != 1 || list[0]["instance_id"] != inst || !reflect.DeepEqual(list[0]["request"], r1) {
			t.Fatalf("approvals = %v, want the submitted request %v", list, r1)
		}
		if _, has := list[0]["decided_by"]; has {
			t.Fatalf("a pending request has decided_by: %v", list[0])
		}
		for q, n := range map[string]int{"?status=pending": 1, "?status=approved": 0, "?instance=" + inst: 1,
			"?instance=" + agentowl.NewID(""): 0, "?limit=1": 1} {
			if got := h.list(e.operatorToken, opTenant+"/approvals"+q); len(got) != n {
				t.Fatalf("approvals%s = %v, want %d items", q, got, n)
			}
		}
		h.fails(h.admin("GET", opTenant+"/approvals?status=bogus", nil), 400, "invalid_field", "status")
		h.fails(h.admin("GET", opTenant+"/approvals?limit=0", nil), 400, "invalid_field", "limit")

		view := h.ok(h.admin("GET", opTenant+"/approvals/"+id1, nil), 200)
		if !reflect.DeepEqual(view["request"], h.request(cred, id1).JSON(t)) || view["instance_id"] != inst {
			t.Fatalf("inspect = %v", view)
		}

		// Approve with valid_for: the answer is the exact provider object.
		r := h.decide(e.operatorToken, "default", id1, map[string]any{"decision": "approve", "valid_for": "10m", "note": "checked"})
		got := h.ok(r, 200)
		h.wantStatus(got, "approved")
		if d := got["decision"].(map[string]any); d["status"] != "approved" || d["note"] != "checked" || d["decided_at"] != h.now() {
			t.Fatalf("decision = %v", d)
		}
		if v := h.validity(got); v != 10*time.Minute {
			t.Fatalf("expires_at - decided_at = %s, want 10m", v)
		}
		if provider := h.request(cred, id1); !bytes.Equal(r.Body, provider.Body) {
			t.Fatalf("decision answer differs from GET /v1/requests/{id}:\n%s\n%s", r.Body, provider.Body)
		}
		view = h.ok(h.admin("GET", opTenant+"/approvals/"+id1, nil), 200)
		if view["decided_by"] != "operator:admin" || view["request"].(map[string]any)["status"] != "approved" {
			t.Fatalf("inspect after approval = %v", view)
		}
		h.fails(h.decide(e.operatorToken, "default", id1, map[string]any{"decision": "deny"}), 409, "already_terminal", "")
		h.fails(h.decide(e.operatorToken, "default", id1, map[string]any{"decision": "approve"}), 409, "already_terminal", "")
		if again := h.request(cred, id1); !bytes.Equal(again.Body, r.Body) {
			t.Fatalf("a refused second decision changed the request: %s", again.Body)
		}

		// Deny with a note: no expires_at.
		id2 := h.submit(cred, "issue_refund", map[string]any{"amount": 1}, "30m")["id"].(string)
		h.fails(h.decide(e.operatorToken, "default", id2, map[string]any{"decision": "deny", "valid_for": "5m"}), 400, "invalid_field", "valid_for")
		got = h.ok(h.decide(e.operatorToken, "default", id2, map[string]any{"decision": "deny", "note": "too risky"}), 200)
		h.wantStatus(got, "denied")
		d := got["decision"].(map[string]any)
		if _, has := d["expires_at"]; has || d["note"] != "too risky" || d["status"] != "denied" {
			t.Fatalf("denial = %v", got)
		}
		h.wantStatus(h.request(cred, id2).JSON(t), "denied")

		// Without valid_for the instance's validity (5m by default) applies;
		// members may decide.
		mia := h.operator("default", "mia", "member")
		id3 := h.submit(cred, "issue_refund", map[string]any{"amount": 2}, "30m")["id"].(string)
		if v := h.validity(h.ok(h.decide(mia, "default", id3, map[string]any{"decision": "approve"}), 200)); v != 5*time.Minute {
			t.Fatalf("default validity = %s, want 5m", v)
		}
		if view := h.ok(h.admin("GET", opTenant+"/approvals/"+id3, nil), 200); view["decided_by"] != "operator:mia" {
			t.Fatalf("decided_by = %v", view["decided_by"])
		}

		// Invalid decisions change nothing.
		id4 := h.submit(cred, "issue_refund", map[string]any{"amount": 3}, "30m")["id"].(string)
		for _, c := range []struct {
			body  map[string]any
			code  string
			param string
		}{
			{map[string]any{"decision": "maybe"}, "invalid_field", "decision"},
			{map[string]any{"decision": "APPROVE"}, "invalid_field", "decision"},
			{map[string]any{"decision": true}, "invalid_field", "decision"},
			{map[string]any{"note": "x"}, "missing_field", "decision"},
			{map[string]any{"decision": "approve", "valid_for": "10 minutes"}, "invalid_field", "valid_for"},
			{map[string]any{"decision": "approve", "valid_for": "0s"}, "invalid_field", "valid_for"},
			{map[string]any{"decision": "approve", "valid_for": "25h"}, "invalid_field", "valid_for"},
			{map[string]any{"decision": "approve", "note": strings.Repeat("n", 4097)}, "invalid_field", "note"},
			{map[string]any{"decision": "approve", "reason": "x"}, "unknown_field", "reason"},
		} {
			h.fails(h.decide(e.operatorToken, "default", id4, c.body), 400, c.code, c.param)
		}
		h.wantStatus(h.request(cred, id4).JSON(t), "pending")

		for _, unknown := range []string{agentowl.NewID(""), "not-a-uuid"} {
			h.fails(h.decide(e.operatorToken, "default", unknown, map[string]any{"decision": "approve"}), 404, "not_found", "")
			h.fails(h.admin("GET", opTenant+"/approvals/"+unknown, nil), 404, "not_found", "")
		}

		// A cancelled request cannot be decided.
		id5 := h.submit(cred, "issue_refund", map[string]any{"amount": 5}, "30m")["id"].(string)
		h.ok(h.call("DELETE", "/v1/requests/"+id5, cred, nil), 200)
		h.fails(h.decide(e.operatorToken, "default", id5, map[string]any{"decision": "approve"}), 409, "already_terminal", "")
		if view := h.ok(h.admin("GET", opTenant+"/approvals/"+id5, nil), 200); view["decided_by"] != "instance" {
			t.Fatalf("cancelled request view = %v", view)
		}

		// Past the deadline: already_terminal, and the request reads expired.
		late := h.submit(cred, "issue_refund", map[string]any{"amount": 6}, "1m")
		id6 := late["id"].(string)
		e.clock.Advance(61 * time.Second)
		h.fails(h.decide(e.operatorToken, "default", id6, map[string]any{"decision": "approve"}), 409, "already_terminal", "")
		view = h.ok(h.admin("GET", opTenant+"/approvals/"+id6, nil), 200)
		req := view["request"].(map[string]any)
		h.wantStatus(req, "expired")
		if view["decided_by"] != "deadline" || req["decision"].(map[string]any)["decided_at"] != late["deadline_at"] {
			t.Fatalf("expired view = %v", view)
		}
		h.wantStatus(h.request(cred, id6).JSON(t), "expired")
		for _, it := range h.list(e.operatorToken, opTenant+"/approvals?status=pending") {
			if it["request"].(map[string]any)["id"] == id6 {
				t.Fatalf("an expired request is listed as pending: %v", it)
			}
		}
	})
}

func TestOperatorInstances(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		h := newOpHarness(t, e)
		prov, _ := h.provisioner("default")
		inst, cred := h.provision(prov, map[string]any{"instance_name": "laptop"})
		unnamed, _ := h.provision(prov, nil)

		list := h.list(e.operatorToken, opTenant+"/instances")
		want := map[string]any{"id": inst, "name": "laptop", "approval_validity": "5m", "created_at": h.now()}
		if len(list) != 2 || !reflect.DeepEqual(h.find(list, "id", inst), want) {
			t.Fatalf("instances = %v, want %v among them", list, want)
		}
		if got := h.find(list, "id", unnamed); got == nil || got["name"] != "instance-"+unnamed[:8] {
			t.Fatalf("unnamed instance = %v", got)
		}
		if got := h.ok(h.admin("GET", opTenant+"/instances/"+inst, nil), 200); !reflect.DeepEqual(got, want) {
			t.Fatalf("inspect = %v, want %v", got, want)
		}

		got := h.ok(h.admin("PATCH", opTenant+"/instances/"+inst, map[string]any{"approval_validity": "2h"}), 200)
		if got["approval_validity"] != "2h" || got["name"] != "laptop" {
			t.Fatalf("patched = %v", got)
		}
		if got := h.ok(h.admin("GET", opTenant+"/instances/"+inst, nil), 200); got["approval_validity"] != "2h" {
			t.Fatalf("inspect after patch = %v", got)
		}
		// Approvals made from now on use it: by an operator...
		id := h.submit(cred, "issue_refund", map[string]any{"amount": 1}, "30m")["id"].(string)
		if v := h.validity(h.ok(h.decide(e.operatorToken, "default", id, map[string]any{"decision": "approve"}), 200)); v != 2*time.Hour {
			t.Fatalf("approval validity = %s, want 2h", v)
		}
		// ... and by a policy rule.
		h.ok(h.admin("POST", opTenant+"/policies", map[string]any{"tool": "auto", "effect": "approve"}), 201)
		auto := h.submit(cred, "auto", map[string]any{}, "30m")
		h.wantStatus(auto, "approved")
		if v := h.validity(auto); v != 2*time.Hour {
			t.Fatalf("policy approval validity = %s, want 2h", v)
		}
		if got := h.ok(h.admin("PATCH", opTenant+"/instances/"+inst, map[string]any{"approval_validity": "90s"}), 200); got["approval_validity"] != "90s" {
			t.Fatalf("patched to 90s = %v", got)
		}

		for _, c := range []struct {
			body  map[string]any
			code  string
			param string
		}{
			{map[string]any{"approval_validity": "soon"}, "invalid_field", "approval_validity"},
			{map[string]any{"approval_validity": "25h"}, "invalid_field", "approval_validity"},
			{map[string]any{"approval_validity": 300}, "invalid_field", "approval_validity"},
			{map[string]any{}, "missing_field", "approval_validity"},
			{map[string]any{"approval_validity": "1h", "name": "x"}, "unknown_field", "name"},
		} {
			h.fails(h.admin("PATCH", opTenant+"/instances/"+inst, c.body), 400, c.code, c.param)
		}
		for _, unknown := range []string{agentowl.NewID(""), "nope"} {
			h.fails(h.admin("GET", opTenant+"/instances/"+unknown, nil), 404, "not_found", "")
			h.fails(h.admin("PATCH", opTenant+"/instances/"+unknown, map[string]any{"approval_validity": "1h"}), 404, "not_found", "")
		}

		mia := h.operator("default", "mia", "member")
		h.fails(h.call("PATCH", opTenant+"/instances/"+inst, mia, map[string]any{"approval_validity": "1h"}), 403, "forbidden", "")
		if got := h.list(mia, opTenant+"/instances"); len(got) != 2 {
			t.Fatalf("a member lists instances: %v", got)
		}

		// A deleted instance leaves the list but can still be inspected.
		h.ok(h.call("DELETE", "/v1/instances/"+inst, prov, nil), 204)
		if got := h.list(e.operatorToken, opTenant+"/instances"); len(got) != 1 || got[0]["id"] != unnamed {
			t.Fatalf("instances after deletion = %v", got)
		}
		got = h.ok(h.admin("GET", opTenant+"/instances/"+inst, nil), 200)
		if got["deleted_at"] != h.now() {
			t.Fatalf("deleted instance = %v", got)
		}
		h.fails(h.admin("PATCH", opTenant+"/instances/"+inst, map[string]any{"approval_validity": "1h"}), 404, "not_found", "")
	})
}

func TestOperatorPolicies(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		h := newOpHarness(t, e)
		path := opTenant + "/policies"
		prov, _ := h.provisioner("default")
		inst, cred := h.provision(prov, nil)
		_, cred2 := h.provision(prov, nil)

		small := h.ok(h.admin("POST", path, map[string]any{"name": "small refunds", "tool": "issue_refund",
			"condition": "arguments.amount <= 1000", "effect": "approve", "note": "small refund"}), 201)
		want := map[string]any{"id": small["id"], "name": "small refunds", "tool": "issue_refund",
			"condition": "arguments.amount <= 1000", "effect": "approve", "note": "small refund", "priority": float64(0),
			"created_at": h.now()}
		if !reflect.DeepEqual(small, want) {
			t.Fatalf("created policy = %v, want %v", small, want)
		}

		ok := h.submit(cred, "issue_refund", map[string]any{"amount": 500}, "30m")
		h.wantStatus(ok, "approved")
		if v := h.validity(ok); v != 5*time.Minute || ok["decision"].(map[string]any)["note"] != "small refund" {
			t.Fatalf("policy approval = %v", ok)
		}
		if view := h.ok(h.admin("GET", opTenant+"/approvals/"+ok["id"].(string), nil), 200); view["decided_by"] != "policy:"+small["id"].(string) {
			t.Fatalf("decided_by = %v", view["decided_by"])
		}
		h.wantStatus(h.submit(cred, "issue_refund", map[string]any{"amount": 5000}, "30m"), "pending")
		h.wantStatus(h.submit(cred, "issue_refund", map[string]any{"amount": 1000}, "30m"), "approved")
		h.wantStatus(h.submit(cred, "issue_refund", map[string]any{"amount": "500"}, "30m"), "pending") // type mismatch: no match
		h.wantStatus(h.submit(cred, "issue_refund", map[string]any{"currency": "GBP"}, "30m"), "pending")
		h.wantStatus(h.submit(cred, "send_email", map[string]any{"amount": 1}, "30m"), "pending")

		// A later deny rule for every tool, without a condition.
		e.clock.Advance(time.Second)
		deny := h.ok(h.admin("POST", path, map[string]any{"tool": "*", "effect": "deny", "note": "blocked"}), 201)
		if deny["name"] != "deny *" {
			t.Fatalf("default name = %v", deny["name"])
		}
		if _, has := deny["condition"]; has {
			t.Fatalf("a rule without condition shows one: %v", deny)
		}
		denied := h.submit(cred, "send_email", map[string]any{"to": "x"}, "30m")
		h.wantStatus(denied, "denied")
		if d := denied["decision"].(map[string]any); d["note"] != "blocked" {
			t.Fatalf("policy denial = %v", denied)
		}
		if _, has := denied["decision"].(map[string]any)["expires_at"]; has {
			t.Fatalf("a denial has expires_at: %v", denied)
		}
		h.wantStatus(h.submit(cred, "issue_refund", map[string]any{"amount": 500}, "30m"), "approved") // older rule first
		h.wantStatus(h.submit(cred, "issue_refund", map[string]any{"amount": 5000}, "30m"), "denied")

		rules := h.list(e.operatorToken, path)
		if len(rules) != 2 || rules[0]["id"] != small["id"] || rules[1]["id"] != deny["id"] {
			t.Fatalf("policies = %v", rules)
		}

		h.ok(h.admin("DELETE", path+"/"+deny["id"].(string), nil), 204)
		h.wantStatus(h.submit(cred, "send_email", map[string]any{"to": "y"}, "30m"), "pending")
		if rules := h.list(e.operatorToken, path); len(rules) != 1 {
			t.Fatalf("policies after delete = %v", rules)
		}
		h.fails(h.admin("DELETE", path+"/"+deny["id"].(string), nil), 404, "not_found", "")
		h.fails(h.admin("DELETE", path+"/"+agentowl.NewID(""), nil), 404, "not_found", "")

		// Instance rules come before tenant rules, whatever their priority.
		scoped := h.ok(h.admin("POST", path, map[string]any{"tool": "scoped", "effect": "deny", "instance_id": inst, "priority": 5}), 201)
		if scoped["instance_id"] != inst || scoped["priority"] != float64(5) {
			t.Fatalf("scoped rule = %v", scoped)
		}
		h.ok(h.admin("POST", path, map[string]any{"tool": "scoped", "effect": "approve", "priority": -10}), 201)
		h.wantStatus(h.submit(cred, "scoped", map[string]any{}, "30m"), "denied")
		h.wantStatus(h.submit(cred2, "scoped", map[string]any{}, "30m"), "approved")

		for _, c := range []struct {
			body  map[string]any
			code  string
			param string
		}{
			{map[string]any{"tool": "t", "effect": "approve", "condition": "arguments.amount <="}, "invalid_policy", "condition"},
			{map[string]any{"tool": "t", "effect": "approve", "condition": "arguments.amount + 1"}, "invalid_policy", "condition"},
			{map[string]any{"tool": "t", "effect": "approve", "condition": `"yes"`}, "invalid_policy", "condition"},
			{map[string]any{"tool": "t", "effect": "approve", "condition": "unknown_var == 1"}, "invalid_policy", "condition"},
			{map[string]any{"tool": "t", "effect": "maybe"}, "invalid_policy", "effect"},
			{map[string]any{"tool": "", "effect": "deny"}, "invalid_policy", "tool"},
			{map[string]any{"effect": "deny"}, "missing_field", "tool"},
			{map[string]any{"tool": "t"}, "missing_field", "effect"},
			{map[string]any{"tool": "t", "effect": "deny", "priority": "high"}, "invalid_field", "priority"},
			{map[string]any{"tool": "t", "effect": "deny", "when": "always"}, "unknown_field", "when"},
		} {
			h.fails(h.admin("POST", path, c.body), 400, c.code, c.param)
		}
		h.fails(h.admin("POST", path, map[string]any{"tool": "t", "effect": "deny", "instance_id": agentowl.NewID("")}), 404, "not_found", "")
		if rules := h.list(e.operatorToken, path); len(rules) != 3 {
			t.Fatalf("refused rules were stored: %v", rules)
		}

		mia := h.operator("default", "mia", "member")
		h.fails(h.call("POST", path, mia, map[string]any{"tool": "*", "effect": "approve"}), 403, "forbidden", "")
		h.fails(h.call("DELETE", path+"/"+small["id"].(string), mia, nil), 403, "forbidden", "")
		if rules := h.list(mia, path); len(rules) != 3 {
			t.Fatalf("a member lists policies: %v", rules)
		}
	})
}

func TestOperatorBadInput(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		h := newOpHarness(t, e)
		inst, cred := h.instance()
		req := h.submit(cred, "issue_refund", map[string]any{"amount": 1}, "30m")["id"].(string)
		big := `{"pad":"` + strings.Repeat("a", 1<<20) + `"}`

		endpoints := []struct {
			method, path string
			valid        map[string]any
			required     string
		}{
			{"POST", "/api/v1/tenants", map[string]any{"name": "x1"}, "name"},
			{"POST", opTenant + "/operators", map[string]any{"name": "x2", "role": "member"}, "name"},
			{"POST", opTenant + "/operator-tokens", map[string]any{"label": "x"}, ""},
			{"POST", opTenant + "/provisioner-tokens", map[string]any{"label": "x"}, ""},
			{"PATCH", opTenant + "/instances/" + inst, map[string]any{"approval_validity": "5m"}, "approval_validity"},
			{"POST", opTenant + "/approvals/" + req + "/decision", map[string]any{"decision": "deny"}, "decision"},
			{"POST", opTenant + "/policies", map[string]any{"tool": "t", "effect": "deny"}, "tool"},
		}
		for _, ep := range endpoints {
			do := func(body any, headers ...string) *response {
				t.Helper()
				return h.admin(ep.method, ep.path, body, headers...)
			}
			for _, malformed := range []string{`{"name":`, `null`, `[]`, `"x"`, `{} {}`, `{"a":1}x`, ``} {
				h.fails(do(malformed), 400, "invalid_json", "")
			}
			h.fails(do(ep.valid, "Content-Type", "text/plain"), 400, "invalid_content_type", "")
			h.fails(do(ep.valid, "Content-Type", ""), 400, "invalid_content_type", "")
			h.fails(do(ep.valid, "Content-Type", "application/x-www-form-urlencoded"), 400, "invalid_content_type", "")
			withUnknown := map[string]any{"bogus_field": 1}
			for k, v := range ep.valid {
				withUnknown[k] = v
			}
			h.fails(do(withUnknown), 400, "unknown_field", "bogus_field")
			if ep.required != "" {
				h.fails(do(map[string]any{}), 400, "missing_field", ep.required)
			}
			h.fails(do(big), 413, "request_too_large", "")
			for _, tok := range []string{"", "nonsense", "owl_op_" + strings.Repeat("A", 43), "owl_op_"} {
				h.fails(h.call(ep.method, ep.path, tok, ep.valid), 401, "unauthenticated", "")
			}
			h.fails(h.call(ep.method, ep.path, "", ep.valid, "Authorization", "Basic YWRtaW46YWRtaW4="), 401, "unauthenticated", "")
		}
		// Nothing above was applied.
		h.wantStatus(h.request(cred, req).JSON(t), "pending")
		if got := h.list(e.operatorToken, "/api/v1/tenants"); len(got) != 1 {
			t.Fatalf("tenants = %v", got)
		}

		// A media type parameter is fine; the scheme name is case-insensitive.
		h.ok(h.admin("POST", "/api/v1/tenants", map[string]any{"name": "x1"}, "Content-Type", "application/json; charset=utf-8"), 201)
		h.ok(h.call("GET", "/api/v1/whoami", "", nil, "Authorization", "bearer "+e.operatorToken), 200)

		for _, path := range []string{"/api/v1/whoami", "/api/v1/tenants", opTenant + "/approvals", opTenant + "/audit",
			opTenant + "/instances/" + inst, opTenant + "/policies", opTenant + "/operator-tokens"} {
			for _, tok := range []string{"", "garbage"} {
				h.fails(h.call("GET", path, tok, nil), 401, "unauthenticated", "")
			}
		}
		for _, path := range []string{opTenant + "/operator-tokens/" + agentowl.NewID(""), opTenant + "/policies/" + agentowl.NewID("")} {
			h.fails(h.call("DELETE", path, "garbage", nil), 401, "unauthenticated", "")
		}

		// The provider API bounds bodies the same way (documented 413s).
		prov, _ := h.provisioner("default")
		h.fails(h.call("POST", "/v1/instances", prov, big, "Idempotency-Key", agentowl.NewID("")), 413, "request_too_large", "")
		h.fails(h.call("PATCH", "/v1/instances/"+inst, prov, big, "Idempotency-Key", agentowl.NewID("")), 413, "request_too_large", "")
		h.fails(h.call("POST", "/v1/requests", cred, big, "Idempotency-Key", agentowl.NewID("")), 413, "request_too_large", "")
	})
}

func TestOperatorHealthAndMetrics(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		h := newOpHarness(t, e)
		b := buildinfo.Get()
		if got := h.ok(h.call("GET", "/healthz", "", nil), 200); !reflect.DeepEqual(got,
			map[string]any{"status": "ok", "version": b.Version, "commit": b.Commit}) {
			t.Fatalf("healthz = %v", got)
		}
		want := map[string]any{"status": "ready", "database": e.store.Dialect()}
		if got := h.ok(h.call("GET", "/readyz", "", nil), 200); !reflect.DeepEqual(got, want) {
			t.Fatalf("readyz = %v, want %v", got, want)
		}
		h.ok(h.admin("GET", "/api/v1/whoami", nil), 200)
		h.fails(h.call("GET", "/api/v1/whoami", "garbage", nil), 401, "unauthenticated", "")
		r := h.call("GET", "/metrics", "", nil)
		if r.Status != 200 || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/plain") {
			t.Fatalf("metrics: %d %s", r.Status, r.Header.Get("Content-Type"))
		}
		for _, line := range []string{
			`agentowl_http_requests_total{method="GET",status="200",surface="operator"} 1`,
			`agentowl_http_requests_total{method="GET",status="401",surface="operator"} 1`,
			"agentowl_http_request_duration_seconds_bucket",
		} {
			if !bytes.Contains(r.Body, []byte(line)) {
				t.Fatalf("metrics lack %q:\n%s", line, r.Body)
			}
		}

	})
}

// TestOperatorReadinessWithoutDatabase closes the server's store under it,
// so that /readyz must report the database as unreachable.
func TestOperatorReadinessWithoutDatabase(t *testing.T) {
	for _, b := range storetest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, b)
			h := newOpHarness(t, e)
			h.ok(h.call("GET", "/readyz", "", nil), 200)
			if err := e.store.Close(); err != nil { // the server closes it again at the end: a no-op
				t.Fatal(err)
			}
			h.fails(h.call("GET", "/readyz", "", nil), 503, "unavailable", "")
			h.ok(h.call("GET", "/healthz", "", nil), 200)
		})
	}
}

// TestOperatorDeliveries reads the outbox through the operator API: a
// decision on an instance with a receiver records a request.resolved
// message; attempts are recorded through the store as the engine would.
func TestOperatorDeliveries(t *testing.T) {
	for _, b := range storetest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			// No delivery engine runs in this server (an API-only replica):
			// the test records attempts itself, as the engine would.
			sc := servertest.Config(t, b)
			sc.NoDelivery = true
			sc.Egress = egress.Config{ExtraRootsPEM: receiverCAPEM(t), AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
			e := start(t, sc)
			h := newOpHarness(t, e)
			ctx := context.Background()
			prov, _ := h.provisioner("default")
			rc := newReceiver(t, &asyncEnv{env: e})
			receiver := rc.input(rc.register())
			inst, cred := h.provision(prov, map[string]any{"instance_name": "hooked", "delivery": receiver})
			view := h.ok(h.admin("GET", opTenant+"/instances/"+inst, nil), 200)
			wantDelivery := map[string]any{"type": "webhook", "url": receiver["url"], "registration_id": receiver["registration_id"]}
			if !reflect.DeepEqual(view["delivery"], wantDelivery) {
				t.Fatalf("instance delivery = %v, want %v", view["delivery"], wantDelivery)
			}

			req := h.submit(cred, "issue_refund", map[string]any{"amount": 1}, "30m")["id"].(string)
			if got := h.list(e.operatorToken, opTenant+"/deliveries"); len(got) != 0 {
				t.Fatalf("a pending request has deliveries: %v", got)
			}
			decided := h.ok(h.decide(e.operatorToken, "default", req, map[string]any{"decision": "approve"}), 200)
			decidedAt := h.time(decided["decision"].(map[string]any)["decided_at"])

			list := h.list(e.operatorToken, opTenant+"/deliveries")
			if len(list) != 1 {
				t.Fatalf("deliveries = %v", list)
			}
			msg := list[0]
			id := msg["id"].(string)
			want := map[string]any{"id": id, "kind": "aap.request_resolved", "destination": "instance:" + inst, "subject": req,
				"state": "pending", "attempts": float64(0), "created_at": h.now(),
				"deadline_at": decidedAt.Add(168 * time.Hour).Format(time.RFC3339), "next_attempt_at": h.now()}
			if !reflect.DeepEqual(msg, want) {
				t.Fatalf("delivery = %v, want %v", msg, want)
			}
			if got := h.ok(h.admin("GET", opTenant+"/deliveries/"+id, nil), 200); !reflect.DeepEqual(got, want) {
				t.Fatalf("inspect = %v, want %v", got, want)
			}
			for q, n := range map[string]int{"?state=pending": 1, "?state=delivered": 0, "?request=" + req: 1,
				"?request=" + agentowl.NewID(""): 0, "?instance=" + inst: 1, "?instance=" + agentowl.NewID(""): 0, "?limit=1": 1} {
				if got := h.list(e.operatorToken, opTenant+"/deliveries"+q); len(got) != n {
					t.Fatalf("deliveries%s = %v, want %d items", q, got, n)
				}
			}
			h.fails(h.admin("GET", opTenant+"/deliveries?state=bogus", nil), 400, "invalid_field", "state")
			h.fails(h.admin("GET", opTenant+"/deliveries?limit=0", nil), 400, "invalid_field", "limit")

			// One failed attempt, then a delivered one, recorded as the engine does.
			attempt := func(status int, errText string, state agentowl.MessageState, next time.Time) {
				t.Helper()
				now := e.clock.Now()
				err := e.store.Write(ctx, func(tx agentowl.Tx) error {
					claimed, err := tx.MessageClaim(ctx, agentowl.ClaimParams{Now: now, LeaseUntil: now.Add(time.Minute), Owner: "test", Limit: 10})
					if err != nil || len(claimed) != 1 {
						return fmt.Errorf("claim: %v %v", claimed, err)
					}
					p := agentowl.FinishParams{ID: id, Owner: "test", State: state, NextAttempt: next, Attempt: agentowl.Attempt{
						EventID: id, N: claimed[0].Attempts, URL: receiver["url"].(string), StartedAt: now, EndedAt: now.Add(time.Second),
						StatusCode: status, Error: errText}}
					if state != agentowl.MessagePending {
						until := now.Add(24 * time.Hour)
						p.RetainUntil = &until
					}
					return tx.MessageFinish(ctx, p)
				})
				if err != nil {
					t.Fatal(err)
				}
			}
			attempt(503, "", agentowl.MessagePending, e.clock.Now().Add(30*time.Second))
			got := h.ok(h.admin("GET", opTenant+"/deliveries/"+id, nil), 200)
			first := map[string]any{"n": float64(1), "url": receiver["url"], "started_at": h.now(),
				"ended_at": e.clock.Now().Add(time.Second).UTC().Format(time.RFC3339), "status_code": float64(503)}
			if got["state"] != "pending" || got["attempts"] != float64(1) || got["last_status"] != float64(503) ||
				got["next_attempt_at"] != e.clock.Now().Add(30*time.Second).UTC().Format(time.RFC3339) ||
				!reflect.DeepEqual(got["attempt_history"], []any{first}) {
				t.Fatalf("after a failed attempt = %v", got)
			}
			if listed := h.list(e.operatorToken, opTenant+"/deliveries")[0]; listed["attempt_history"] != nil {
				t.Fatalf("the list carries attempt history: %v", listed)
			}

			e.clock.Advance(30 * time.Second)
			attempt(200, "", agentowl.MessageDelivered, time.Time{})
			got = h.ok(h.admin("GET", opTenant+"/deliveries/"+id, nil), 200)
			if got["state"] != "delivered" || got["attempts"] != float64(2) || got["ended_at"] == nil || got["next_attempt_at"] != nil ||
				len(got["attempt_history"].([]any)) != 2 {
				t.Fatalf("after delivery = %v", got)
			}
			if got := h.list(e.operatorToken, opTenant+"/deliveries?state=delivered"); len(got) != 1 {
				t.Fatalf("delivered = %v", got)
			}

			// Members may read; other tenants and other credentials may not.
			mia := h.operator("default", "mia", "member")
			if got := h.list(mia, opTenant+"/deliveries"); len(got) != 1 {
				t.Fatalf("a member lists deliveries: %v", got)
			}
			h.fails(h.admin("GET", opTenant+"/deliveries/"+agentowl.NewID(""), nil), 404, "not_found", "")
			createTenant(t, e, "other")
			h.fails(h.admin("GET", "/api/v1/tenants/other/deliveries/"+id, nil), 404, "not_found", "")
			if got := h.list(e.adminOf("other"), "/api/v1/tenants/other/deliveries"); len(got) != 0 {
				t.Fatalf("another tenant sees deliveries: %v", got)
			}
			h.fails(h.call("GET", "/api/v1/tenants/other/deliveries", mia, nil), 404, "not_found", "")
			h.fails(h.call("GET", opTenant+"/deliveries", cred, nil), 403, "forbidden", "")
			h.fails(h.call("GET", opTenant+"/deliveries/"+id, "garbage", nil), 401, "unauthenticated", "")
		})
	}
}

// TestOperatorPolicyOrderWithinOneSecond checks "lower priority first, then
// older first" for two rules created in the same second: the older one must
// decide, whatever their random IDs.
func TestOperatorPolicyOrderWithinOneSecond(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		h := newOpHarness(t, e)
		path := opTenant + "/policies"
		_, cred := h.instance()
		// An older rule whose ID sorts in the upper half, so that a newer
		// rule's random ID soon sorts before it.
		var older map[string]any
		for i := 0; i < 64; i++ {
			older = h.ok(h.admin("POST", path, map[string]any{"tool": "transfer", "effect": "approve"}), 201)
			if older["id"].(string) >= "8" {
				break
			}
			h.ok(h.admin("DELETE", path+"/"+older["id"].(string), nil), 204)
		}
		// Make the newer rule's ID sort before the older one's, so that an
		// ID tie-break shows.
		var newer map[string]any
		for i := 0; i < 200; i++ {
			newer = h.ok(h.admin("POST", path, map[string]any{"tool": "transfer", "effect": "deny"}), 201)
			if newer["id"].(string) < older["id"].(string) {
				break
			}
			h.ok(h.admin("DELETE", path+"/"+newer["id"].(string), nil), 204)
			newer = nil
		}
		if newer == nil {
			t.Fatal("no rule ID sorted before the older rule's in 200 attempts")
		}
		if rules := h.list(e.operatorToken, path); len(rules) != 2 || rules[0]["id"] != older["id"] {
			t.Errorf("policies are not listed older first: %v", rules)
		}
		if got := h.submit(cred, "transfer", map[string]any{}, "30m"); got["status"] != "approved" {
			t.Errorf("the newer rule decided (status %v): rules created in the same second are ordered by ID, not age", got["status"])
		}
	})
}

// TestOperatorApprovalsStatusFilterSeesDueExpiry checks that ?status=expired
// lists a request whose deadline has passed before the sweeper records it,
// as the unfiltered list and GET already show it expired.
func TestOperatorApprovalsStatusFilterSeesDueExpiry(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		h := newOpHarness(t, e)
		_, cred := h.instance()
		id := h.submit(cred, "issue_refund", map[string]any{"amount": 1}, "1m")["id"].(string)
		e.clock.Advance(2 * time.Minute)
		all := h.list(e.operatorToken, opTenant+"/approvals")
		if len(all) != 1 || all[0]["request"].(map[string]any)["status"] != "expired" {
			t.Fatalf("approvals = %v", all)
		}
		if got := h.list(e.operatorToken, opTenant+"/approvals?status=expired"); len(got) != 1 || got[0]["request"].(map[string]any)["id"] != id {
			t.Errorf("approvals?status=expired = %v, want the request that the unfiltered list shows expired", got)
		}
		if got := h.list(e.operatorToken, opTenant+"/approvals?status=pending"); len(got) != 0 {
			t.Errorf("approvals?status=pending = %v, want none", got)
		}
	})
}

// TestNotFoundNamesTenant checks that every operator look-up of an unknown
// object answers not_found with a message that names the tenant searched,
// so an operator who meant another tenant sees where the search went
// (issue 11, item 6).
func TestNotFoundNamesTenant(t *testing.T) {
	parallelWork(t, func(t *testing.T, e *workEnv) {
		const missing = "00000000-0000-4000-8000-000000000000"
		decision := map[string]any{"decision_id": "d1", "request_revision": 1, "decision": "approve",
			"expected_action_digest": strings.Repeat("0", 64)}
		for _, c := range []struct {
			method, path string
			body         any
		}{
			{http.MethodGet, "/instances/" + missing, nil},
			{http.MethodPatch, "/instances/" + missing, map[string]any{"approval_validity": "5m"}},
			{http.MethodGet, "/approvals/" + missing, nil},
			{http.MethodPost, "/approvals/" + missing + "/decision", map[string]any{"decision": "approve"}},
			{http.MethodPost, "/policies", map[string]any{"tool": "*", "effect": "approve", "instance_id": missing}},
			{http.MethodDelete, "/policies/" + missing, nil},
			{http.MethodGet, "/deliveries/" + missing, nil},
			{http.MethodGet, "/endpoints/ep_missing", nil},
			{http.MethodPatch, "/endpoints/ep_missing", map[string]any{"name": "x"}},
			{http.MethodDelete, "/endpoints/ep_missing", nil},
			{http.MethodPost, "/endpoints/ep_missing/rotate-secret", nil},
			{http.MethodPost, "/endpoints/ep_missing/pause", nil},
			{http.MethodPost, "/endpoints/ep_missing/resume", nil},
			{http.MethodGet, "/endpoints/ep_missing/runtime-credentials", nil},
			{http.MethodDelete, "/runtime-credentials/rc_missing", nil},
			{http.MethodGet, "/bindings/bnd_missing", nil},
			{http.MethodDelete, "/bindings/bnd_missing", nil},
			{http.MethodGet, "/work/work_missing", nil},
			{http.MethodPost, "/work/work_missing/replay", nil},
			{http.MethodGet, "/attention/att_missing", nil},
			{http.MethodPost, "/attention/att_missing/ack", map[string]any{}},
			{http.MethodPost, "/attention/att_missing/resolve", nil},
			{http.MethodPost, "/attention/att_missing/decision", decision},
			{http.MethodGet, "/attention/att_aap_" + missing, nil},
			{http.MethodPost, "/attention/att_aap_" + missing + "/ack", map[string]any{}},
			{http.MethodPost, "/attention/att_aap_" + missing + "/decision", decision},
			{http.MethodDelete, "/operator-tokens/" + missing, nil},
			{http.MethodDelete, "/provisioner-tokens/" + missing, nil},
		} {
			r := e.do(c.method, tenantPath+c.path, e.operatorToken, c.body)
			expectRefused(t, c.method+" "+c.path, r, http.StatusNotFound, "not_found")
			var body struct {
				Error struct{ Message string } `json:"error"`
			}
			if err := json.Unmarshal(r.Body, &body); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(body.Error.Message, `tenant "default"`) {
				t.Errorf("%s %s: message %q does not name the tenant searched", c.method, c.path, body.Error.Message)
			}
		}
	})
}
