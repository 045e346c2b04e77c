package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/work"
)

// need is what a route asks of its caller.
type need string

const (
	needPublic      need = "public"       // anyone: health and metrics
	needIngress     need = "ingress"      // the unguessable binding URL; bearer tokens play no part
	needProvisioner need = "provisioner"  // a provisioner token of the object's tenant
	needInstance    need = "instance"     // an instance credential of the object's tenant
	needMember      need = "member"       // an operator token of the path's tenant
	needAdmin       need = "admin"        // an operator token of the path's tenant, admin role
	needSystemAdmin need = "system-admin" // an admin token of the system tenant
	needRuntime     need = "runtime"      // a runtime credential of the work's endpoint
)

// authzRoutes has one row per operation of api/openapi.yaml, written
// independently of the route table: TestRouteTableAgreesWithMatrix fails
// for a route without a row (and TestRouteTable for a route that is not
// documented), so a new route must say who may call it.
var authzRoutes = map[string]need{
	"GET /healthz": needPublic,
	"GET /readyz":  needPublic,
	"GET /metrics": needPublic,

	"POST /in/webhook/{token}":          needIngress,
	"POST /in/cloudflare-email/{token}": needIngress,
	"POST /in/sms/{token}":              needIngress,
	"POST /in/voice/{token}":            needIngress,

	"POST /v1/instances":                                      needProvisioner,
	"GET /v1/instances/{id}":                                  needProvisioner,
	"PATCH /v1/instances/{id}":                                needProvisioner,
	"DELETE /v1/instances/{id}":                               needProvisioner,
	"POST /v1/requests":                                       needInstance,
	"GET /v1/requests/{id}":                                   needInstance,
	"DELETE /v1/requests/{id}":                                needInstance,
	"GET /v1/requests/{id}/attestation":                       needInstance,
	"GET /.well-known/agentowl/jwks.json":                     needPublic,
	"GET /api/v1/tenants/{tenant}/approvals/{id}/attestation": needMember,
	"GET /api/v1/tenants/{tenant}/work/{id}/decisions/{decision}/attestation": needMember,

	"GET /api/v1/whoami":   needMember,
	"GET /api/v1/tenants":  needMember,
	"POST /api/v1/tenants": needSystemAdmin,

	"GET /api/v1/maintenance":              needSystemAdmin,
	"GET /api/v1/mail-domains":             needSystemAdmin,
	"POST /api/v1/mail-domains":            needSystemAdmin,
	"DELETE /api/v1/mail-domains/{domain}": needSystemAdmin,

	"GET /api/v1/tenants/{tenant}/operators":                           needMember,
	"POST /api/v1/tenants/{tenant}/operators":                          needAdmin,
	"GET /api/v1/tenants/{tenant}/operator-tokens":                     needMember,
	"POST /api/v1/tenants/{tenant}/operator-tokens":                    needMember,
	"DELETE /api/v1/tenants/{tenant}/operator-tokens/{id}":             needMember,
	"GET /api/v1/tenants/{tenant}/provisioner-tokens":                  needAdmin,
	"POST /api/v1/tenants/{tenant}/provisioner-tokens":                 needAdmin,
	"DELETE /api/v1/tenants/{tenant}/provisioner-tokens/{id}":          needAdmin,
	"GET /api/v1/tenants/{tenant}/instances":                           needMember,
	"GET /api/v1/tenants/{tenant}/instances/{id}":                      needMember,
	"PATCH /api/v1/tenants/{tenant}/instances/{id}":                    needAdmin,
	"GET /api/v1/tenants/{tenant}/approvals":                           needMember,
	"GET /api/v1/tenants/{tenant}/approvals/{id}":                      needMember,
	"POST /api/v1/tenants/{tenant}/approvals/{id}/decision":            needMember,
	"GET /api/v1/tenants/{tenant}/policies":                            needMember,
	"POST /api/v1/tenants/{tenant}/policies":                           needAdmin,
	"DELETE /api/v1/tenants/{tenant}/policies/{id}":                    needAdmin,
	"GET /api/v1/tenants/{tenant}/audit":                               needAdmin,
	"GET /api/v1/tenants/{tenant}/audit/chain":                         needAdmin,
	"GET /api/v1/tenants/{tenant}/audit/checkpoints":                   needAdmin,
	"GET /api/v1/tenants/{tenant}/deliveries":                          needMember,
	"GET /api/v1/tenants/{tenant}/deliveries/{id}":                     needMember,
	"GET /api/v1/tenants/{tenant}/notifications":                       needMember,
	"POST /api/v1/tenants/{tenant}/notifications/read-all":             needMember,
	"GET /api/v1/tenants/{tenant}/notifications/preferences":           needMember,
	"PUT /api/v1/tenants/{tenant}/notifications/preferences":           needMember,
	"GET /api/v1/tenants/{tenant}/notifications/{id}":                  needMember,
	"POST /api/v1/tenants/{tenant}/notifications/{id}/read":            needMember,
	"POST /api/v1/tenants/{tenant}/console-login-links":                needMember,
	"GET /api/v1/tenants/{tenant}/endpoints":                           needMember,
	"POST /api/v1/tenants/{tenant}/endpoints":                          needAdmin,
	"GET /api/v1/tenants/{tenant}/endpoints/{id}":                      needMember,
	"PATCH /api/v1/tenants/{tenant}/endpoints/{id}":                    needAdmin,
	"DELETE /api/v1/tenants/{tenant}/endpoints/{id}":                   needAdmin,
	"POST /api/v1/tenants/{tenant}/endpoints/{id}/rotate-secret":       needAdmin,
	"POST /api/v1/tenants/{tenant}/endpoints/{id}/pause":               needAdmin,
	"POST /api/v1/tenants/{tenant}/endpoints/{id}/resume":              needAdmin,
	"GET /api/v1/tenants/{tenant}/endpoints/{id}/runtime-credentials":  needAdmin,
	"POST /api/v1/tenants/{tenant}/endpoints/{id}/runtime-credentials": needAdmin,
	"DELETE /api/v1/tenants/{tenant}/runtime-credentials/{id}":         needAdmin,
	"GET /api/v1/tenants/{tenant}/bindings":                            needMember,
	"POST /api/v1/tenants/{tenant}/bindings":                           needAdmin,
	"GET /api/v1/tenants/{tenant}/bindings/{id}":                       needMember,
	"DELETE /api/v1/tenants/{tenant}/bindings/{id}":                    needAdmin,
	"GET /api/v1/tenants/{tenant}/work":                                needMember,
	"GET /api/v1/tenants/{tenant}/work/{id}":                           needMember,
	"POST /api/v1/tenants/{tenant}/work/{id}/replay":                   needAdmin,
	"GET /api/v1/tenants/{tenant}/attention":                           needMember,
	"GET /api/v1/tenants/{tenant}/attention/{id}":                      needMember,
	"POST /api/v1/tenants/{tenant}/attention/{id}/ack":                 needMember,
	"POST /api/v1/tenants/{tenant}/attention/{id}/resolve":             needMember,
	"POST /api/v1/tenants/{tenant}/attention/{id}/decision":            needMember,
	"GET /api/v1/tenants/{tenant}/work-outbox":                         needMember,
	"GET /api/v1/tenants/{tenant}/work-outbox/{id}":                    needMember,
	"POST /api/v1/tenants/{tenant}/work-outbox/{id}/redrive":           needAdmin,
	"GET /api/v1/tenants/{tenant}/ingress-publications":                needMember,
	"GET /api/v1/tenants/{tenant}/ingress-publications/{id}":           needMember,
	"POST /api/v1/tenants/{tenant}/ingress-publications/{id}/redrive":  needAdmin,
	"GET /api/v1/tenants/{tenant}/doctor":                              needAdmin,
	"GET /api/v1/tenants/{tenant}/conversations":                       needMember,
	"GET /api/v1/tenants/{tenant}/conversations/{id}":                  needMember,
	"GET /api/v1/tenants/{tenant}/conversations/{id}/events":           needMember,
	"POST /api/v1/tenants/{tenant}/conversations/{id}/link":            needAdmin,
	"POST /api/v1/tenants/{tenant}/conversations/{id}/reset":           needAdmin,

	"POST /runtime/v1/work/{work}/callbacks":                    needRuntime,
	"GET /runtime/v1/work/{work}/decisions":                     needRuntime,
	"POST /runtime/v1/work/{work}/decisions/{decision}/receipt": needRuntime,

	"GET /api/v1/tenants/{tenant}/events/{id}/attachments":              needMember,
	"GET /api/v1/tenants/{tenant}/events/{id}/attachments/{attachment}": needMember,
	"GET /runtime/v1/work/{work}/attachments":                           needRuntime,
	"GET /runtime/v1/work/{work}/attachments/{attachment}":              needRuntime,
}

