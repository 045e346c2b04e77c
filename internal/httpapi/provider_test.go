package httpapi_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/httpapi"
)

// End-to-end tests of the AAP provider surface (/v1) against the contract in
// /work/shared/reference/aap (docs/specification/4_requests.md, 5_http.md,
// 6_sync.md and openapi.yaml). Every response passes through e.do, which
// validates it against api/openapi.yaml.

// ---- factories

// newKey returns a fresh Idempotency-Key.
func newKey() string { return agentowl.NewID("") }

// provisionerToken issues a provisioner token in tenant and returns its
// secret and ID.
func provisionerToken(t *testing.T, e *env, tenant string) (secret, id string) {
	t.Helper()
	r := e.do("POST", "/api/v1/tenants/"+tenant+"/provisioner-tokens", e.adminOf(tenant), map[string]any{})
	wantStatus(t, r, http.StatusCreated)
	var out struct {
		ID    string `json:"id"`
		Token string `json:"token"`
	}
	if err := json.Unmarshal(r.Body, &out); err != nil {
		t.Fatalf("provisioner token response: %v: %s", err, r.Body)
	}
	if !strings.HasPrefix(out.Token, "owl_prov_") || out.ID == "" {
		t.Fatalf("provisioner token response: %s", r.Body)
	}
	return out.Token, out.ID
}

// createTenant creates a tenant as the system tenant's admin and keeps the
// new tenant's admin token for e.adminOf.
func createTenant(t *testing.T, e *env, name string) {
	t.Helper()
	r := e.do("POST", "/api/v1/tenants", e.operatorToken, map[string]any{"name": name})
	wantStatus(t, r, http.StatusCreated)
	var out struct {
		Admin struct {
			Token string `json:"token"`
		} `json:"admin"`
	}
	if err := json.Unmarshal(r.Body, &out); err != nil || out.Admin.Token == "" {
		t.Fatalf("created tenant: %v: %s", err, r.Body)
	}
	e.admins.Store(name, out.Admin.Token)
}

// wireProvisioned mirrors ProvisionInstanceResponse, decoded strictly.
type wireProvisioned struct {
	Instance   wireInstance `json:"instance"`
	Credential struct {
		Token     string  `json:"token"`
		ExpiresAt *string `json:"expires_at,omitempty"`
	} `json:"credential"`
}

// wireInstance mirrors Instance, decoded strictly.
type wireInstance struct {
	ID       string          `json:"id"`
	Name     string          `json:"name"`
	Delivery json.RawMessage `json:"delivery,omitempty"`
}

// instance is a provisioned instance, its credential and the provisioner
// token that created it.
type instance struct {
	ID, Name, Credential, Provisioner string
}

// provision creates an instance with provisioner token prov and body,
// expecting 201.
func provision(t *testing.T, e *env, prov string, body any) *instance {
	t.Helper()
	r := e.do("POST", "/v1/instances", prov, body, "Idempotency-Key", newKey())
	wantStatus(t, r, http.StatusCreated)
	var p wireProvisioned
	decodeInto(t, r.Body, &p)
	if !agentowl.ValidUUID(p.Instance.ID) || p.Instance.Name == "" || p.Credential.Token == "" {
		t.Fatalf("provision response: %s", r.Body)
	}
	return &instance{ID: p.Instance.ID, Name: p.Instance.Name, Credential: p.Credential.Token, Provisioner: prov}
}

// newInstance provisions an instance in tenant "default" with a fresh
// provisioner token.
func newInstance(t *testing.T, e *env) *instance {
	t.Helper()
	prov, _ := provisionerToken(t, e, "default")
	return provision(t, e, prov, map[string]any{})
}

// wireRequest is the contract's ApprovalRequest as the server writes it,
// decoded strictly; Arguments and Context keep the response's bytes.
type wireRequest = httpapi.WireRequest

// refundBody is a valid CreateApprovalRequest.
func refundBody() map[string]any {
	return map[string]any{
		"tool":      "issue_refund",
		"arguments": map[string]any{"payment_id": "payment_123", "amount": 4900, "currency": "GBP"},
		"timeout":   "30m",
	}
}

// submit creates a request with credential cred and body, expecting 201.
func submit(t *testing.T, e *env, cred string, body any) *wireRequest {
	t.Helper()
	r := e.do("POST", "/v1/requests", cred, body, "Idempotency-Key", newKey())
	wantStatus(t, r, http.StatusCreated)
	return decodeRequest(t, r)
}

// decodeRequest strictly decodes an ApprovalRequest response.
func decodeRequest(t *testing.T, r *response) *wireRequest {
	t.Helper()
	var w wireRequest
	decodeInto(t, r.Body, &w)
	if !agentowl.ValidUUID(w.ID) {
		t.Fatalf("request id %q is not a UUID: %s", w.ID, r.Body)
	}
	return &w
}

// getRequest reads a request through /v1 with cred, expecting 200.
func getRequest(t *testing.T, e *env, cred, id string) *wireRequest {
	t.Helper()
	r := e.do("GET", "/v1/requests/"+id, cred, nil)
	wantStatus(t, r, http.StatusOK)
	return decodeRequest(t, r)
}

// decide posts an operator decision ("approve" or "deny") on request id of
// tenant "default"; extra adds body members such as note or valid_for.
func decide(e *env, id, decision string, extra ...any) *response {
	body := map[string]any{"decision": decision}
	for i := 0; i+1 < len(extra); i += 2 {
		body[extra[i].(string)] = extra[i+1]
	}
	return e.do("POST", "/api/v1/tenants/default/approvals/"+id+"/decision", e.operatorToken, body)
}

// operatorView reads request id through the operator API, returning the
// embedded provider request object.
func operatorView(t *testing.T, e *env, id string) *wireRequest {
	t.Helper()
	r := e.do("GET", "/api/v1/tenants/default/approvals/"+id, e.operatorToken, nil)
	wantStatus(t, r, http.StatusOK)
	var v struct {
		Request json.RawMessage `json:"request"`
	}
	if err := json.Unmarshal(r.Body, &v); err != nil || v.Request == nil {
		t.Fatalf("operator approval view: %v: %s", err, r.Body)
	}
	var w wireRequest
	decodeInto(t, v.Request, &w)
	return &w
}

// storedStatus reads request id's recorded status straight from the store.
func storedStatus(t *testing.T, e *env, id string) agentowl.ApprovalStatus {
	t.Helper()
	var r *agentowl.ApprovalRequest
	err := e.store.Read(context.Background(), func(tx agentowl.Tx) (err error) {
		r, err = tx.RequestGet(context.Background(), id)
		return err
	})
	if err != nil {
		t.Fatalf("read request %s from the store: %v", id, err)
	}
	return r.Status
}

// liveInstances lists tenant "default"'s instances through the operator API.
func liveInstances(t *testing.T, e *env) []string {
	t.Helper()
	r := e.do("GET", "/api/v1/tenants/default/instances", e.operatorToken, nil)
	wantStatus(t, r, http.StatusOK)
	var v struct {
		Items []struct {
			ID string `json:"id"`
		} `json:"items"`
	}
	if err := json.Unmarshal(r.Body, &v); err != nil {
		t.Fatalf("instance list: %v: %s", err, r.Body)
	}
	ids := make([]string, 0, len(v.Items))
	for _, it := range v.Items {
		ids = append(ids, it.ID)
	}
	return ids
}

// validSecret is a canonical whsec_ secret of 32 bytes.
func validSecret() string {
	b := make([]byte, 32)
	for i := range b {
		b[i] = byte(i*7 + 3)
	}
	return "whsec_" + base64.StdEncoding.EncodeToString(b)
}

// validDelivery is a delivery configuration that passes every syntax check.
func validDelivery() map[string]any {
	return map[string]any{
		"type":            "webhook",
		"url":             "https://harness.example.com/aap/events",
		"registration_id": "8246931c-4ce0-4c15-a94a-e9c078ad06e2",
		"signing_secret":  validSecret(),
	}
}

// ---- assertions

func decodeInto(t *testing.T, data []byte, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("decode %T: %v: %s", v, err, data)
	}
}

