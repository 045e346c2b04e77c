package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/delivery"
	"github.com/agentowl/agentowl/internal/ingress"
	"github.com/agentowl/agentowl/internal/secret"
	"github.com/agentowl/agentowl/internal/server"
	"github.com/agentowl/agentowl/internal/store/storetest"
	"github.com/agentowl/agentowl/internal/work"
	"github.com/agentowl/agentowl/webhook"
)

// Tests of agent work over HTTP (docs/agent-work.md): the operator API of
// endpoints, runtime credentials, bindings and work; the webhook channel;
// the runtime callbacks. Each runs on every backend with the real delivery
// engine and egress client on a fake clock; runtimes are local TLS servers
// that verify every signature.

// workEnv is env with agent work enabled.
type workEnv struct {
	*env
	engine *delivery.Engine
	work   *work.Service
	box    *secret.Box
}

// setupWork starts a server with agent work on backend b. cfg adjusts the
// work configuration (PublicURL is filled in).
func setupWork(t *testing.T, b storetest.Backend, cfg work.Config) *workEnv {
	t.Helper()
	return setupWorkWith(t, b, cfg, ingress.Config{})
}

// setupWorkWith is setupWork with the webhook channel's configuration.
func setupWorkWith(t *testing.T, b storetest.Backend, cfg work.Config, icfg ingress.Config) *workEnv {
	t.Helper()
	return setupWorkServer(t, b, func(sc *server.Config) { sc.Work, sc.Ingress = cfg, icfg })
}

// setupWorkServer is setupWork with any server setting adjusted.
func setupWorkServer(t *testing.T, b storetest.Backend, adjust func(sc *server.Config)) *workEnv {
	t.Helper()
	sc := deliveryConfig(t, b)
	adjust(&sc)
	e := start(t, sc)
	return &workEnv{env: e, engine: e.server.Engine(), work: e.server.Work(), box: e.server.Box()}
}

// forEachWorkBackend runs fn as a parallel subtest per store backend.
func forEachWorkBackend(t *testing.T, cfg work.Config, fn func(t *testing.T, e *workEnv)) {
	forEachBackendWith(t, func(t *testing.T, b storetest.Backend) *workEnv { return setupWork(t, b, cfg) }, fn)
}

// parallelWork is the set-up most work tests share: the test runs in
// parallel with others, on each store backend, with the default work
// configuration.
func parallelWork(t *testing.T, fn func(t *testing.T, e *workEnv)) {
	t.Helper()
	t.Parallel()
	forEachWorkBackend(t, work.Config{}, fn)
}

const tenantPath = "/api/v1/tenants/default"

// wantJSON fails the test unless r has status want; it returns the JSON body.
func wantJSON(t *testing.T, what string, r *response, want int) map[string]any {
	t.Helper()
	if r.Status != want {
		t.Fatalf("%s: status %d, want %d: %s", what, r.Status, want, r.Body)
	}
	if len(r.Body) == 0 {
		return nil
	}
	return r.JSON(t)
}

// expectRefused fails the test unless r is an error with status and code.
func expectRefused(t *testing.T, what string, r *response, status int, code string) {
	t.Helper()
	if r.Status != status || r.ErrorCode(t) != code {
		t.Fatalf("%s: got %d %s, want %d %s: %s", what, r.Status, r.ErrorCode(t), status, code, r.Body)
	}
}

// ---- the runtime: a TLS receiver of deliveries

// delivered is one delivery a runtime received.
type delivered struct {
	Header http.Header
	Body   []byte
	Doc    map[string]any
	SigErr error
}

// WorkID is work.work_id of the delivery ("" without a work block).
func (d *delivered) WorkID() string {
	id, _ := jsonAt(d.Doc, "work", "work_id").(string)
	return id
}

