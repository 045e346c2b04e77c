package httpapi_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// assignDomain assigns a mail domain (or one address) to tenant, as a
// system admin does (agentowl domains add).
func assignDomain(t *testing.T, e *env, domain, tenant string) {
	t.Helper()
	wantJSON(t, "assign "+domain, e.do(http.MethodPost, "/api/v1/mail-domains", e.operatorToken,
		map[string]any{"domain": domain, "tenant": tenant}), http.StatusCreated)
}

// A tenant binds named addresses only under its own mail domains (or
// addresses assigned to it), and generated ones at the server's SMTP
// domain. Another tenant's domain or address, an unassigned domain and a
// taken address get one answer, byte for byte but the request ID: the
// refusal tells nothing of which addresses other tenants use.
func TestMailDomainBindings(t *testing.T) {
	t.Parallel()
	forEachChannelsBackend(t, func(t *testing.T, e *channelsEnv) {
		// default holds mail.example.com, the server's SMTP domain (channelsEnv).
		createTenant(t, e.env, "acme")
		acme := e.adminOf("acme")
		ep := wantJSON(t, "acme endpoint", e.do(http.MethodPost, "/api/v1/tenants/acme/endpoints", acme,
			map[string]any{"name": "runtime", "url": "https://runtime.example.com/acme"}), http.StatusCreated)["id"].(string)
		epDefault := wantJSON(t, "default endpoint", e.do(http.MethodPost, tenantPath+"/endpoints", e.operatorToken,
			map[string]any{"name": "runtime", "url": "https://runtime.example.com/default"}), http.StatusCreated)["id"].(string)
		bind := func(token, tenant, endpoint, address string) *response {
			body := map[string]any{"channel": "smtp", "endpoint_id": endpoint}
			if address != "" {
				body["address"] = address
			}
			return e.do(http.MethodPost, "/api/v1/tenants/"+tenant+"/bindings", token, body)
		}
		wantJSON(t, "default's own address", bind(e.operatorToken, "default", epDefault, "sales@mail.example.com"), http.StatusCreated)

		assignDomain(t, e.env, "Acme.Example", "acme")
		got := wantJSON(t, "an address at acme's domain", bind(acme, "acme", ep, "Help@acme.example"), http.StatusCreated)
		if got["address"] != "help@acme.example" {
			t.Fatalf("binding = %v", got)
		}
		gen := wantJSON(t, "a generated address", bind(acme, "acme", ep, ""), http.StatusCreated)
		if a, _ := gen["address"].(string); len(a) != len("agent-abcdefghijklm@mail.example.com") || a[:6] != "agent-" {
			t.Fatalf("generated address = %v", gen["address"])
		}

		var first *response
		for what, addr := range map[string]string{
			"another tenant's taken address":                  "sales@mail.example.com",
			"a free address at another tenant's domain":       "anything@mail.example.com",
			"a named address at the server's SMTP domain":     "agent-abcdefghijklm@mail.example.com",
			"an unassigned domain":                            "anything@unassigned.example",
			"its own taken address":                           "help@acme.example",
			"its own taken address in another case":           "HELP@ACME.example",
			"a subdomain of its domain (domains match whole)": "x@sub.acme.example",
		} {
			r := bind(acme, "acme", ep, addr)
			expectRefused(t, what, r, http.StatusBadRequest, "invalid_field")
			if p := jsonAt(r.JSON(t), "error", "param"); p != "address" {
				t.Errorf("%s: param %v", what, p)
			}
			if first == nil {
				first = r
				continue
			}
			for _, k := range []string{"type", "code", "message", "param"} {
				if a, b := jsonAt(r.JSON(t), "error", k), jsonAt(first.JSON(t), "error", k); a != b {
					t.Errorf("%s: error %s %q differs from %q", what, k, a, b)
				}
			}
		}

		// One address assigned to acme: acme may bind it, default no longer
		// may although the domain is default's (the address decides).
		assignDomain(t, e.env, "desk@mail.example.com", "acme")
		expectRefused(t, "default at acme's address", bind(e.operatorToken, "default", epDefault, "desk@mail.example.com"),
			http.StatusBadRequest, "invalid_field")
		wantJSON(t, "acme at its address", bind(acme, "acme", ep, "desk@mail.example.com"), http.StatusCreated)

		// Removing a domain keeps its bindings (they still route) and
		// refuses new ones.
		wantJSON(t, "remove", e.do(http.MethodDelete, "/api/v1/mail-domains/acme.example", e.operatorToken, nil), http.StatusNoContent)
		if b, err := e.server.Ingress().AdmitAddress(t.Context(), "help@acme.example"); err != nil || b.ID != got["id"] {
			t.Fatalf("admit after the removal: %v, %v", b, err)
		}
		expectRefused(t, "after the removal", bind(acme, "acme", ep, "new@acme.example"), http.StatusBadRequest, "invalid_field")
	})
}

