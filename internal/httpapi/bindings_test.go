package httpapi_test

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/ingress"
	"github.com/agentowl/agentowl/internal/server/servertest"
	"github.com/agentowl/agentowl/internal/store/storetest"
	"github.com/agentowl/agentowl/webhook"
)

// channelsEnv is a server whose SMTP domain is mail.example.com, assigned
// to tenant default as its mail domain, with the location of its database.
type channelsEnv struct {
	*env
	database string
}

func forEachChannelsBackend(t *testing.T, fn func(t *testing.T, e *channelsEnv)) {
	for _, b := range storetest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			sc := servertest.Config(t, b)
			sc.NoDelivery = true
			sc.Ingress = ingress.Config{SMTPDomain: "Mail.Example.com"}
			database := sc.DatabaseURL
			if database == "" {
				database = filepath.Join(sc.DataDir, "agentowl.db")
			}
			e := &channelsEnv{env: start(t, sc), database: database}
			assignDomain(t, e.env, "mail.example.com", "default")
			fn(t, e)
		})
	}
}

func (e *channelsEnv) createBinding(t *testing.T, token string, body map[string]any) *response {
	t.Helper()
	return e.do(http.MethodPost, tenantPath+"/bindings", token, body)
}

// Every channel's binding takes its own inputs and shows its credentials
// once: a webhook, cloudflare-email, sms or voice binding an ingress URL
// under /in/<channel>/, cloudflare-email a generated Worker secret, smtp
// an email address (given, or generated at the SMTP domain) and no URL.
func TestBindingChannels(t *testing.T) {
	t.Parallel()
	forEachChannelsBackend(t, func(t *testing.T, e *channelsEnv) {
		ep := wantJSON(t, "create endpoint", e.do(http.MethodPost, tenantPath+"/endpoints", e.operatorToken,
			map[string]any{"name": "runtime", "url": "https://runtime.example.com/events", "config": map[string]any{"agent_work": true}}),
			http.StatusCreated)["id"].(string)

		mail := wantJSON(t, "smtp with an address", e.createBinding(t, e.operatorToken, map[string]any{"channel": "smtp",
			"endpoint_id": ep, "address": "Support@Mail.Example.COM", "name": "support"}), http.StatusCreated)
		if mail["address"] != "support@mail.example.com" || mail["ingress_url"] != nil || mail["secret"] != nil || mail["signed"] != false {
			t.Fatalf("smtp binding = %v", mail)
		}
		gen := wantJSON(t, "smtp without an address", e.createBinding(t, e.operatorToken, map[string]any{"channel": "smtp",
			"endpoint_id": ep}), http.StatusCreated)
		if a, _ := gen["address"].(string); !strings.HasPrefix(a, "agent-") || !strings.HasSuffix(a, "@mail.example.com") {
			t.Fatalf("generated address = %v", gen["address"])
		}
		insp := wantJSON(t, "inspect smtp binding", e.do(http.MethodGet, tenantPath+"/bindings/"+mail["id"].(string), e.operatorToken, nil),
			http.StatusOK)
		if insp["address"] != "support@mail.example.com" || insp["channel"] != "smtp" {
			t.Fatalf("inspected smtp binding = %v", insp)
		}
		b, err := e.server.Ingress().AdmitAddress(t.Context(), "SUPPORT@mail.example.com")
		if err != nil || b.ID != mail["id"] {
			t.Fatalf("admit by address: %v, %v", b, err)
		}

		cf := wantJSON(t, "cloudflare-email", e.createBinding(t, e.operatorToken, map[string]any{"channel": "cloudflare-email",
			"endpoint_id": ep}), http.StatusCreated)
		cfSecret, _ := cf["secret"].(string)
		if !strings.HasPrefix(cfSecret, "cfe_") || !strings.HasPrefix(cf["ingress_url"].(string), e.srv.URL+"/in/cloudflare-email/in_") {
			t.Fatalf("cloudflare-email binding = %v", cf)
		}
		authToken := "12345678901234567890123456789012"
		secrets := map[string]string{"the Worker secret": cfSecret, "the auth token": authToken}
		provider := map[string]string{cf["id"].(string): cfSecret}
		for _, ch := range []string{"sms", "voice"} {
			got := wantJSON(t, ch, e.createBinding(t, e.operatorToken, map[string]any{"channel": ch, "endpoint_id": ep,
				"auth_token": authToken}), http.StatusCreated)
			u := got["ingress_url"].(string)
			if !strings.HasPrefix(u, e.srv.URL+"/in/"+ch+"/in_") || got["secret"] != nil || got["auth_token"] != nil {
				t.Fatalf("%s binding = %v", ch, got)
			}
			provider[got["id"].(string)] = authToken
			secrets["the "+ch+" ingress token"] = u[strings.LastIndex(u, "/")+1:]
		}
		secrets["the cloudflare-email ingress token"] = cf["ingress_url"].(string)[strings.LastIndex(cf["ingress_url"].(string), "/")+1:]
		// The provider secrets are sealed for their row: they open for it.
		for id, want := range provider {
			var b *agentowl.Binding
			if err := e.store.Read(t.Context(), func(tx agentowl.Tx) (err error) { b, err = tx.BindingGet(t.Context(), id); return err }); err != nil {
				t.Fatal(err)
			}
			got, err := e.server.Ingress().ProviderSecret(b)
			if err != nil || string(got) != want {
				t.Errorf("provider secret of %s: %q, %v", b.Channel, got, err)
			}
		}
		hits := storetest.FindRaw(t, e.database, secrets)
		for name, where := range hits {
			t.Errorf("%s is stored readably: %s", name, strings.Join(where, "; "))
		}

		// A token of one channel does not address another channel's route.
		smsURL := strings.TrimPrefix(wantJSON(t, "sms", e.createBinding(t, e.operatorToken, map[string]any{"channel": "sms",
			"endpoint_id": ep, "auth_token": authToken}), http.StatusCreated)["ingress_url"].(string), e.srv.URL)
		expectRefused(t, "an sms token at the webhook route", e.do(http.MethodPost, strings.Replace(smsURL, "/in/sms/", "/in/webhook/", 1),
			"", map[string]any{}), http.StatusNotFound, "not_found")

		list := wantJSON(t, "list", e.do(http.MethodGet, tenantPath+"/bindings", e.operatorToken, nil), http.StatusOK)["items"].([]any)
		if len(list) != 6 {
			t.Fatalf("%d bindings listed, want 6", len(list))
		}
		for _, it := range list {
			if b := it.(map[string]any); b["ingress_url"] != nil || b["secret"] != nil {
				t.Errorf("a listed binding shows a credential: %v", b)
			}
		}
	})
}