func wantStatus(t *testing.T, r *response, status int) {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status %d, want %d: %s", r.Status, status, r.Body)
	}
}

// errorTypeOf is the contract's ErrorType for an HTTP status (5_http.md).
var errorTypeOf = map[int]string{
	400: "invalid_request", 401: "authentication", 403: "authorization", 404: "not_found",
	409: "conflict", 413: "invalid_request", 422: "invalid_request", 429: "rate_limit",
	500: "internal", 503: "dependency",
}

// wantError checks that r is the contract's ErrorResponse with status and
// code: exactly {"error": {type, code, message, param?, request_id}}, type
// matching the status, request_id equal to the X-Request-ID header. A
// non-empty param must equal error.param.
func wantError(t *testing.T, r *response, status int, code, param string) {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status %d, want %d (%s): %s", r.Status, status, code, r.Body)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(r.Body, &top); err != nil {
		t.Fatalf("error body is not a JSON object: %v: %s", err, r.Body)
	}
	if len(top) != 1 || top["error"] == nil {
		t.Fatalf("error body must hold exactly the member error: %s", r.Body)
	}
	var obj map[string]any
	if err := json.Unmarshal(top["error"], &obj); err != nil {
		t.Fatalf("error member is not an object: %v: %s", err, r.Body)
	}
	for k := range obj {
		if !slices.Contains([]string{"type", "code", "message", "param", "request_id"}, k) {
			t.Errorf("error body has unexpected member %q: %s", k, r.Body)
		}
	}
	str := func(k string) string { s, _ := obj[k].(string); return s }
	if got := str("type"); got != errorTypeOf[status] {
		t.Errorf("error.type %q, want %q for status %d: %s", got, errorTypeOf[status], status, r.Body)
	}
	if got := str("code"); got != code {
		t.Errorf("error.code %q, want %q: %s", got, code, r.Body)
	}
	if str("message") == "" {
		t.Errorf("error.message is empty: %s", r.Body)
	}
	if hdr := r.Header.Get("X-Request-ID"); hdr == "" || str("request_id") != hdr {
		t.Errorf("error.request_id %q, X-Request-ID %q: must be equal and set", str("request_id"), hdr)
	}
	if param != "" && str("param") != param {
		t.Errorf("error.param %q, want %q: %s", str("param"), param, r.Body)
	}
	if _, ok := obj["param"]; ok && str("param") == "" {
		t.Errorf("error.param is present but empty: %s", r.Body)
	}
}

// wantAbsent checks that none of names is a member of the JSON object body.
func wantAbsent(t *testing.T, body []byte, names ...string) {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("not a JSON object: %v: %s", err, body)
	}
	for _, n := range names {
		if raw, ok := m[n]; ok {
			t.Errorf("member %q must be absent, got %s", n, raw)
		}
	}
}

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	if !strings.HasSuffix(s, "Z") {
		t.Errorf("timestamp %q does not end in Z", s)
	}
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatalf("timestamp %q: %v", s, err)
	}
	return v
}

func compactJSON(t *testing.T, s string) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(s)); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// ---- long polls

// getAsync sends a GET in a goroutine; the response arrives on the channel.
func getAsync(e *env, path, token string) <-chan *response {
	ch := make(chan *response, 1)
	go func() { ch <- e.do("GET", path, token, nil) }()
	return ch
}

// startPoll sends a long-poll GET in a goroutine and returns once it is
// parked: the fake clock holds more timers than before (timers of earlier
// polls that never fired stay registered) and their number has stopped
// changing. It only synchronizes; it asserts nothing about timing.
func startPoll(t *testing.T, e *env, path, token string) <-chan *response {
	t.Helper()
	base := settledWaiters(e.clock) // the server's own loops re-arm after a clock move
	ch := getAsync(e, path, token)
	limit := time.Now().Add(10 * time.Second)
	for e.clock.Waiters() <= base {
		if time.Now().After(limit) {
			t.Fatal("the long poll never started waiting")
		}
		runtime.Gosched()
		time.Sleep(time.Millisecond)
	}
	last, stable := e.clock.Waiters(), 0
	for stable < 10 {
		time.Sleep(time.Millisecond)
		if n := e.clock.Waiters(); n == last {
			stable++
		} else {
			last, stable = n, 0
		}
	}
	return ch
}

// await returns the response of a long poll. If none arrives the poll is
// released by moving the clock far ahead (so no goroutine outlives the test)
// and the test fails.
func await(t *testing.T, e *env, ch <-chan *response, what string) *response {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(10 * time.Second):
	}
	e.clock.Advance(48 * time.Hour)
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
	}
	t.Fatalf("%s: the long poll did not return", what)
	return nil
}

// ---- 1. provisioning

func TestProviderProvisionInstance(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		prov, _ := provisionerToken(t, e, "default")
		key := newKey()
		body := map[string]any{"instance_name": "codex-chris-laptop"}

		first := e.do("POST", "/v1/instances", prov, body, "Idempotency-Key", key)
		wantStatus(t, first, http.StatusCreated)
		var p1 wireProvisioned
		decodeInto(t, first.Body, &p1)
		if !agentowl.ValidUUID(p1.Instance.ID) || p1.Instance.Name != "codex-chris-laptop" || p1.Credential.Token == "" {
			t.Fatalf("provisioned: %s", first.Body)
		}
		if p1.Instance.Delivery != nil {
			t.Errorf("instance without delivery has delivery %s", p1.Instance.Delivery)
		}

		// Same key, same input: 200 with the same instance and credential.
		again := e.do("POST", "/v1/instances", prov, body, "Idempotency-Key", key)
		wantStatus(t, again, http.StatusOK)
		var p2 wireProvisioned
		decodeInto(t, again.Body, &p2)
		if p2.Instance.ID != p1.Instance.ID || p2.Credential.Token != p1.Credential.Token {
			t.Fatalf("replay returned instance %s token %q, want %s %q", p2.Instance.ID, p2.Credential.Token, p1.Instance.ID, p1.Credential.Token)
		}
		if ids := liveInstances(t, e); len(ids) != 1 || ids[0] != p1.Instance.ID {
			t.Fatalf("instances after replay: %v, want just %s", ids, p1.Instance.ID)
		}
		// The replayed credential works.
		submit(t, e, p2.Credential.Token, refundBody())

		// Same key, different input.
		r := e.do("POST", "/v1/instances", prov, map[string]any{"instance_name": "other-name"}, "Idempotency-Key", key)
		wantError(t, r, http.StatusConflict, "idempotency_conflict", "")
		r = e.do("POST", "/v1/instances", prov, map[string]any{}, "Idempotency-Key", key)
		wantError(t, r, http.StatusConflict, "idempotency_conflict", "")

		// Keys are scoped per provisioner token.
		prov2, _ := provisionerToken(t, e, "default")
		r = e.do("POST", "/v1/instances", prov2, body, "Idempotency-Key", key)
		wantStatus(t, r, http.StatusCreated)
		var p3 wireProvisioned
		decodeInto(t, r.Body, &p3)
		if p3.Instance.ID == p1.Instance.ID || p3.Credential.Token == p1.Credential.Token {
			t.Fatalf("another provisioner token with the same key got the same instance or credential")
		}
		if ids := liveInstances(t, e); len(ids) != 2 {
			t.Fatalf("want 2 instances, got %v", ids)
		}

		// Replay after deletion: instance_deleted, never recreated.
		wantStatus(t, e.do("DELETE", "/v1/instances/"+p1.Instance.ID, prov, nil), http.StatusNoContent)
		r = e.do("POST", "/v1/instances", prov, body, "Idempotency-Key", key)
		wantError(t, r, http.StatusConflict, "instance_deleted", "")
		if ids := liveInstances(t, e); len(ids) != 1 || ids[0] != p3.Instance.ID {
			t.Fatalf("instances after replaying a deleted one: %v, want just %s", ids, p3.Instance.ID)
		}
	})
}