// caller is one credential of the matrix.
type caller struct {
	name   string
	token  string
	kind   need // needMember for operator tokens, needProvisioner, needInstance, needRuntime; "" for none
	tenant string
	admin  bool
	live   bool // false for expired, revoked, deleted, malformed or missing credentials
}

// tenantObjects are one tenant's objects whose IDs the matrix puts in paths.
type tenantObjects struct {
	instance, request, endpoint, work, conversation string
}

// TestAuthorizationMatrix calls every documented route with every kind and
// state of credential, on the caller's own tenant and on another, and checks
// the class of answer: allowed (neither 401 nor 403), 401, 403 or 404.
func TestAuthorizationMatrix(t *testing.T) {
	forEachWorkBackend(t, work.Config{}, func(t *testing.T, e *workEnv) {
		other, err := e.access.Bootstrap(context.Background(), "other")
		if err != nil {
			t.Fatal(err)
		}
		admins := map[string]string{"default": e.operatorToken, "other": other.Token}
		objects := map[string]*tenantObjects{}
		var callers []caller
		for _, tenant := range []string{"default", "other"} {
			objs, cs := matrixTenant(t, e, tenant, admins[tenant])
			objects[tenant] = objs
			callers = append(callers, cs...)
		}
		callers = append(callers,
			caller{name: "no credential"},
			caller{name: "malformed operator token", token: "owl_op_" + strings.Repeat("A", 43), kind: needMember},
			caller{name: "unprefixed garbage", token: "garbage"},
		)
		// Expire the tokens made to expire in a day.
		e.clock.Advance(25 * time.Hour)

		// A subtest per route, a few at once on this server (a route's calls
		// change nothing another route's calls read, see fillPath). They
		// run within this test, so the server stops when they end.
		routes := make(chan string)
		var wg sync.WaitGroup
		for range matrixWorkers {
			wg.Go(func() {
				for op := range routes {
					t.Run(op, func(t *testing.T) { matrixRoute(t, e, op, authzRoutes[op], objects, callers) })
				}
			})
		}
		for op := range authzRoutes {
			routes <- op
		}
		close(routes)
		wg.Wait()
	})
}