// Each channel refuses the inputs it does not take and needs those it
// does, with a field error naming the input; an smtp address is unique
// among live bindings in every tenant, whatever its case, and a taken one
// is refused like any address the tenant may not bind (maildomains_test.go).
func TestBindingChannelRefusals(t *testing.T) {
	t.Parallel()
	forEachChannelsBackend(t, func(t *testing.T, e *channelsEnv) {
		ep := wantJSON(t, "create endpoint", e.do(http.MethodPost, tenantPath+"/endpoints", e.operatorToken,
			map[string]any{"name": "runtime", "url": "https://runtime.example.com/events"}), http.StatusCreated)["id"].(string)
		refused := func(what string, body map[string]any, status int, code, param string) {
			t.Helper()
			body["endpoint_id"] = ep
			r := e.createBinding(t, e.operatorToken, body)
			expectRefused(t, what, r, status, code)
			if got := jsonAt(r.JSON(t), "error", "param"); got != param {
				t.Errorf("%s: param %v, want %s", what, got, param)
			}
		}
		refused("an unknown channel", map[string]any{"channel": "fax"}, http.StatusBadRequest, "invalid_field", "channel")
		refused("an address for a webhook", map[string]any{"channel": "webhook", "address": "a@example.com"},
			http.StatusBadRequest, "invalid_field", "address")
		refused("a signing secret for smtp", map[string]any{"channel": "smtp", "signing_secret": webhook.NewSecret()},
			http.StatusBadRequest, "invalid_field", "signing_secret")
		refused("an auth token for cloudflare-email", map[string]any{"channel": "cloudflare-email", "auth_token": "x"},
			http.StatusBadRequest, "invalid_field", "auth_token")
		refused("an sms binding without an auth token", map[string]any{"channel": "sms"}, http.StatusBadRequest, "missing_field", "auth_token")
		refused("a voice binding without an auth token", map[string]any{"channel": "voice"}, http.StatusBadRequest, "missing_field", "auth_token")
		refused("an auth token with a space", map[string]any{"channel": "sms", "auth_token": "a b"}, http.StatusBadRequest,
			"invalid_field", "auth_token")
		refused("an overlong auth token", map[string]any{"channel": "voice", "auth_token": strings.Repeat("a", 257)},
			http.StatusBadRequest, "invalid_field", "auth_token")
		for _, bad := range []string{"no-at-sign", "@example.com", "a@", "a b@example.com", "\"quoted\"@example.com", "a@[127.0.0.1]",
			"a..b@example.com", ".a@example.com", "a@-example.com", "a@exa_mple.com", "Name <a@example.com>", "é@example.com",
			strings.Repeat("a", 65) + "@example.com", "a@" + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + "." +
				strings.Repeat("d", 63) + "." + strings.Repeat("e", 63)} {
			refused("the address "+bad, map[string]any{"channel": "smtp", "address": bad}, http.StatusBadRequest, "invalid_field", "address")
		}

		wantJSON(t, "smtp", e.createBinding(t, e.operatorToken, map[string]any{"channel": "smtp", "endpoint_id": ep,
			"address": "help@mail.example.com"}), http.StatusCreated)
		refused("a taken address in another case", map[string]any{"channel": "smtp", "address": "HELP@mail.example.com"},
			http.StatusBadRequest, "invalid_field", "address")
		createTenant(t, e.env, "acme")
		ep2 := wantJSON(t, "acme endpoint", e.do(http.MethodPost, "/api/v1/tenants/acme/endpoints", e.adminOf("acme"),
			map[string]any{"name": "runtime", "url": "https://runtime.example.com/acme"}), http.StatusCreated)["id"].(string)
		expectRefused(t, "an address another tenant holds", e.do(http.MethodPost, "/api/v1/tenants/acme/bindings", e.adminOf("acme"),
			map[string]any{"channel": "smtp", "endpoint_id": ep2, "address": "help@mail.example.com"}), http.StatusBadRequest, "invalid_field")
		expectRefused(t, "another tenant's endpoint", e.do(http.MethodPost, "/api/v1/tenants/acme/bindings", e.adminOf("acme"),
			map[string]any{"channel": "smtp", "endpoint_id": ep, "address": "other@mail.example.com"}), http.StatusNotFound, "not_found")
	})
}