func TestProviderProvisionConcurrentSameKey(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		prov, _ := provisionerToken(t, e, "default")
		key := newKey()
		const n = 10
		results := make([]*response, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				results[i] = e.do("POST", "/v1/instances", prov, map[string]any{"instance_name": "racer"}, "Idempotency-Key", key)
			}()
		}
		close(start)
		wg.Wait()
		created, ids, tokens := 0, map[string]bool{}, map[string]bool{}
		for i, r := range results {
			if r == nil {
				t.Fatalf("attempt %d got no response", i)
			}
			if r.Status != http.StatusCreated && r.Status != http.StatusOK {
				t.Fatalf("attempt %d: status %d: %s", i, r.Status, r.Body)
			}
			if r.Status == http.StatusCreated {
				created++
			}
			var p wireProvisioned
			decodeInto(t, r.Body, &p)
			ids[p.Instance.ID], tokens[p.Credential.Token] = true, true
		}
		if created != 1 || len(ids) != 1 || len(tokens) != 1 {
			t.Fatalf("%d attempts: %d created, %d distinct instances, %d distinct credentials; want 1, 1, 1", n, created, len(ids), len(tokens))
		}
		if got := liveInstances(t, e); len(got) != 1 {
			t.Fatalf("concurrent same-key provisioning left %d instances: %v", len(got), got)
		}
	})
}

func TestProviderProvisionInputs(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		prov, _ := provisionerToken(t, e, "default")

		// Missing Idempotency-Key.
		r := e.do("POST", "/v1/instances", prov, map[string]any{})
		wantError(t, r, http.StatusBadRequest, "missing_idempotency_key", "")

		// Long and hex keys are accepted.
		for _, key := range []string{strings.Repeat("k", 255), strings.Repeat("0123456789abcdef", 4)} {
			r := e.do("POST", "/v1/instances", prov, map[string]any{}, "Idempotency-Key", key)
			wantStatus(t, r, http.StatusCreated)
			r = e.do("POST", "/v1/instances", prov, map[string]any{}, "Idempotency-Key", key)
			wantStatus(t, r, http.StatusOK)
		}

		// Empty body {} and an omitted name: the provider assigns a name.
		r = e.do("POST", "/v1/instances", prov, "{}", "Idempotency-Key", newKey())
		wantStatus(t, r, http.StatusCreated)
		var p wireProvisioned
		decodeInto(t, r.Body, &p)
		if p.Instance.Name == "" {
			t.Fatalf("provider assigned no name: %s", r.Body)
		}

		// Bad names and bodies.
		r = e.do("POST", "/v1/instances", prov, map[string]any{"instance_name": ""}, "Idempotency-Key", newKey())
		wantError(t, r, http.StatusBadRequest, "invalid_field", "instance_name")
		r = e.do("POST", "/v1/instances", prov, map[string]any{"instance_name": 7}, "Idempotency-Key", newKey())
		wantError(t, r, http.StatusBadRequest, "invalid_field", "instance_name")
		r = e.do("POST", "/v1/instances", prov, map[string]any{"name": "x"}, "Idempotency-Key", newKey())
		wantError(t, r, http.StatusBadRequest, "unknown_field", "name")
		r = e.do("POST", "/v1/instances", prov, "{", "Idempotency-Key", newKey())
		wantError(t, r, http.StatusBadRequest, "invalid_json", "")

		// Credentials: none, garbage, an instance credential, a revoked provisioner token.
		wantError(t, e.do("POST", "/v1/instances", "", map[string]any{}, "Idempotency-Key", newKey()),
			http.StatusUnauthorized, "unauthenticated", "")
		wantError(t, e.do("POST", "/v1/instances", "owl_prov_garbage", map[string]any{}, "Idempotency-Key", newKey()),
			http.StatusUnauthorized, "unauthenticated", "")
		inst := provision(t, e, prov, map[string]any{})
		wantError(t, e.do("POST", "/v1/instances", inst.Credential, map[string]any{}, "Idempotency-Key", newKey()),
			http.StatusForbidden, "forbidden", "")
		wantError(t, e.do("GET", "/v1/instances/"+inst.ID, inst.Credential, nil), http.StatusForbidden, "forbidden", "")

		revoked, revokedID := provisionerToken(t, e, "default")
		wantStatus(t, e.do("DELETE", "/api/v1/tenants/default/provisioner-tokens/"+revokedID, e.operatorToken, nil), http.StatusOK)
		wantError(t, e.do("POST", "/v1/instances", revoked, map[string]any{}, "Idempotency-Key", newKey()),
			http.StatusUnauthorized, "unauthenticated", "")
	})
}

// ---- 2. delivery validation

func TestProviderDeliveryValidation(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		prov, _ := provisionerToken(t, e, "default")
		secret := validSecret()
		raw, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
		enc := func(n int) string { return "whsec_" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0xA5}, n)) }
		// Non-canonical: the last data character carries non-zero padding bits.
		nonCanonical := secret[:len(secret)-2] + "B="
		if _, err := base64.StdEncoding.DecodeString(nonCanonical[len("whsec_"):]); err != nil {
			t.Fatalf("test setup: %v", err) // lenient decoders accept it; the contract does not
		}
		with := func(k string, v any) map[string]any {
			d := validDelivery()
			if v == nil {
				delete(d, k)
			} else {
				d[k] = v
			}
			return d
		}
		cases := []struct {
			name     string
			delivery any
			code     string
			param    string
			status   int // 400 unless set
		}{
			{"email type", with("type", "email"), "unsupported_delivery_type", "", 0},
			{"http url", with("url", "http://harness.example.com/aap/events"), "invalid_webhook_url", "delivery.url", 0},
			{"userinfo", with("url", "https://user:pw@harness.example.com/aap/events"), "invalid_webhook_url", "delivery.url", 0},
			{"fragment", with("url", "https://harness.example.com/aap/events#frag"), "invalid_webhook_url", "delivery.url", 0},
			{"not a url", with("url", "not a url"), "invalid_webhook_url", "delivery.url", 0},
			{"bad registration id", with("registration_id", "registration-1"), "invalid_field", "delivery.registration_id", 0},
			{"secret without prefix", with("signing_secret", base64.StdEncoding.EncodeToString(raw)), "invalid_field", "delivery.signing_secret", 0},
			{"secret of 31 bytes", with("signing_secret", enc(31)), "invalid_field", "delivery.signing_secret", 0},
			{"secret of 33 bytes", with("signing_secret", enc(33)), "invalid_field", "delivery.signing_secret", 0},
			{"secret non-canonical", with("signing_secret", nonCanonical), "invalid_field", "delivery.signing_secret", 0},
			{"unknown delivery field", with("headers", map[string]any{"x": "y"}), "unknown_field", "", 0},
			{"missing secret", with("signing_secret", nil), "missing_field", "delivery.signing_secret", 0},
			{"delivery not an object", "webhook", "invalid_field", "delivery", 0},
			// A fully valid delivery is verified, and its receiver does not exist.
			{"valid delivery", validDelivery(), "webhook_verification_failed", "", http.StatusUnprocessableEntity},
		}
		for _, c := range cases {
			before := liveInstances(t, e)
			r := e.do("POST", "/v1/instances", prov, map[string]any{"instance_name": "hooked", "delivery": c.delivery}, "Idempotency-Key", newKey())
			t.Logf("%s: %s", c.name, r.Body)
			if c.status == 0 {
				c.status = http.StatusBadRequest
			}
			wantError(t, r, c.status, c.code, c.param)
			if bytes.Contains(r.Body, []byte(secret[len("whsec_"):])) {
				t.Errorf("%s: the signing secret is echoed: %s", c.name, r.Body)
			}
			if after := liveInstances(t, e); len(after) != len(before) {
				t.Errorf("%s: a rejected delivery created an instance", c.name)
			}
		}

		// The same checks apply to PATCH, and a rejected update changes nothing.
		inst := provision(t, e, prov, map[string]any{"instance_name": "plain"})
		for _, c := range cases {
			r := e.do("PATCH", "/v1/instances/"+inst.ID, prov, map[string]any{"instance_name": "renamed", "delivery": c.delivery}, "Idempotency-Key", newKey())
			if c.status == 0 {
				c.status = http.StatusBadRequest
			}
			wantError(t, r, c.status, c.code, c.param)
			if bytes.Contains(r.Body, []byte(secret[len("whsec_"):])) {
				t.Errorf("PATCH %s: the signing secret is echoed: %s", c.name, r.Body)
			}
		}
		r := e.do("GET", "/v1/instances/"+inst.ID, prov, nil)
		wantStatus(t, r, http.StatusOK)
		var got wireInstance
		decodeInto(t, r.Body, &got)
		if got.Name != "plain" || got.Delivery != nil {
			t.Fatalf("rejected updates changed the instance: %s", r.Body)
		}
	})
}