// matrixWorkers is how many routes the matrix calls at once.
const matrixWorkers = 4

// matrixRoute calls the route op with every caller, on each tenant's
// objects where its path has any, and checks the class of each answer.
func matrixRoute(t *testing.T, e *workEnv, op string, row need, objects map[string]*tenantObjects, callers []caller) {
	method, path, _ := strings.Cut(op, " ")
	seq := 0
	for _, pathTenant := range []string{"default", "other"} {
		// A mail domain is server-wide: no tenant owns its path.
		params := strings.Contains(path, "{") && !strings.HasPrefix(path, "/api/v1/mail-domains")
		if pathTenant == "other" && !params {
			continue // no tenant or object in the path: one round is enough
		}
		url := fillPath(method, path, pathTenant, objects[pathTenant])
		for _, c := range callers {
			var body any
			var headers []string
			// Bodies are empty objects where the route checks the
			// caller before the body; valid ones where the body is
			// checked first (identically for every caller, so the
			// answer shows nothing of other tenants' objects).
			switch {
			case op == "POST /api/v1/tenants":
				body = map[string]any{"name": "t-" + agentowl.NewID("")[:8]}
			case op == "PATCH /v1/instances/{id}":
				body = map[string]any{"instance_name": "renamed"}
			case op == "POST /runtime/v1/work/{work}/callbacks":
				seq++
				wk := objects[pathTenant].work
				body = map[string]any{"version": "agent-work.v1", "callback_id": fmt.Sprintf("%s:%d", wk, seq), "work_id": wk,
					"sequence": seq, "status": "running", "occurred_at": e.clock.Now().UTC().Format(time.RFC3339)}
			case method == "POST" || method == "PATCH":
				body = map[string]any{}
			}
			if strings.HasPrefix(path, "/v1/") && method != "GET" {
				headers = []string{"Idempotency-Key", agentowl.NewID("")}
			}
			r := e.doIn(t, method, url, c.token, body, headers...)
			want := expectAuthz(row, c, pathTenant, params)
			if !want.matches(r.Status) {
				t.Errorf("%s %s as %s: %d %s, want %s", method, url, c.name, r.Status, r.Body, want)
			}
		}
	}
}

