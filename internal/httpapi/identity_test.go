package httpapi_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/agentowl/agentowl"
)

// victim is tenant "default" (the system tenant) seen from outside: one of
// its approvals and instances, and what its token list held at the start.
type victim struct {
	instance, request string
	operatorTokens    int
	provisionerTokens int
}

func newVictim(h *opHarness) *victim {
	h.t.Helper()
	h.operator("default", "mia", "member") // a name the attacker will try to reuse
	inst, cred := h.instance()
	req := h.submit(cred, "issue_refund", map[string]any{"amount": 1}, "30m")["id"].(string)
	return &victim{instance: inst, request: req,
		operatorTokens:    len(h.list(h.e.operatorToken, opTenant+"/operator-tokens")),
		provisionerTokens: len(h.list(h.e.operatorToken, opTenant+"/provisioner-tokens"))}
}

// unreachable asserts that credential cred cannot act in tenant "default":
// every operator, provider and whoami path answers 401, 403 or 404, and the
// victim's token lists did not grow.
func (v *victim) unreachable(h *opHarness, what, cred string) {
	h.t.Helper()
	probes := []struct{ method, path string }{
		{"GET", opTenant + "/approvals"},
		{"GET", opTenant + "/approvals/" + v.request},
		{"GET", opTenant + "/audit"},
		{"GET", opTenant + "/operators"},
		{"GET", opTenant + "/operator-tokens"},
		{"POST", opTenant + "/provisioner-tokens"},
		{"POST", opTenant + "/operator-tokens"},
		{"POST", opTenant + "/operators"},
		{"GET", opTenant + "/instances/" + v.instance},
		{"GET", "/v1/instances/" + v.instance},
		{"GET", "/v1/requests/" + v.request},
	}
	for _, p := range probes {
		var body any
		if p.method == "POST" {
			body = map[string]any{"name": "x-" + strings.ToLower(agentowl.NewID("")[:8]), "role": "admin"}
			if strings.HasSuffix(p.path, "-tokens") {
				body = map[string]any{}
			}
		}
		r := h.call(p.method, p.path, cred, body)
		if r.Status != 401 && r.Status != 403 && r.Status != 404 {
			h.t.Fatalf("%s (%s…) reached tenant default: %s %s → %d %s", what, cred[:10], p.method, p.path, r.Status, r.Body)
		}
	}
	if strings.HasPrefix(cred, "owl_op_") {
		for _, m := range h.ok(h.call("GET", "/api/v1/whoami", cred, nil), 200)["tenants"].([]any) {
			if m.(map[string]any)["tenant"] == "default" {
				h.t.Fatalf("%s lists tenant default: %v", what, m)
			}
		}
	}
	if n := len(h.list(h.e.operatorToken, opTenant+"/operator-tokens")); n != v.operatorTokens {
		h.t.Fatalf("after %s, tenant default has %d operator tokens, want %d", what, n, v.operatorTokens)
	}
	if n := len(h.list(h.e.operatorToken, opTenant+"/provisioner-tokens")); n != v.provisionerTokens {
		h.t.Fatalf("after %s, tenant default has %d provisioner tokens, want %d", what, n, v.provisionerTokens)
	}
}