// ---- 3. instance reads, updates and deletion

func TestProviderInstanceGetPatchDelete(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		prov, _ := provisionerToken(t, e, "default")
		inst := provision(t, e, prov, map[string]any{"instance_name": "start"})
		path := "/v1/instances/" + inst.ID
		get := func() wireInstance {
			t.Helper()
			r := e.do("GET", path, prov, nil)
			wantStatus(t, r, http.StatusOK)
			var w wireInstance
			decodeInto(t, r.Body, &w)
			return w
		}
		if w := get(); w.ID != inst.ID || w.Name != "start" || w.Delivery != nil {
			t.Fatalf("GET: %+v", w)
		}

		// Rename A with k1, B with k2, replay k1: A's response, B stays.
		k1, k2 := newKey(), newKey()
		a := e.do("PATCH", path, prov, map[string]any{"instance_name": "alpha"}, "Idempotency-Key", k1)
		wantStatus(t, a, http.StatusOK)
		var wa wireInstance
		decodeInto(t, a.Body, &wa)
		if wa.ID != inst.ID || wa.Name != "alpha" {
			t.Fatalf("PATCH alpha: %s", a.Body)
		}
		b := e.do("PATCH", path, prov, map[string]any{"instance_name": "beta"}, "Idempotency-Key", k2)
		wantStatus(t, b, http.StatusOK)
		replay := e.do("PATCH", path, prov, map[string]any{"instance_name": "alpha"}, "Idempotency-Key", k1)
		wantStatus(t, replay, http.StatusOK)
		if !bytes.Equal(replay.Body, a.Body) {
			t.Errorf("replay of k1 returned %s, want the original %s", replay.Body, a.Body)
		}
		if w := get(); w.Name != "beta" {
			t.Fatalf("replaying k1 overwrote the later update: name %q, want beta", w.Name)
		}

		// Same key, changed input.
		wantError(t, e.do("PATCH", path, prov, map[string]any{"instance_name": "gamma"}, "Idempotency-Key", k1),
			http.StatusConflict, "idempotency_conflict", "")
		if w := get(); w.Name != "beta" {
			t.Fatalf("a conflicting replay changed the name to %q", w.Name)
		}

		// Malformed updates.
		wantError(t, e.do("PATCH", path, prov, map[string]any{}, "Idempotency-Key", newKey()), http.StatusBadRequest, "invalid_request", "")
		wantError(t, e.do("PATCH", path, prov, map[string]any{"name": "x"}, "Idempotency-Key", newKey()), http.StatusBadRequest, "unknown_field", "name")
		wantError(t, e.do("PATCH", path, prov, map[string]any{"instance_name": ""}, "Idempotency-Key", newKey()), http.StatusBadRequest, "invalid_field", "instance_name")
		wantError(t, e.do("PATCH", path, prov, map[string]any{"instance_name": "x"}), http.StatusBadRequest, "missing_idempotency_key", "")

		// delivery: null removes the receiver (none here): 200 without delivery.
		r := e.do("PATCH", path, prov, map[string]any{"delivery": nil}, "Idempotency-Key", newKey())
		wantStatus(t, r, http.StatusOK)
		wantAbsent(t, r.Body, "delivery")
		var wn wireInstance
		decodeInto(t, r.Body, &wn)
		if wn.Name != "beta" {
			t.Errorf("PATCH delivery:null changed the name to %q", wn.Name)
		}

		// Unknown and malformed IDs.
		for _, id := range []string{agentowl.NewID(""), "not-a-uuid"} {
			wantError(t, e.do("GET", "/v1/instances/"+id, prov, nil), http.StatusNotFound, "not_found", "")
			wantError(t, e.do("PATCH", "/v1/instances/"+id, prov, map[string]any{"instance_name": "x"}, "Idempotency-Key", newKey()), http.StatusNotFound, "not_found", "")
			wantError(t, e.do("DELETE", "/v1/instances/"+id, prov, nil), http.StatusNotFound, "not_found", "")
		}

		// Delete, repeat, and everything after.
		del := e.do("DELETE", path, prov, nil)
		wantStatus(t, del, http.StatusNoContent)
		if len(del.Body) != 0 {
			t.Errorf("204 with a body: %q", del.Body)
		}
		wantStatus(t, e.do("DELETE", path, prov, nil), http.StatusNoContent)
		wantError(t, e.do("GET", path, prov, nil), http.StatusNotFound, "not_found", "")
		wantError(t, e.do("PATCH", path, prov, map[string]any{"instance_name": "zeta"}, "Idempotency-Key", newKey()), http.StatusNotFound, "not_found", "")
		// An update replay against a deleted instance is 404 too.
		wantError(t, e.do("PATCH", path, prov, map[string]any{"instance_name": "beta"}, "Idempotency-Key", k2), http.StatusNotFound, "not_found", "")
	})
}

func TestProviderInstanceCrossTenant(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		prov, _ := provisionerToken(t, e, "default")
		inst := provision(t, e, prov, map[string]any{"instance_name": "mine"})
		createTenant(t, e, "other")
		otherProv, _ := provisionerToken(t, e, "other")
		path := "/v1/instances/" + inst.ID

		wantError(t, e.do("GET", path, otherProv, nil), http.StatusNotFound, "not_found", "")
		wantError(t, e.do("PATCH", path, otherProv, map[string]any{"instance_name": "stolen"}, "Idempotency-Key", newKey()), http.StatusNotFound, "not_found", "")
		wantError(t, e.do("DELETE", path, otherProv, nil), http.StatusNotFound, "not_found", "")

		r := e.do("GET", path, prov, nil)
		wantStatus(t, r, http.StatusOK)
		var w wireInstance
		decodeInto(t, r.Body, &w)
		if w.Name != "mine" {
			t.Fatalf("another tenant changed the instance: %s", r.Body)
		}
		submit(t, e, inst.Credential, refundBody()) // still usable
	})
}

func TestProviderInstanceDeleteRevokesAndCancels(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		prov, _ := provisionerToken(t, e, "default")
		inst := provision(t, e, prov, map[string]any{})
		pending1 := submit(t, e, inst.Credential, refundBody())
		pending2 := submit(t, e, inst.Credential, refundBody())
		approved := submit(t, e, inst.Credential, refundBody())
		wantStatus(t, decide(e, approved.ID, "approve"), http.StatusOK)
		before := operatorView(t, e, approved.ID)

		// A long poll on a pending request ends with the cancellation.
		poll := startPoll(t, e, "/v1/requests/"+pending1.ID+"?wait=30s", inst.Credential)

		wantStatus(t, e.do("DELETE", "/v1/instances/"+inst.ID, prov, nil), http.StatusNoContent)

		pr := await(t, e, poll, "poll across instance deletion")
		wantStatus(t, pr, http.StatusOK)
		if got := decodeRequest(t, pr); got.Status != "cancelled" || got.Decision == nil || got.Decision.Status != "cancelled" {
			t.Errorf("long poll across deletion returned %s", pr.Body)
		}

		// The credential is revoked everywhere on /v1.
		wantError(t, e.do("POST", "/v1/requests", inst.Credential, refundBody(), "Idempotency-Key", newKey()), http.StatusUnauthorized, "unauthenticated", "")
		wantError(t, e.do("GET", "/v1/requests/"+pending1.ID, inst.Credential, nil), http.StatusUnauthorized, "unauthenticated", "")
		wantError(t, e.do("DELETE", "/v1/requests/"+pending2.ID, inst.Credential, nil), http.StatusUnauthorized, "unauthenticated", "")

		// Pending requests are cancelled; terminal ones are unchanged.
		for _, id := range []string{pending1.ID, pending2.ID} {
			got := operatorView(t, e, id)
			if got.Status != "cancelled" || got.Decision == nil || got.Decision.Status != "cancelled" || got.Decision.ExpiresAt != nil {
				t.Errorf("request %s after instance deletion: %+v", id, got)
			}
		}
		after := operatorView(t, e, approved.ID)
		if after.Status != "approved" || after.Decision == nil || *after.Decision.ExpiresAt != *before.Decision.ExpiresAt ||
			after.Decision.DecidedAt != before.Decision.DecidedAt {
			t.Errorf("deletion changed an approved request: before %+v after %+v", before.Decision, after.Decision)
		}
		// Operators cannot decide the cancelled requests.
		wantError(t, decide(e, pending2.ID, "approve"), http.StatusConflict, "already_terminal", "")
	})
}