// fakeRuntime records deliveries, checks their signatures with the endpoint
// secret it is given, and answers with the scripted statuses (then 204).
type fakeRuntime struct {
	t      *testing.T
	srv    *httptest.Server
	mu     sync.Mutex
	secret string
	script []int
	got    []*delivered
	// retryAfter, when set, is sent with every 429 and 503 answer.
	retryAfter string
	// start is the test clock when the runtime started, to the second.
	start time.Time
}

// signedAt is a delivery's webhook-timestamp. Signatures are verified at
// that time, not at the test clock's: tests move the clock hours ahead
// while a delivery may be in flight (TestAuthorizationMatrix expires
// tokens), which the receiver would take for a replayed message; the
// tolerance itself is tested in the webhook and delivery packages.
func signedAt(h http.Header) time.Time {
	sec, _ := strconv.ParseInt(h.Get("webhook-timestamp"), 10, 64)
	return time.Unix(sec, 0)
}

func newRuntime(t *testing.T, e *workEnv) *fakeRuntime {
	t.Helper()
	rt := &fakeRuntime{t: t, start: e.clock.Now().Truncate(time.Second)}
	rt.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		d := &delivered{Header: r.Header.Clone(), Body: body}
		_ = json.Unmarshal(body, &d.Doc)
		rt.mu.Lock()
		if rt.secret == "" {
			d.SigErr = fmt.Errorf("no secret installed")
		} else if key, err := webhook.ParseSecret(rt.secret); err != nil {
			d.SigErr = err
		} else if id, err := key.Verify(r.Header, body, signedAt(r.Header), webhook.DefaultTolerance); err != nil {
			d.SigErr = err
		} else if at := signedAt(r.Header); at.Before(rt.start.Add(-time.Second)) || at.After(e.clock.Now().Add(time.Second)) {
			// The test clock only moves forward: a delivery is signed
			// between the runtime's start and its arrival.
			d.SigErr = fmt.Errorf("webhook-timestamp %v is outside [%v, %v]", at, rt.start, e.clock.Now())
		} else if id != d.Doc["id"] {
			d.SigErr = fmt.Errorf("webhook-id %q is not the body id %v", id, d.Doc["id"])
		}
		rt.got = append(rt.got, d)
		status := http.StatusNoContent
		if len(rt.script) > 0 {
			status, rt.script = rt.script[0], rt.script[1:]
		}
		if (status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable) && rt.retryAfter != "" {
			w.Header().Set("Retry-After", rt.retryAfter)
		}
		rt.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(func() {
		rt.srv.Close()
		rt.mu.Lock()
		defer rt.mu.Unlock()
		for i, d := range rt.got {
			if d.SigErr != nil {
				t.Errorf("delivery %d: signature rejected: %v", i+1, d.SigErr)
			}
		}
	})
	return rt
}

func (rt *fakeRuntime) URL() string { return rt.srv.URL + "/agentowl/events" }

func (rt *fakeRuntime) setSecret(s string) {
	rt.mu.Lock()
	rt.secret = s
	rt.mu.Unlock()
}

func (rt *fakeRuntime) answer(statuses ...int) {
	rt.mu.Lock()
	rt.script = append(rt.script, statuses...)
	rt.mu.Unlock()
}

func (rt *fakeRuntime) deliveries() []*delivered {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return append([]*delivered(nil), rt.got...)
}

// wait waits for at least n deliveries and returns them all.
func (rt *fakeRuntime) wait(t *testing.T, n int) []*delivered {
	t.Helper()
	eventually(t, syncLimit, fmt.Sprintf("%d deliveries", n), func() bool { return len(rt.deliveries()) >= n })
	return rt.deliveries()
}

// ---- operator helpers

// endpoint creates an endpoint for rt and installs its secret there.
func (e *workEnv) endpoint(t *testing.T, rt *fakeRuntime, agentWork bool) map[string]any {
	t.Helper()
	ep := wantJSON(t, "create endpoint", e.do(http.MethodPost, tenantPath+"/endpoints", e.operatorToken,
		map[string]any{"name": "ep-" + agentowl.NewID("x")[20:], "url": rt.URL(), "config": map[string]any{"agent_work": agentWork}}), http.StatusCreated)
	rt.setSecret(ep["signing_secret"].(string))
	return ep
}