// Without an SMTP domain, an smtp binding needs its address.
func TestSMTPBindingWithoutDomain(t *testing.T) {
	parallelWork(t, func(t *testing.T, e *workEnv) {
		ep := e.endpoint(t, newRuntime(t, e), true)["id"].(string)
		expectRefused(t, "no address, no domain", e.do(http.MethodPost, tenantPath+"/bindings", e.operatorToken,
			map[string]any{"channel": "smtp", "endpoint_id": ep}), http.StatusBadRequest, "missing_field")
	})
}

// TestBindingHandoffDelayBounds: handoff_delay_seconds is a whole number
// of seconds from 0 to 600; anything else is invalid_field, never a wrapped
// duration.
func TestBindingHandoffDelayBounds(t *testing.T) {
	parallelWork(t, func(t *testing.T, e *workEnv) {
		ep := e.endpoint(t, newRuntime(t, e), true)["id"].(string)
		for _, bad := range []any{-1, 601, 1.5, "60", 18446744074} {
			expectRefused(t, fmt.Sprint("handoff_delay_seconds ", bad), e.do(http.MethodPost, tenantPath+"/bindings", e.operatorToken,
				map[string]any{"channel": "webhook", "endpoint_id": ep, "handoff_delay_seconds": bad}), http.StatusBadRequest, "invalid_field")
		}
		b := wantJSON(t, "a delay of 600 s", e.do(http.MethodPost, tenantPath+"/bindings", e.operatorToken,
			map[string]any{"channel": "webhook", "endpoint_id": ep, "handoff_delay_seconds": 600}), http.StatusCreated)
		if b["handoff_delay_seconds"] != 600.0 {
			t.Errorf("binding = %v", b)
		}
	})
}