// ---- 4. creating requests

func TestProviderCreateRequest(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		inst := newInstance(t, e)
		now := e.clock.Now()
		const args = `{"amount": 4900.0, "big": 12345678901234567890, "nested": {"k": [1, 2.50]}}`
		const ctxJSON = `{"session_id": "session_456", "Weird-Key": 1.10, "list": [true, null, "x"]}`
		body := `{"tool": "issue_refund", "arguments": ` + args + `, "timeout": "30m",
			"agent_reasoning": "The customer was charged twice.", "context": ` + ctxJSON + "}\n"
		key := newKey()
		r := e.do("POST", "/v1/requests", inst.Credential, body, "Idempotency-Key", key)
		wantStatus(t, r, http.StatusCreated)
		req := decodeRequest(t, r)
		if req.Tool != "issue_refund" || req.Timeout != "30m" || req.Status != "pending" || req.Decision != nil {
			t.Fatalf("created: %s", r.Body)
		}
		if got, want := string(req.Arguments), compactJSON(t, args); got != want {
			t.Errorf("arguments echoed as %s, want exactly %s", got, want)
		}
		if got, want := string(req.Context), compactJSON(t, ctxJSON); got != want {
			t.Errorf("context echoed as %s, want exactly %s", got, want)
		}
		if req.AgentReasoning == nil || *req.AgentReasoning != "The customer was charged twice." {
			t.Errorf("agent_reasoning echoed as %v", req.AgentReasoning)
		}
		created, deadline := mustTime(t, req.CreatedAt), mustTime(t, req.DeadlineAt)
		if !created.Equal(now.Truncate(time.Second)) || !deadline.Equal(created.Add(30*time.Minute)) {
			t.Errorf("created_at %s deadline_at %s, want %s and +30m", req.CreatedAt, req.DeadlineAt, now)
		}
		wantAbsent(t, r.Body, "decision")

		// Same key, same input with other whitespace and key order: 200, same request.
		reordered := "{\n  \"timeout\":\"30m\",\"context\":{\"list\":[true,null,\"x\"],\"Weird-Key\":1.10,\"session_id\":\"session_456\"},\n" +
			"\"agent_reasoning\":\"The customer was charged twice.\",\"arguments\":{\"nested\":{\"k\":[1,2.50]},\"big\":12345678901234567890,\"amount\":4900.0},\"tool\":\"issue_refund\"}"
		rr := e.do("POST", "/v1/requests", inst.Credential, reordered, "Idempotency-Key", key)
		wantStatus(t, rr, http.StatusOK)
		if !bytes.Equal(rr.Body, r.Body) {
			t.Errorf("replay returned %s, want the original %s", rr.Body, r.Body)
		}

		// Same key, different input.
		for _, changed := range []map[string]any{
			{"tool": "issue_refund", "arguments": map[string]any{"amount": 1}, "timeout": "30m"},
			{"tool": "other_tool", "arguments": json.RawMessage(args), "timeout": "30m", "agent_reasoning": "The customer was charged twice.", "context": json.RawMessage(ctxJSON)},
			{"tool": "issue_refund", "arguments": json.RawMessage(args), "timeout": "31m", "agent_reasoning": "The customer was charged twice.", "context": json.RawMessage(ctxJSON)},
			{"tool": "issue_refund", "arguments": json.RawMessage(args), "timeout": "30m", "context": json.RawMessage(ctxJSON)},
		} {
			wantError(t, e.do("POST", "/v1/requests", inst.Credential, changed, "Idempotency-Key", key),
				http.StatusConflict, "idempotency_conflict", "")
		}
		if got := getRequest(t, e, inst.Credential, req.ID); got.Tool != "issue_refund" || string(got.Arguments) != compactJSON(t, args) {
			t.Errorf("a conflicting replay changed the request: %+v", got)
		}

		// Keys are scoped per instance: another instance's same key is a new request.
		other := newInstance(t, e)
		or := e.do("POST", "/v1/requests", other.Credential, body, "Idempotency-Key", key)
		wantStatus(t, or, http.StatusCreated)
		if decodeRequest(t, or).ID == req.ID {
			t.Errorf("another instance's same key returned the first instance's request")
		}

		// Optional fields not sent are absent; an empty reasoning is echoed.
		min := e.do("POST", "/v1/requests", inst.Credential, refundBody(), "Idempotency-Key", newKey())
		wantStatus(t, min, http.StatusCreated)
		wantAbsent(t, min.Body, "agent_reasoning", "context", "decision")
		minGet := e.do("GET", "/v1/requests/"+decodeRequest(t, min).ID, inst.Credential, nil)
		wantAbsent(t, minGet.Body, "agent_reasoning", "context", "decision")

		empty := refundBody()
		empty["agent_reasoning"] = ""
		empty["context"] = map[string]any{}
		er := e.do("POST", "/v1/requests", inst.Credential, empty, "Idempotency-Key", newKey())
		wantStatus(t, er, http.StatusCreated)
		got := decodeRequest(t, er)
		if got.AgentReasoning == nil || *got.AgentReasoning != "" {
			t.Errorf("empty agent_reasoning not echoed: %s", er.Body)
		}
		if string(got.Context) != "{}" {
			t.Errorf("empty context echoed as %q: %s", got.Context, er.Body)
		}
		again := getRequest(t, e, inst.Credential, got.ID)
		if again.AgentReasoning == nil || *again.AgentReasoning != "" || string(again.Context) != "{}" {
			t.Errorf("empty agent_reasoning/context lost on read: %+v", again)
		}

		// A timeout above the provider's 24h cap is accepted, the window shortened.
		long := refundBody()
		long["timeout"] = "48h"
		lr := submit(t, e, inst.Credential, long)
		if lr.Timeout != "48h" || !mustTime(t, lr.DeadlineAt).Equal(mustTime(t, lr.CreatedAt).Add(24*time.Hour)) {
			t.Errorf("timeout 48h: timeout %q created %s deadline %s, want deadline at created+24h", lr.Timeout, lr.CreatedAt, lr.DeadlineAt)
		}
		exact := refundBody()
		exact["timeout"] = "24h"
		if xr := submit(t, e, inst.Credential, exact); !mustTime(t, xr.DeadlineAt).Equal(mustTime(t, xr.CreatedAt).Add(24 * time.Hour)) {
			t.Errorf("timeout 24h: deadline %s", xr.DeadlineAt)
		}
		secs := refundBody()
		secs["timeout"] = "45s"
		if sr := submit(t, e, inst.Credential, secs); !mustTime(t, sr.DeadlineAt).Equal(mustTime(t, sr.CreatedAt).Add(45 * time.Second)) {
			t.Errorf("timeout 45s: deadline %s", sr.DeadlineAt)
		}
	})
}