// credential issues a runtime credential of endpoint and returns its body.
func (e *workEnv) credential(t *testing.T, endpointID string, body map[string]any) map[string]any {
	t.Helper()
	if body == nil {
		body = map[string]any{}
	}
	return wantJSON(t, "create runtime credential", e.do(http.MethodPost, tenantPath+"/endpoints/"+endpointID+"/runtime-credentials",
		e.operatorToken, body), http.StatusCreated)
}

// binding creates a webhook binding to endpoint and returns its ingress path.
func (e *workEnv) binding(t *testing.T, endpointID string, extra map[string]any) (id, path string) {
	t.Helper()
	body := map[string]any{"channel": "webhook", "endpoint_id": endpointID}
	for k, v := range extra {
		body[k] = v
	}
	b := wantJSON(t, "create binding", e.do(http.MethodPost, tenantPath+"/bindings", e.operatorToken, body), http.StatusCreated)
	u := b["ingress_url"].(string)
	if !strings.HasPrefix(u, e.srv.URL+"/in/webhook/in_") {
		t.Fatalf("ingress_url %q is not under %s/in/webhook/", u, e.srv.URL)
	}
	return b["id"].(string), strings.TrimPrefix(u, e.srv.URL)
}

// send posts an event to an ingress path.
func (e *workEnv) send(t *testing.T, path string, event any, headers ...string) map[string]any {
	t.Helper()
	return wantJSON(t, "POST "+path, e.do(http.MethodPost, path, "", event, headers...), http.StatusAccepted)
}

func (e *workEnv) getWork(t *testing.T, id string) map[string]any {
	t.Helper()
	return wantJSON(t, "inspect work", e.do(http.MethodGet, tenantPath+"/work/"+id, e.operatorToken, nil), http.StatusOK)
}

func (e *workEnv) listWork(t *testing.T, query string) []map[string]any {
	t.Helper()
	return itemsOf(t, wantJSON(t, "list work", e.do(http.MethodGet, tenantPath+"/work"+query, e.operatorToken, nil), http.StatusOK))
}

// jsonAt reads a nested value of a decoded JSON document.
func jsonAt(m map[string]any, path ...string) any {
	var v any = m
	for _, p := range path {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = mm[p]
	}
	return v
}

// auditActions returns the tenant's audit actions, oldest first.
func (e *env) auditActions(t *testing.T) []string {
	t.Helper()
	doc := wantJSON(t, "audit", e.do(http.MethodGet, tenantPath+"/audit?limit=1000", e.operatorToken, nil), http.StatusOK)
	var out []string
	for _, it := range doc["items"].([]any) {
		out = append([]string{it.(map[string]any)["action"].(string)}, out...)
	}
	return out
}

// member returns an operator token with the member role in tenant default.
func (e *workEnv) member(t *testing.T) string {
	t.Helper()
	wantJSON(t, "create member", e.do(http.MethodPost, tenantPath+"/operators", e.operatorToken,
		map[string]any{"name": "mia", "role": "member"}), http.StatusCreated)
	tok := wantJSON(t, "member token", e.do(http.MethodPost, tenantPath+"/operator-tokens", e.operatorToken,
		map[string]any{"operator": "mia"}), http.StatusCreated)
	return tok["token"].(string)
}

// ---- tests