// TestTenantTakeover replays the black-box test's takeover: an admin of
// tenant acme attaches the global operator "admin" to a tenant of its own and
// mints a token for it. Operators now belong to one tenant and a token acts
// only in the tenant that issued it, so every step stays inside acme.
func TestTenantTakeover(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		h := newOpHarness(t, e)
		v := newVictim(h)
		createTenant(t, e, "acme") // its first admin is named "admin" too
		acme := e.adminOf("acme")

		// Creating tenants is for the system tenant's admins only.
		h.fails(h.call("POST", "/api/v1/tenants", acme, map[string]any{"name": "evil"}), 403, "forbidden", "")

		// Reusing the names of default's operators creates acme's own ones.
		for _, name := range []string{"admin", "mia"} {
			op := h.ok(h.call("POST", "/api/v1/tenants/acme/operators", acme, map[string]any{"name": name, "role": "admin"}), 201)
			tok := h.ok(h.call("POST", "/api/v1/tenants/acme/operator-tokens", acme, map[string]any{"operator": name}), 201)
			if tok["operator"] != name {
				t.Fatalf("token for %s: %v", name, tok)
			}
			v.unreachable(h, "a token for acme's "+name, tok["token"].(string))
			for _, o := range h.list(e.operatorToken, opTenant+"/operators") {
				if o["id"] == op["id"] {
					t.Fatalf("acme's operator %s is default's operator %v", name, o)
				}
			}
		}
		// The role of default's mia is untouched by acme's "mia".
		if mia := h.find(h.list(e.operatorToken, opTenant+"/operators"), "name", "mia"); mia["role"] != "member" {
			t.Fatalf("default's mia = %v", mia)
		}
		// Tokens for operators of another tenant, and the other tenant's paths.
		h.fails(h.call("POST", "/api/v1/tenants/acme/operator-tokens", acme, map[string]any{"operator": "nobody"}), 404, "not_found", "")
		h.fails(h.call("POST", opTenant+"/operators", acme, map[string]any{"name": "admin", "role": "member"}), 404, "not_found", "")
		h.fails(h.call("POST", opTenant+"/operator-tokens", acme, map[string]any{"operator": "admin"}), 404, "not_found", "")
		v.unreachable(h, "acme's admin", acme)
		// default's admin is still admin of default.
		h.ok(h.admin("GET", opTenant+"/audit", nil), 200)

		// A system admin may create a tenant, but holds no role in it: the
		// token it gets for the new tenant acts only there.
		created := h.ok(h.admin("POST", "/api/v1/tenants", map[string]any{"name": "evil", "admin": "admin"}), 201)
		evil := created["admin"].(map[string]any)["token"].(string)
		h.ok(h.call("POST", "/api/v1/tenants/evil/operators", evil, map[string]any{"name": "root", "role": "admin"}), 201)
		root := h.ok(h.call("POST", "/api/v1/tenants/evil/operator-tokens", evil, map[string]any{"operator": "root"}), 201)["token"].(string)
		h.ok(h.call("POST", "/api/v1/tenants/evil/operators", evil, map[string]any{"name": "admin", "role": "member"}), 201)
		v.unreachable(h, "evil's root", root)
		// evil's "admin" was demoted inside evil only.
		h.fails(h.call("POST", "/api/v1/tenants/evil/provisioner-tokens", evil, map[string]any{}), 403, "forbidden", "")
		h.ok(h.admin("POST", opTenant+"/provisioner-tokens", map[string]any{}), 201)
	})
}

// TestTenantTakeoverRandomWalks checks the identity model's property over
// random call sequences: starting from an admin token of tenant acme, no
// sequence of operator and provider calls made with the credentials it
// yields gives a credential that acts in tenant default.
func TestTenantTakeoverRandomWalks(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		h := newOpHarness(t, e)
		v := newVictim(h)
		createTenant(t, e, "acme")
		creds := []string{e.adminOf("acme")}
		names := []string{"admin", "mia", "root", "acme", "default"}
		tenants := []string{"acme", "default", "evil"}
		rng := rand.New(rand.NewPCG(10, 20))
		for step := range 150 {
			cred := creds[rng.IntN(len(creds))]
			tenant := tenants[rng.IntN(len(tenants))]
			base := "/api/v1/tenants/" + tenant
			name := names[rng.IntN(len(names))]
			var r *response
			switch rng.IntN(6) {
			case 0:
				r = h.call("POST", "/api/v1/tenants", cred, map[string]any{"name": tenants[rng.IntN(len(tenants))], "admin": name})
			case 1:
				r = h.call("POST", base+"/operators", cred, map[string]any{"name": name, "role": []string{"admin", "member"}[rng.IntN(2)]})
			case 2:
				r = h.call("POST", base+"/operator-tokens", cred, map[string]any{"operator": name})
			case 3:
				r = h.call("POST", base+"/provisioner-tokens", cred, map[string]any{})
			case 4:
				r = h.call("POST", "/v1/instances", cred, map[string]any{"instance_name": name}, "Idempotency-Key", agentowl.NewID(""))
			case 5:
				r = h.call("GET", base+"/operator-tokens", cred, nil)
			}
			if r.Status >= 500 {
				t.Fatalf("step %d: %d %s", step, r.Status, r.Body)
			}
			if r.Status != 201 {
				continue
			}
			m := r.JSON(t)
			for _, c := range []any{m["token"], m["admin"], m["credential"]} {
				switch c := c.(type) {
				case string:
					creds = append(creds, c)
				case map[string]any:
					creds = append(creds, c["token"].(string))
				}
			}
		}
		if len(creds) < 10 {
			t.Fatalf("the walk yielded only %d credentials", len(creds))
		}
		for i, c := range creds {
			v.unreachable(h, fmt.Sprintf("credential %d of the walk", i), c)
		}
	})
}

// Admins adding the same operator name at once: every call succeeds (one
// creates, the others find it), and the tenant has one operator of that name.
func TestConcurrentOperatorCreation(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		h := newOpHarness(t, e)
		const n = 8
		statuses := make(chan int, n)
		for range n {
			go func() {
				statuses <- h.call("POST", opTenant+"/operators", e.operatorToken, map[string]any{"name": "twin", "role": "member"}).Status
			}()
		}
		for range n {
			if s := <-statuses; s != 201 {
				t.Errorf("concurrent operator creation answered %d", s)
			}
		}
		count := 0
		for _, o := range h.list(e.operatorToken, opTenant+"/operators") {
			if o["name"] == "twin" {
				count++
			}
		}
		if count != 1 {
			t.Fatalf("%d operators named twin", count)
		}
	})
}