func TestProviderCreateRequestValidation(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		inst := newInstance(t, e)
		post := func(body any, headers ...string) *response {
			t.Helper()
			return e.do("POST", "/v1/requests", inst.Credential, body, append([]string{"Idempotency-Key", newKey()}, headers...)...)
		}
		with := func(k string, v any) map[string]any {
			b := refundBody()
			b[k] = v
			return b
		}
		without := func(k string) map[string]any {
			b := refundBody()
			delete(b, k)
			return b
		}

		for _, bad := range []string{"0s", "30", "1d", "-5m", "5 m", "", "05m", "1.5h", "30S", "PT30M"} {
			wantError(t, post(with("timeout", bad)), http.StatusBadRequest, "invalid_field", "timeout")
		}
		wantError(t, post(with("timeout", 30)), http.StatusBadRequest, "invalid_field", "timeout")

		for _, f := range []string{"tool", "arguments", "timeout"} {
			wantError(t, post(without(f)), http.StatusBadRequest, "missing_field", f)
		}
		for _, v := range []any{[]any{1, 2}, "a string", nil, 3} {
			wantError(t, post(with("arguments", v)), http.StatusBadRequest, "invalid_field", "arguments")
		}
		for _, v := range []any{[]any{}, "ctx", nil} {
			wantError(t, post(with("context", v)), http.StatusBadRequest, "invalid_field", "context")
		}
		wantError(t, post(with("tool", "")), http.StatusBadRequest, "invalid_field", "tool")
		wantError(t, post(with("tool", 5)), http.StatusBadRequest, "invalid_field", "tool")
		wantError(t, post(with("agent_reasoning", 5)), http.StatusBadRequest, "invalid_field", "agent_reasoning")
		wantError(t, post(with("delivery", validDelivery())), http.StatusBadRequest, "unknown_field", "delivery")
		wantError(t, post(with("Tool", "x")), http.StatusBadRequest, "unknown_field", "Tool")

		wantError(t, post(`{"tool": "x", "arguments": {}, "timeout": "30m"`), http.StatusBadRequest, "invalid_json", "")
		wantError(t, post(`not json`), http.StatusBadRequest, "invalid_json", "")
		wantError(t, post(`[]`), http.StatusBadRequest, "invalid_json", "")
		wantError(t, post(`null`), http.StatusBadRequest, "invalid_json", "")
		wantError(t, post(`{"tool": "x", "arguments": {}, "timeout": "30m"} {}`), http.StatusBadRequest, "invalid_json", "")
		wantError(t, post(`{"tool": "x", "arguments": {}, "timeout": "30m"}garbage`), http.StatusBadRequest, "invalid_json", "")

		wantError(t, post(refundBody(), "Content-Type", "text/plain"), http.StatusBadRequest, "invalid_content_type", "")

		big := `{"tool": "x", "arguments": {"blob": "` + strings.Repeat("a", 1<<20) + `"}, "timeout": "30m"}`
		wantError(t, post(big), http.StatusRequestEntityTooLarge, "request_too_large", "")

		wantError(t, e.do("POST", "/v1/requests", inst.Credential, refundBody()), http.StatusBadRequest, "missing_idempotency_key", "")

		// Nothing above created a request.
		r := e.do("GET", "/api/v1/tenants/default/approvals", e.operatorToken, nil)
		wantStatus(t, r, http.StatusOK)
		var list struct {
			Items []json.RawMessage `json:"items"`
		}
		if err := json.Unmarshal(r.Body, &list); err != nil || len(list.Items) != 0 {
			t.Fatalf("rejected submissions created requests: %v %s", err, r.Body)
		}
	})
}

func TestProviderRequestAuthentication(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		prov, _ := provisionerToken(t, e, "default")
		inst := provision(t, e, prov, map[string]any{})
		req := submit(t, e, inst.Credential, refundBody())

		wantError(t, e.do("POST", "/v1/requests", prov, refundBody(), "Idempotency-Key", newKey()), http.StatusForbidden, "forbidden", "")
		wantError(t, e.do("GET", "/v1/requests/"+req.ID, prov, nil), http.StatusForbidden, "forbidden", "")
		wantError(t, e.do("DELETE", "/v1/requests/"+req.ID, prov, nil), http.StatusForbidden, "forbidden", "")

		for _, tok := range []string{"", "garbage", "owl_inst_garbage", strings.Repeat("x", 300)} {
			wantError(t, e.do("POST", "/v1/requests", tok, refundBody(), "Idempotency-Key", newKey()), http.StatusUnauthorized, "unauthenticated", "")
			wantError(t, e.do("GET", "/v1/requests/"+req.ID, tok, nil), http.StatusUnauthorized, "unauthenticated", "")
		}
		wantError(t, e.do("GET", "/v1/requests/"+req.ID, "", nil, "Authorization", "Basic "+inst.Credential), http.StatusUnauthorized, "unauthenticated", "")

		// Revoked: the instance was deleted.
		wantStatus(t, e.do("DELETE", "/v1/instances/"+inst.ID, prov, nil), http.StatusNoContent)
		wantError(t, e.do("POST", "/v1/requests", inst.Credential, refundBody(), "Idempotency-Key", newKey()), http.StatusUnauthorized, "unauthenticated", "")
	})
}

// ---- 5. reading requests and long polls

func TestProviderGetRequest(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		a := newInstance(t, e)
		b := newInstance(t, e)
		req := submit(t, e, a.Credential, refundBody())

		r := e.do("GET", "/v1/requests/"+req.ID, a.Credential, nil)
		wantStatus(t, r, http.StatusOK)
		got := decodeRequest(t, r)
		if got.ID != req.ID || got.Status != "pending" || got.DeadlineAt != req.DeadlineAt || got.CreatedAt != req.CreatedAt {
			t.Fatalf("GET: %s", r.Body)
		}

		// Another instance of the same tenant, and another tenant.
		wantError(t, e.do("GET", "/v1/requests/"+req.ID, b.Credential, nil), http.StatusNotFound, "not_found", "")
		createTenant(t, e, "other")
		otherProv, _ := provisionerToken(t, e, "other")
		other := provision(t, e, otherProv, map[string]any{})
		wantError(t, e.do("GET", "/v1/requests/"+req.ID, other.Credential, nil), http.StatusNotFound, "not_found", "")
		wantError(t, e.do("GET", "/v1/requests/"+req.ID+"?wait=30s", other.Credential, nil), http.StatusNotFound, "not_found", "")
		wantError(t, e.do("GET", "/v1/requests/"+agentowl.NewID(""), a.Credential, nil), http.StatusNotFound, "not_found", "")
		wantError(t, e.do("GET", "/v1/requests/not-a-uuid", a.Credential, nil), http.StatusNotFound, "not_found", "")

		idle := settledWaiters(e.clock)
		for _, w := range []string{"bad", "0s", "30", "-1s", "1d"} {
			wantError(t, e.do("GET", "/v1/requests/"+req.ID+"?wait="+w, a.Credential, nil), http.StatusBadRequest, "invalid_field", "wait")
		}
		if n := settledWaiters(e.clock); n != idle {
			t.Fatalf("rejected waits left %d timers", n-idle)
		}

		// ?wait=30s on a terminal request returns at once.
		wantStatus(t, decide(e, req.ID, "deny", "note", "no"), http.StatusOK)
		idle = settledWaiters(e.clock)
		done := getAsync(e, "/v1/requests/"+req.ID+"?wait=30s", a.Credential)
		tr := await(t, e, done, "wait on a terminal request")
		wantStatus(t, tr, http.StatusOK)
		if g := decodeRequest(t, tr); g.Status != "denied" {
			t.Fatalf("wait on a terminal request: %s", tr.Body)
		}
		if n := settledWaiters(e.clock); n != idle {
			t.Errorf("a wait on a terminal request set %d timers", n-idle)
		}
	})
}

func TestProviderLongPollApproved(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		inst := newInstance(t, e)
		req := submit(t, e, inst.Credential, refundBody())
		poll := startPoll(t, e, "/v1/requests/"+req.ID+"?wait=30s", inst.Credential)

		d := decide(e, req.ID, "approve", "note", "The duplicate charge has been confirmed.")
		wantStatus(t, d, http.StatusOK)

		r := await(t, e, poll, "poll across approval")
		wantStatus(t, r, http.StatusOK)
		got := decodeRequest(t, r)
		if got.Status != "approved" || got.Decision == nil || got.Decision.Status != "approved" || got.Decision.ExpiresAt == nil ||
			got.Decision.Note != "The duplicate charge has been confirmed." {
			t.Fatalf("long poll returned %s", r.Body)
		}
		if !bytes.Equal(r.Body, d.Body) {
			t.Errorf("long poll returned %s, the decision response was %s", r.Body, d.Body)
		}
	})
}