// outcome is a class of answer.
type outcome string

const (
	allowed         outcome = "allowed (not 401/403, not 5xx)"
	unauthenticated outcome = "401"
	forbidden       outcome = "403"
	hidden          outcome = "404"
	refused         outcome = "401 or 403"
)

func (o outcome) matches(status int) bool {
	switch o {
	case allowed:
		return status != 401 && status != 403 && status < 500
	case unauthenticated:
		return status == 401
	case forbidden:
		return status == 403
	case hidden:
		return status == 404
	}
	return status == 401 || status == 403
}

// expectAuthz is the authorization model in one place: who may call a route
// of row, on pathTenant's objects, with credential c.
func expectAuthz(row need, c caller, pathTenant string, hasParams bool) outcome {
	switch row {
	case needPublic:
		return allowed
	case needIngress:
		return hidden // a binding token that does not exist, whoever asks
	}
	if !c.live {
		return unauthenticated
	}
	kind := row
	if row == needAdmin || row == needSystemAdmin {
		kind = needMember
	}
	if c.kind != kind {
		return refused
	}
	if hasParams && c.tenant != pathTenant {
		return hidden // another tenant's path or object: not even its existence shows
	}
	switch {
	case row == needAdmin && !c.admin:
		return forbidden
	case row == needSystemAdmin && !(c.admin && c.tenant == "default"):
		return forbidden
	}
	return allowed
}

// fillPath puts tenant's objects into path. Only reads get real object IDs:
// writes get unknown ones, so that the matrix never revokes, deletes or
// rotates what later rows use.
func fillPath(method, path, tenant string, o *tenantObjects) string {
	read := method == "GET"
	pick := func(real string) string {
		if read {
			return real
		}
		return "x" + agentowl.NewID("")[:8]
	}
	id := "unknown-" + agentowl.NewID("")[:8]
	switch {
	case strings.HasPrefix(path, "/v1/instances/"), strings.Contains(path, "/instances/{id}"):
		id = pick(o.instance)
	case strings.HasPrefix(path, "/v1/requests/"), strings.Contains(path, "/approvals/{id}"):
		id = pick(o.request)
	case strings.Contains(path, "/endpoints/{id}"):
		id = pick(o.endpoint)
	case strings.Contains(path, "/work/{id}"):
		id = pick(o.work)
	case strings.Contains(path, "/conversations/{id}"):
		id = pick(o.conversation)
	}
	if strings.HasSuffix(path, "/approvals/{id}/decision") {
		id = o.request // refused calls change nothing; allowed ones may decide it
	}
	r := strings.NewReplacer("{tenant}", tenant, "{id}", id, "{work}", o.work, "{decision}", "unknown-decision",
		"{attachment}", "unknown-attachment", "{domain}", "unknown-"+agentowl.NewID("")[:8]+".example.com",
		"{token}", "in_"+strings.ReplaceAll(agentowl.NewID(""), "-", ""))
	return r.Replace(path)
}