func TestEndpointsLifecycle(t *testing.T) {
	parallelWork(t, func(t *testing.T, e *workEnv) {
		rt := newRuntime(t, e)
		create := func(body map[string]any) *response {
			return e.do(http.MethodPost, tenantPath+"/endpoints", e.operatorToken, body)
		}
		ep := wantJSON(t, "create", create(map[string]any{"name": "support", "url": rt.URL(), "config": map[string]any{"agent_work": true},
			"decision_url": "https://127.0.0.1:9/decisions", "decision_secret": "bearer-secret-0123456789"}), http.StatusCreated)
		id := ep["id"].(string)
		if !strings.HasPrefix(id, "ep_") || jsonAt(ep, "config", "agent_work") != true || ep["decision_secret_set"] != true ||
			!strings.HasPrefix(ep["signing_secret"].(string), "whsec_") {
			t.Fatalf("created endpoint = %v", ep)
		}
		if strings.Contains(string(create(map[string]any{"name": "x", "url": rt.URL()}).Body), "bearer-secret") {
			t.Fatal("a response carried the decision secret")
		}

		expectRefused(t, "a taken name", create(map[string]any{"name": "support", "url": rt.URL()}), http.StatusConflict, "already_exists")
		expectRefused(t, "http URL", create(map[string]any{"name": "a", "url": "http://runtime.example.com/"}),
			http.StatusBadRequest, "invalid_webhook_url")
		expectRefused(t, "private address", create(map[string]any{"name": "a", "url": "https://10.1.2.3/hook"}),
			http.StatusBadRequest, "invalid_webhook_url")
		expectRefused(t, "URL with userinfo", create(map[string]any{"name": "a", "url": "https://u:p@runtime.example.com/"}),
			http.StatusBadRequest, "invalid_webhook_url")
		expectRefused(t, "http decision URL", create(map[string]any{"name": "a", "url": rt.URL(), "decision_url": "http://d.example.com/",
			"decision_secret": "bearer-secret-0123456789"}), http.StatusBadRequest, "invalid_webhook_url")
		expectRefused(t, "decision URL without secret", create(map[string]any{"name": "a", "url": rt.URL(),
			"decision_url": "https://127.0.0.1:9/d"}), http.StatusBadRequest, "missing_field")
		expectRefused(t, "short decision secret", create(map[string]any{"name": "a", "url": rt.URL(),
			"decision_url": "https://127.0.0.1:9/d", "decision_secret": "short"}), http.StatusBadRequest, "invalid_field")
		expectRefused(t, "no url", create(map[string]any{"name": "a"}), http.StatusBadRequest, "missing_field")
		expectRefused(t, "unknown config key", create(map[string]any{"name": "a", "url": rt.URL(), "config": map[string]any{"agentwork": true}}),
			http.StatusBadRequest, "unknown_field")
		expectRefused(t, "config.agent_work not a boolean", create(map[string]any{"name": "a", "url": rt.URL(),
			"config": map[string]any{"agent_work": "yes"}}), http.StatusBadRequest, "invalid_field")
		expectRefused(t, "unknown field", create(map[string]any{"name": "a", "url": rt.URL(), "settings": map[string]any{}}),
			http.StatusBadRequest, "unknown_field")
		expectRefused(t, "a member creating", e.do(http.MethodPost, tenantPath+"/endpoints", e.member(t),
			map[string]any{"name": "m", "url": rt.URL()}), http.StatusForbidden, "forbidden")

		list := wantJSON(t, "list", e.do(http.MethodGet, tenantPath+"/endpoints", e.operatorToken, nil), http.StatusOK)
		if n := len(list["items"].([]any)); n != 2 {
			t.Fatalf("list has %d endpoints, want 2: %v", n, list)
		}

		path := tenantPath + "/endpoints/" + id
		up := wantJSON(t, "turn agent work off", e.do(http.MethodPatch, path, e.operatorToken, map[string]any{"config": map[string]any{"agent_work": false}}), http.StatusOK)
		if jsonAt(up, "config", "agent_work") != false || up["name"] != "support" || up["decision_secret_set"] != true {
			t.Fatalf("after agent_work false: %v", up)
		}
		up = wantJSON(t, "remove decision", e.do(http.MethodPatch, path, e.operatorToken, map[string]any{"decision_url": nil, "config": map[string]any{"agent_work": true}}),
			http.StatusOK)
		if up["decision_secret_set"] != false || up["decision_url"] != nil || jsonAt(up, "config", "agent_work") != true {
			t.Fatalf("after decision_url null: %v", up)
		}
		expectRefused(t, "empty update", e.do(http.MethodPatch, path, e.operatorToken, map[string]any{}), http.StatusBadRequest, "invalid_request")

		rot := wantJSON(t, "rotate", e.do(http.MethodPost, path+"/rotate-secret", e.operatorToken, nil), http.StatusOK)
		if rot["signing_secret"] == ep["signing_secret"] || !strings.HasPrefix(rot["signing_secret"].(string), "whsec_") {
			t.Fatalf("rotation returned %v", rot["signing_secret"])
		}

		paused := wantJSON(t, "pause", e.do(http.MethodPost, path+"/pause", e.operatorToken, nil), http.StatusOK)
		again := wantJSON(t, "pause again", e.do(http.MethodPost, path+"/pause", e.operatorToken, nil), http.StatusOK)
		if paused["paused_at"] == nil || again["paused_at"] != paused["paused_at"] || paused["signing_secret"] != nil {
			t.Fatalf("pause = %v, then %v", paused, again)
		}
		if resumed := wantJSON(t, "resume", e.do(http.MethodPost, path+"/resume", e.operatorToken, nil), http.StatusOK); resumed["paused_at"] != nil {
			t.Fatalf("resume = %v", resumed)
		}

		cred := e.credential(t, id, map[string]any{"days": 30})
		bid, _ := e.binding(t, id, nil)
		insp := wantJSON(t, "inspect", e.do(http.MethodGet, path, e.operatorToken, nil), http.StatusOK)
		if insp["signing_secret"] != nil || insp["bindings"] != float64(1) || len(insp["runtime_credentials"].([]any)) != 1 {
			t.Fatalf("inspect = %v", insp)
		}
		expectRefused(t, "delete while a binding routes to it", e.do(http.MethodDelete, path, e.operatorToken, nil),
			http.StatusConflict, "endpoint_in_use")
		wantJSON(t, "delete binding", e.do(http.MethodDelete, tenantPath+"/bindings/"+bid, e.operatorToken, nil), http.StatusNoContent)
		wantJSON(t, "delete", e.do(http.MethodDelete, path, e.operatorToken, nil), http.StatusNoContent)
		expectRefused(t, "inspect deleted", e.do(http.MethodGet, path, e.operatorToken, nil), http.StatusNotFound, "not_found")
		expectRefused(t, "delete again", e.do(http.MethodDelete, path, e.operatorToken, nil), http.StatusNotFound, "not_found")
		// Deleting the endpoint revoked its credential.
		expectRefused(t, "the deleted endpoint's credential", e.do(http.MethodPost, "/runtime/v1/work/work_x/callbacks", cred["token"].(string),
			callback("work_x", "c1", 1, "accepted")), http.StatusUnauthorized, "unauthenticated")

		// One pause and one resume: pausing a paused endpoint records nothing.
		want := []string{"endpoint.create", "endpoint.create", "operator.create", "operator_token.create", "endpoint.update",
			"endpoint.update", "endpoint.rotate_secret", "endpoint.pause", "endpoint.resume", "runtime_credential.create", "binding.create", "binding.delete", "endpoint.delete"}
		if got := e.auditActions(t); strings.Join(got[1:], " ") != strings.Join(want, " ") {
			t.Errorf("audit log = %v, want bootstrap then %v", got, want)
		}
		doc := wantJSON(t, "audit", e.do(http.MethodGet, tenantPath+"/audit?limit=1000", e.operatorToken, nil), http.StatusOK)
		if strings.Contains(string(mustJSON(t, doc)), "bearer-secret") || strings.Contains(string(mustJSON(t, doc)), "whsec_") {
			t.Error("the audit log holds a secret")
		}
	})
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRuntimeCredentialsLifecycle(t *testing.T) {
	parallelWork(t, func(t *testing.T, e *workEnv) {
		rt := newRuntime(t, e)
		id := e.endpoint(t, rt, true)["id"].(string)
		base := tenantPath + "/endpoints/" + id + "/runtime-credentials"
		c := e.credential(t, id, map[string]any{"days": 30, "label": "runtime v1"})
		if !strings.HasPrefix(c["token"].(string), "owl_rt_") || !strings.HasPrefix(c["id"].(string), "rtc_") ||
			// Without scopes: every scope the seed's runtime uses with its
			// one token (issue 27: the default could not download
			// attachments or recover decisions).
			fmt.Sprint(c["scopes"]) != "[attachments:read callbacks:write decisions:read]" || c["status"] != "active" {
			t.Fatalf("created credential = %v", c)
		}
		exp, _ := time.Parse(time.RFC3339, c["expires_at"].(string))
		if want := e.clock.Now().Add(30 * 24 * time.Hour).Truncate(time.Second); !exp.Equal(want) {
			t.Errorf("expires_at %v, want %v", exp, want)
		}
		def := e.credential(t, id, map[string]any{"scopes": []string{"decisions:read", "callbacks:write", "attachments:read"}})
		exp, _ = time.Parse(time.RFC3339, def["expires_at"].(string))
		if want := e.clock.Now().Add(90 * 24 * time.Hour).Truncate(time.Second); !exp.Equal(want) {
			t.Errorf("default expiry %v, want 90 days: %v", exp, want)
		}
		if fmt.Sprint(def["scopes"]) != "[attachments:read callbacks:write decisions:read]" {
			t.Errorf("scopes = %v", def["scopes"])
		}
		expectRefused(t, "91 days", e.do(http.MethodPost, base, e.operatorToken, map[string]any{"days": 91}), http.StatusBadRequest, "invalid_field")
		expectRefused(t, "negative days", e.do(http.MethodPost, base, e.operatorToken, map[string]any{"days": -1}), http.StatusBadRequest, "invalid_field")
		// 0 is outside 1-90, not a request for the default (absent is).
		wantError(t, e.do(http.MethodPost, base, e.operatorToken, map[string]any{"days": 0}), http.StatusBadRequest, "invalid_field", "days")
		expectRefused(t, "unknown scope", e.do(http.MethodPost, base, e.operatorToken, map[string]any{"scopes": []string{"admin"}}),
			http.StatusBadRequest, "invalid_field")
		expectRefused(t, "unknown endpoint", e.do(http.MethodPost, tenantPath+"/endpoints/ep_nope/runtime-credentials", e.operatorToken,
			map[string]any{}), http.StatusNotFound, "not_found")

		list := wantJSON(t, "list", e.do(http.MethodGet, base, e.operatorToken, nil), http.StatusOK)["items"].([]any)
		if len(list) != 2 || strings.Contains(string(mustJSON(t, list)), "owl_rt_") {
			t.Fatalf("list = %v", list)
		}
		rev := wantJSON(t, "revoke", e.do(http.MethodDelete, tenantPath+"/runtime-credentials/"+c["id"].(string), e.operatorToken, nil), http.StatusOK)
		if rev["status"] != "revoked" || rev["revoked_at"] == nil {
			t.Fatalf("revoked = %v", rev)
		}
		e.clock.Advance(time.Hour)
		again := wantJSON(t, "revoke again", e.do(http.MethodDelete, tenantPath+"/runtime-credentials/"+c["id"].(string), e.operatorToken, nil),
			http.StatusOK)
		if again["revoked_at"] != rev["revoked_at"] {
			t.Errorf("a second revocation moved revoked_at from %v to %v", rev["revoked_at"], again["revoked_at"])
		}
		expectRefused(t, "revoke unknown", e.do(http.MethodDelete, tenantPath+"/runtime-credentials/rtc_nope", e.operatorToken, nil),
			http.StatusNotFound, "not_found")
		e.clock.Advance(91 * 24 * time.Hour)
		list = wantJSON(t, "list later", e.do(http.MethodGet, base, e.operatorToken, nil), http.StatusOK)["items"].([]any)
		statuses := map[any]any{}
		for _, it := range list {
			statuses[it.(map[string]any)["id"]] = it.(map[string]any)["status"]
		}
		if statuses[c["id"]] != "revoked" || statuses[def["id"]] != "expired" {
			t.Errorf("statuses after expiry = %v", list)
		}
	})
}

// TestWorkCrossTenant checks that another tenant's objects are 404 to an
// operator who is not its member, and to its own runtime credentials.
func TestWorkCrossTenant(t *testing.T) {
	parallelWork(t, func(t *testing.T, e *workEnv) {
		rt := newRuntime(t, e)
		ep := e.endpoint(t, rt, true)
		id := ep["id"].(string)
		bid, in := e.binding(t, id, nil)
		e.send(t, in, map[string]any{"text": "hello"})
		wk := e.listWork(t, "")[0]["id"].(string)
		cred := e.credential(t, id, nil)

		// Another tenant, and an operator who belongs to it only.
		other, err := e.access.Bootstrap(context.Background(), "other")
		if err != nil {
			t.Fatal(err)
		}
		otherPath := "/api/v1/tenants/other"
		wantJSON(t, "create olga", e.do(http.MethodPost, otherPath+"/operators", other.Token,
			map[string]any{"name": "olga", "role": "admin"}), http.StatusCreated)
		olga := wantJSON(t, "olga's token", e.do(http.MethodPost, otherPath+"/operator-tokens", other.Token,
			map[string]any{"operator": "olga"}), http.StatusCreated)["token"].(string)
		for _, p := range []string{"/endpoints/" + id, "/bindings/" + bid, "/work/" + wk, "/endpoints/" + id + "/runtime-credentials"} {
			expectRefused(t, "other tenant GET "+p, e.do(http.MethodGet, otherPath+p, olga, nil), http.StatusNotFound, "not_found")
			expectRefused(t, "tenant default as olga GET "+p, e.do(http.MethodGet, tenantPath+p, olga, nil), http.StatusNotFound, "not_found")
		}
		expectRefused(t, "other tenant replay", e.do(http.MethodPost, otherPath+"/work/"+wk+"/replay", olga, nil),
			http.StatusNotFound, "not_found")
		expectRefused(t, "other tenant revoke", e.do(http.MethodDelete, otherPath+"/runtime-credentials/"+cred["id"].(string), olga, nil),
			http.StatusNotFound, "not_found")
		expectRefused(t, "other tenant delete endpoint", e.do(http.MethodDelete, otherPath+"/endpoints/"+id, olga, nil),
			http.StatusNotFound, "not_found")
		expectRefused(t, "a tenant the operator is not in", e.do(http.MethodGet, tenantPath+"/work", olga, nil),
			http.StatusNotFound, "not_found")
		if items := wantJSON(t, "other work list", e.do(http.MethodGet, otherPath+"/work", olga, nil), http.StatusOK)["items"].([]any); len(items) != 0 {
			t.Fatalf("the other tenant sees work: %v", items)
		}

		// The other tenant's runtime cannot touch this tenant's work.
		oep := wantJSON(t, "other endpoint", e.do(http.MethodPost, otherPath+"/endpoints", olga,
			map[string]any{"name": "theirs", "url": rt.URL(), "config": map[string]any{"agent_work": true}}), http.StatusCreated)
		ocred := wantJSON(t, "other credential", e.do(http.MethodPost, otherPath+"/endpoints/"+oep["id"].(string)+"/runtime-credentials",
			olga, map[string]any{}), http.StatusCreated)
		expectRefused(t, "other tenant's runtime token", e.do(http.MethodPost, "/runtime/v1/work/"+wk+"/callbacks", ocred["token"].(string),
			callback(wk, wk+":1", 1, "accepted")), http.StatusNotFound, "not_found")
	})
}