func TestProviderLongPollTimesOut(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		inst := newInstance(t, e)
		req := submit(t, e, inst.Credential, refundBody())

		for _, wait := range []string{"30s", "90s", "10m"} { // 90s and 10m are capped at 30s
			poll := startPoll(t, e, "/v1/requests/"+req.ID+"?wait="+wait, inst.Credential)
			e.clock.Advance(30 * time.Second)
			r := await(t, e, poll, "wait="+wait)
			wantStatus(t, r, http.StatusOK)
			got := decodeRequest(t, r)
			if got.Status != "pending" || got.Decision != nil || got.DeadlineAt != req.DeadlineAt {
				t.Fatalf("wait=%s ended with %s", wait, r.Body)
			}
			wantAbsent(t, r.Body, "decision")
		}
	})
}

func TestProviderExpiry(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		inst := newInstance(t, e)
		body := refundBody()
		body["timeout"] = "1m"
		readLater := submit(t, e, inst.Credential, body)
		swept := submit(t, e, inst.Credential, body)
		polled := submit(t, e, inst.Credential, body)

		// A long poll that outlives the deadline returns the expired request.
		poll := startPoll(t, e, "/v1/requests/"+polled.ID+"?wait=30s", inst.Credential)
		e.clock.Advance(30 * time.Second)
		if r := await(t, e, poll, "first wait"); decodeRequest(t, r).Status != "pending" {
			t.Fatalf("before the deadline: %s", r.Body)
		}
		poll = startPoll(t, e, "/v1/requests/"+polled.ID+"?wait=30s", inst.Credential)
		e.clock.Advance(30 * time.Second) // reaches deadline_at exactly
		pr := await(t, e, poll, "wait across the deadline")
		checkExpired(t, pr, polled)

		e.clock.Advance(time.Minute)

		// A creation replay past the deadline returns 200 with the request expired.
		lateKey := newKey()
		wantStatus(t, e.do("POST", "/v1/requests", inst.Credential, body, "Idempotency-Key", lateKey), http.StatusCreated)
		e.clock.Advance(2 * time.Minute)
		lr := e.do("POST", "/v1/requests", inst.Credential, body, "Idempotency-Key", lateKey)
		if lr.Status != http.StatusOK || decodeRequest(t, lr).Status != "expired" {
			t.Errorf("replay past the deadline: %d %s, want 200 expired", lr.Status, lr.Body)
		}

		// A read past the deadline shows (and records) the expiry.
		r := e.do("GET", "/v1/requests/"+readLater.ID, inst.Credential, nil)
		checkExpired(t, r, readLater)
		if st := storedStatus(t, e, readLater.ID); st != agentowl.StatusExpired {
			t.Errorf("the expiry seen by a read is not recorded: stored status %s", st)
		}
		// The sweeper records the other one durably.
		if st := storedStatus(t, e, swept.ID); st != agentowl.StatusPending {
			t.Fatalf("before the sweep: stored %s", st)
		}
		n, err := e.approval.ExpireDue(context.Background())
		if err != nil || n != 1 {
			t.Fatalf("ExpireDue = %d, %v; want 1", n, err)
		}
		if st := storedStatus(t, e, swept.ID); st != agentowl.StatusExpired {
			t.Fatalf("after the sweep: stored %s", st)
		}
		if n, err := e.approval.ExpireDue(context.Background()); err != nil || n != 0 {
			t.Fatalf("second ExpireDue = %d, %v; want 0", n, err)
		}
		checkExpired(t, e.do("GET", "/v1/requests/"+swept.ID, inst.Credential, nil), swept)

		// It can no longer be decided or cancelled, and stays expired.
		wantError(t, decide(e, swept.ID, "approve"), http.StatusConflict, "already_terminal", "")
		wantError(t, e.do("DELETE", "/v1/requests/"+readLater.ID, inst.Credential, nil), http.StatusConflict, "already_terminal", "")
		checkExpired(t, e.do("GET", "/v1/requests/"+readLater.ID, inst.Credential, nil), readLater)
		if ov := operatorView(t, e, swept.ID); ov.Status != "expired" {
			t.Errorf("operator view: %+v", ov)
		}
	})
}

// checkExpired asserts r is orig, expired at its deadline, without expires_at.
func checkExpired(t *testing.T, r *response, orig *wireRequest) {
	t.Helper()
	wantStatus(t, r, http.StatusOK)
	got := decodeRequest(t, r)
	if got.ID != orig.ID || got.Status != "expired" || got.Decision == nil || got.Decision.Status != "expired" {
		t.Fatalf("want expired: %s", r.Body)
	}
	if got.Decision.DecidedAt != orig.DeadlineAt {
		t.Errorf("expired decided_at %s, want deadline_at %s", got.Decision.DecidedAt, orig.DeadlineAt)
	}
	if got.Decision.ExpiresAt != nil {
		t.Errorf("expired decision has expires_at: %s", r.Body)
	}
	if got.DeadlineAt != orig.DeadlineAt || got.CreatedAt != orig.CreatedAt {
		t.Errorf("deadline_at or created_at changed: %s", r.Body)
	}
}

// ---- 6. cancellation

func TestProviderCancelRequest(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		inst := newInstance(t, e)
		other := newInstance(t, e)
		req := submit(t, e, inst.Credential, refundBody())

		// Another instance cannot cancel it.
		wantError(t, e.do("DELETE", "/v1/requests/"+req.ID, other.Credential, nil), http.StatusNotFound, "not_found", "")
		wantError(t, e.do("DELETE", "/v1/requests/"+agentowl.NewID(""), inst.Credential, nil), http.StatusNotFound, "not_found", "")
		if got := getRequest(t, e, inst.Credential, req.ID); got.Status != "pending" {
			t.Fatalf("after a foreign cancel: %s", got.Status)
		}

		e.clock.Advance(2 * time.Minute)
		r := e.do("DELETE", "/v1/requests/"+req.ID, inst.Credential, nil)
		wantStatus(t, r, http.StatusOK)
		got := decodeRequest(t, r)
		if got.Status != "cancelled" || got.Decision == nil || got.Decision.Status != "cancelled" || got.Decision.ExpiresAt != nil {
			t.Fatalf("cancel: %s", r.Body)
		}
		if got.Decision.DecidedAt != e.clock.Now().Format(time.RFC3339) {
			t.Errorf("cancel decided_at %s, want %s", got.Decision.DecidedAt, e.clock.Now().Format(time.RFC3339))
		}
		e.clock.Advance(time.Minute)
		again := e.do("DELETE", "/v1/requests/"+req.ID, inst.Credential, nil)
		wantStatus(t, again, http.StatusOK)
		if !bytes.Equal(again.Body, r.Body) {
			t.Errorf("repeated cancel returned %s, want %s", again.Body, r.Body)
		}
		if g := e.do("GET", "/v1/requests/"+req.ID, inst.Credential, nil); !bytes.Equal(g.Body, r.Body) {
			t.Errorf("GET after cancel returned %s, want %s", g.Body, r.Body)
		}
		wantError(t, decide(e, req.ID, "approve"), http.StatusConflict, "already_terminal", "")

		// Approved and denied requests cannot be cancelled and stay unchanged.
		for _, decision := range []string{"approve", "deny"} {
			q := submit(t, e, inst.Credential, refundBody())
			d := decide(e, q.ID, decision, "note", "decided")
			wantStatus(t, d, http.StatusOK)
			wantError(t, e.do("DELETE", "/v1/requests/"+q.ID, inst.Credential, nil), http.StatusConflict, "already_terminal", "")
			if g := e.do("GET", "/v1/requests/"+q.ID, inst.Credential, nil); !bytes.Equal(g.Body, d.Body) {
				t.Errorf("%s: after a refused cancel GET returns %s, want %s", decision, g.Body, d.Body)
			}
		}
	})
}