// matrixTenant makes tenant's objects and every kind and state of its
// credentials. Credentials made to expire do so after a day.
func matrixTenant(t *testing.T, e *workEnv, tenant, admin string) (*tenantObjects, []caller) {
	t.Helper()
	base := "/api/v1/tenants/" + tenant
	post := func(path, token string, body map[string]any, headers ...string) map[string]any {
		t.Helper()
		return wantJSON(t, "POST "+path, e.do(http.MethodPost, path, token, body, headers...), http.StatusCreated)
	}
	opToken := func(name, role string, days int) string {
		post(base+"/operators", admin, map[string]any{"name": name, "role": role})
		return post(base+"/operator-tokens", admin, map[string]any{"operator": name, "days": days})["token"].(string)
	}
	revokedOp := post(base+"/operator-tokens", admin, map[string]any{"label": "revoked"})
	wantJSON(t, "revoke", e.do(http.MethodDelete, base+"/operator-tokens/"+revokedOp["id"].(string), admin, nil), http.StatusOK)
	prov := post(base+"/provisioner-tokens", admin, map[string]any{})["token"].(string)
	expiredProv := post(base+"/provisioner-tokens", admin, map[string]any{"days": 1})["token"].(string)
	revokedProv := post(base+"/provisioner-tokens", admin, map[string]any{})
	wantJSON(t, "revoke", e.do(http.MethodDelete, base+"/provisioner-tokens/"+revokedProv["id"].(string), admin, nil), http.StatusOK)

	provision := func() (id, cred string) {
		m := post("/v1/instances", prov, map[string]any{}, "Idempotency-Key", agentowl.NewID(""))
		return m["instance"].(map[string]any)["id"].(string), m["credential"].(map[string]any)["token"].(string)
	}
	inst, cred := provision()
	gone, goneCred := provision()
	wantJSON(t, "delete instance", e.do(http.MethodDelete, "/v1/instances/"+gone, prov, nil), http.StatusNoContent)
	req := post("/v1/requests", cred, map[string]any{"tool": "issue_refund", "arguments": map[string]any{}, "timeout": "72h"},
		"Idempotency-Key", agentowl.NewID(""))["id"].(string)

	rt := newRuntime(t, e)
	ep := wantJSON(t, "create endpoint", e.do(http.MethodPost, base+"/endpoints", admin,
		map[string]any{"name": "ep-" + tenant, "url": rt.URL(), "config": map[string]any{"agent_work": true}}), http.StatusCreated)
	rt.setSecret(ep["signing_secret"].(string))
	epID := ep["id"].(string)
	runtimeCred := func(days int) map[string]any {
		return post(base+"/endpoints/"+epID+"/runtime-credentials", admin, map[string]any{"days": days, "scopes": work.Scopes})
	}
	rtLive, rtExpired, rtRevoked := runtimeCred(30), runtimeCred(1), runtimeCred(30)
	wantJSON(t, "revoke runtime credential", e.do(http.MethodDelete, base+"/runtime-credentials/"+rtRevoked["id"].(string), admin, nil), http.StatusOK)
	b := post(base+"/bindings", admin, map[string]any{"channel": "webhook", "endpoint_id": epID})
	e.send(t, strings.TrimPrefix(b["ingress_url"].(string), e.srv.URL), map[string]any{"text": "hello"})
	works := wantJSON(t, "list work", e.do(http.MethodGet, base+"/work", admin, nil), http.StatusOK)["items"].([]any)
	if len(works) != 1 {
		t.Fatalf("work of %s: %v", tenant, works)
	}

	operator := func(name, token string, isAdmin, live bool) caller {
		return caller{name: tenant + "'s " + name, token: token, kind: needMember, tenant: tenant, admin: isAdmin, live: live}
	}
	callers := []caller{
		operator("admin", admin, true, true),
		operator("second admin", opToken("second-admin", "admin", 0), true, true),
		operator("member", opToken("member", "member", 0), false, true),
		operator("expired admin", opToken("expired-admin", "admin", 1), true, false),
		operator("revoked token", revokedOp["token"].(string), true, false),
		{name: tenant + "'s provisioner", token: prov, kind: needProvisioner, tenant: tenant, live: true},
		{name: tenant + "'s expired provisioner", token: expiredProv, kind: needProvisioner, tenant: tenant},
		{name: tenant + "'s revoked provisioner", token: revokedProv["token"].(string), kind: needProvisioner, tenant: tenant},
		{name: tenant + "'s instance", token: cred, kind: needInstance, tenant: tenant, live: true},
		{name: tenant + "'s deleted instance", token: goneCred, kind: needInstance, tenant: tenant},
		{name: tenant + "'s runtime", token: rtLive["token"].(string), kind: needRuntime, tenant: tenant, live: true},
		{name: tenant + "'s expired runtime", token: rtExpired["token"].(string), kind: needRuntime, tenant: tenant},
		{name: tenant + "'s revoked runtime", token: rtRevoked["token"].(string), kind: needRuntime, tenant: tenant},
	}
	wk := works[0].(map[string]any)
	return &tenantObjects{instance: inst, request: req, endpoint: epID, work: wk["id"].(string),
		conversation: wk["conversation_id"].(string)}, callers
}