// Only admins of the system tenant manage mail domains; every change is in
// the audit logs of the system tenant and of the tenant concerned.
func TestMailDomainAdmin(t *testing.T) {
	t.Parallel()
	forEachChannelsBackend(t, func(t *testing.T, e *channelsEnv) {
		createTenant(t, e.env, "acme")
		acme := e.adminOf("acme")
		wantJSON(t, "a member", e.do(http.MethodPost, tenantPath+"/operators", e.operatorToken,
			map[string]any{"name": "mia", "role": "member"}), http.StatusCreated)
		member := wantJSON(t, "member token", e.do(http.MethodPost, tenantPath+"/operator-tokens", e.operatorToken,
			map[string]any{"operator": "mia"}), http.StatusCreated)["token"].(string)
		for who, token := range map[string]string{"another tenant's admin": acme, "a member of the system tenant": member} {
			expectRefused(t, who+" adds", e.do(http.MethodPost, "/api/v1/mail-domains", token,
				map[string]any{"domain": "acme.example", "tenant": "acme"}), http.StatusForbidden, "forbidden")
			expectRefused(t, who+" lists", e.do(http.MethodGet, "/api/v1/mail-domains", token, nil), http.StatusForbidden, "forbidden")
			expectRefused(t, who+" removes", e.do(http.MethodDelete, "/api/v1/mail-domains/mail.example.com", token, nil),
				http.StatusForbidden, "forbidden")
		}

		add := func(domain, tenant string) *response {
			return e.do(http.MethodPost, "/api/v1/mail-domains", e.operatorToken, map[string]any{"domain": domain, "tenant": tenant})
		}
		d := wantJSON(t, "add", add("ACME.example", "acme"), http.StatusCreated)
		if d["domain"] != "acme.example" || d["tenant"] != "acme" || d["created_at"] == nil {
			t.Fatalf("added = %v", d)
		}
		expectRefused(t, "a domain assigned already", add("acme.example", "default"), http.StatusConflict, "already_exists")
		expectRefused(t, "an unknown tenant", add("x.example", "nobody"), http.StatusNotFound, "not_found")
		for _, bad := range []string{"", "not a domain", "a@", "-x.example", "x@[127.0.0.1]"} {
			r := add(bad, "acme")
			if r.Status != http.StatusBadRequest {
				t.Errorf("domain %q: %d %s", bad, r.Status, r.Body)
			}
		}
		wantJSON(t, "add an address", add("desk@mail.example.com", "acme"), http.StatusCreated)

		list := wantJSON(t, "list", e.do(http.MethodGet, "/api/v1/mail-domains", e.operatorToken, nil), http.StatusOK)["items"].([]any)
		var names []string
		for _, it := range list {
			m := it.(map[string]any)
			names = append(names, m["domain"].(string)+"="+m["tenant"].(string))
		}
		if want := "acme.example=acme desk@mail.example.com=acme mail.example.com=default"; strings.Join(names, " ") != want {
			t.Errorf("list = %s, want %s", strings.Join(names, " "), want)
		}
		mine := wantJSON(t, "list acme's", e.do(http.MethodGet, "/api/v1/mail-domains?tenant=acme", e.operatorToken, nil),
			http.StatusOK)["items"].([]any)
		if len(mine) != 2 {
			t.Errorf("acme's domains: %v", mine)
		}
		expectRefused(t, "list an unknown tenant's", e.do(http.MethodGet, "/api/v1/mail-domains?tenant=nobody", e.operatorToken, nil),
			http.StatusNotFound, "not_found")

		wantJSON(t, "remove", e.do(http.MethodDelete, "/api/v1/mail-domains/"+url.PathEscape("desk@mail.example.com"), e.operatorToken, nil),
			http.StatusNoContent)
		expectRefused(t, "remove again", e.do(http.MethodDelete, "/api/v1/mail-domains/desk@mail.example.com", e.operatorToken, nil),
			http.StatusNotFound, "not_found")

		for tenant, token := range map[string]string{"default": e.operatorToken, "acme": acme} {
			audit := wantJSON(t, "audit", e.do(http.MethodGet, "/api/v1/tenants/"+tenant+"/audit", token, nil), http.StatusOK)["items"].([]any)
			seen := map[string]bool{}
			for _, it := range audit {
				m := it.(map[string]any)
				seen[m["action"].(string)+" "+m["target"].(string)] = true
			}
			for _, want := range []string{"mail_domain.add mail_domain:acme.example", "mail_domain.add mail_domain:desk@mail.example.com",
				"mail_domain.remove mail_domain:desk@mail.example.com"} {
				if !seen[want] {
					t.Errorf("%s's audit log lacks %s", tenant, want)
				}
			}
		}
	})
}