func TestProviderCancelEndsLongPoll(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		inst := newInstance(t, e)
		req := submit(t, e, inst.Credential, refundBody())
		poll := startPoll(t, e, "/v1/requests/"+req.ID+"?wait=30s", inst.Credential)

		c := e.do("DELETE", "/v1/requests/"+req.ID, inst.Credential, nil)
		wantStatus(t, c, http.StatusOK)
		r := await(t, e, poll, "poll across cancellation")
		wantStatus(t, r, http.StatusOK)
		if !bytes.Equal(r.Body, c.Body) {
			t.Fatalf("long poll returned %s, want the cancelled request %s", r.Body, c.Body)
		}
	})
}

// ---- 7. races

func TestProviderDecisionRace(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		inst := newInstance(t, e)
		for round := range 3 {
			req := submit(t, e, inst.Credential, refundBody())
			const n = 8
			results := make([]*response, n)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := range n {
				decision := "approve"
				if i%2 == 1 {
					decision = "deny"
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					results[i] = decide(e, req.ID, decision, "note", fmt.Sprintf("decider %d", i))
				}()
			}
			close(start)
			wg.Wait()
			var winner *wireRequest
			for i, r := range results {
				switch r.Status {
				case http.StatusOK:
					if winner != nil {
						t.Fatalf("round %d: two decisions succeeded", round)
					}
					winner = decodeRequest(t, r)
				case http.StatusConflict:
					wantError(t, r, http.StatusConflict, "already_terminal", "")
				default:
					t.Fatalf("round %d decider %d: status %d: %s", round, i, r.Status, r.Body)
				}
			}
			if winner == nil {
				t.Fatalf("round %d: no decision succeeded", round)
			}
			got := getRequest(t, e, inst.Credential, req.ID)
			if got.Status != winner.Status || got.Decision.Note != winner.Decision.Note || got.Decision.DecidedAt != winner.Decision.DecidedAt {
				t.Fatalf("round %d: recorded %+v, winner %+v", round, got.Decision, winner.Decision)
			}
		}
	})
}

func TestProviderDecisionCancelRace(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		inst := newInstance(t, e)
		for round := range 10 {
			req := submit(t, e, inst.Credential, refundBody())
			var dec, can *response
			var wg sync.WaitGroup
			start := make(chan struct{})
			wg.Add(2)
			go func() { defer wg.Done(); <-start; dec = decide(e, req.ID, "approve") }()
			go func() { defer wg.Done(); <-start; can = e.do("DELETE", "/v1/requests/"+req.ID, inst.Credential, nil) }()
			close(start)
			wg.Wait()
			got := getRequest(t, e, inst.Credential, req.ID)
			switch {
			case dec.Status == http.StatusOK && can.Status == http.StatusConflict:
				wantError(t, can, http.StatusConflict, "already_terminal", "")
				if got.Status != "approved" {
					t.Fatalf("round %d: decision won but the request is %s", round, got.Status)
				}
			case can.Status == http.StatusOK && dec.Status == http.StatusConflict:
				wantError(t, dec, http.StatusConflict, "already_terminal", "")
				if got.Status != "cancelled" {
					t.Fatalf("round %d: cancellation won but the request is %s", round, got.Status)
				}
			default:
				t.Fatalf("round %d: decision %d %s / cancellation %d %s: want exactly one 200 and one 409 already_terminal",
					round, dec.Status, dec.Body, can.Status, can.Body)
			}
		}
	})
}

// ---- 8. decisions

func TestProviderDecisions(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		inst := newInstance(t, e)

		approved := submit(t, e, inst.Credential, refundBody())
		e.clock.Advance(2 * time.Minute)
		d := decide(e, approved.ID, "approve", "note", "The duplicate charge has been confirmed.")
		wantStatus(t, d, http.StatusOK)
		got := getRequest(t, e, inst.Credential, approved.ID)
		if got.Status != "approved" || got.Decision == nil || got.Decision.Status != "approved" || got.Decision.ExpiresAt == nil {
			t.Fatalf("approved: %+v", got)
		}
		decided := mustTime(t, got.Decision.DecidedAt)
		if !decided.Equal(e.clock.Now().Truncate(time.Second)) {
			t.Errorf("decided_at %s, want %s", got.Decision.DecidedAt, e.clock.Now())
		}
		if exp := mustTime(t, *got.Decision.ExpiresAt); !exp.Equal(decided.Add(5 * time.Minute)) {
			t.Errorf("expires_at %s, want decided_at + 5m", *got.Decision.ExpiresAt)
		}
		if got.Decision.Note != "The duplicate charge has been confirmed." {
			t.Errorf("note not echoed: %+v", got.Decision)
		}
		// The approval's validity ending changes nothing recorded, and reads do not renew it.
		e.clock.Advance(10 * time.Minute)
		later := getRequest(t, e, inst.Credential, approved.ID)
		if later.Status != "approved" || *later.Decision.ExpiresAt != *got.Decision.ExpiresAt {
			t.Errorf("after expires_at: %+v", later.Decision)
		}
		if n, err := e.approval.ExpireDue(context.Background()); err != nil || n != 0 {
			t.Errorf("ExpireDue touched decided requests: %d, %v", n, err)
		}

		// valid_for overrides the validity.
		custom := submit(t, e, inst.Credential, refundBody())
		wantStatus(t, decide(e, custom.ID, "approve", "valid_for", "10m"), http.StatusOK)
		cg := getRequest(t, e, inst.Credential, custom.ID)
		if exp := mustTime(t, *cg.Decision.ExpiresAt); !exp.Equal(mustTime(t, cg.Decision.DecidedAt).Add(10 * time.Minute)) {
			t.Errorf("valid_for 10m: decided %s expires %s", cg.Decision.DecidedAt, *cg.Decision.ExpiresAt)
		}
		wantAbsent(t, mustRaw(t, e.do("GET", "/v1/requests/"+custom.ID, inst.Credential, nil).Body, "decision"), "note")

		// Denied: no expires_at; the note is echoed.
		denied := submit(t, e, inst.Credential, refundBody())
		dr := decide(e, denied.ID, "deny", "note", "Not a duplicate.")
		wantStatus(t, dr, http.StatusOK)
		dg := e.do("GET", "/v1/requests/"+denied.ID, inst.Credential, nil)
		g := decodeRequest(t, dg)
		if g.Status != "denied" || g.Decision == nil || g.Decision.Status != "denied" || g.Decision.Note != "Not a duplicate." {
			t.Fatalf("denied: %s", dg.Body)
		}
		wantAbsent(t, mustRaw(t, dg.Body, "decision"), "expires_at")

		// A second decision is refused and changes nothing.
		wantError(t, decide(e, denied.ID, "approve"), http.StatusConflict, "already_terminal", "")
		if again := e.do("GET", "/v1/requests/"+denied.ID, inst.Credential, nil); !bytes.Equal(again.Body, dg.Body) {
			t.Errorf("a refused decision changed the request: %s", again.Body)
		}
		// Creation replays return the decided request with 200.
		key := newKey()
		first := e.do("POST", "/v1/requests", inst.Credential, refundBody(), "Idempotency-Key", key)
		wantStatus(t, first, http.StatusCreated)
		wantStatus(t, decide(e, decodeRequest(t, first).ID, "deny"), http.StatusOK)
		replay := e.do("POST", "/v1/requests", inst.Credential, refundBody(), "Idempotency-Key", key)
		wantStatus(t, replay, http.StatusOK)
		if rp := decodeRequest(t, replay); rp.Status != "denied" {
			t.Errorf("replay of a denied request: %s", replay.Body)
		}
	})
}

// mustRaw returns member name of the JSON object body.
func mustRaw(t *testing.T, body []byte, name string) []byte {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil || m[name] == nil {
		t.Fatalf("no member %q: %v: %s", name, err, body)
	}
	return m[name]
}
