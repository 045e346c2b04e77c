package conformance

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The provider checks' IDs.
const (
	PAuthCredential    = "provider.auth.credential-required"
	PAuthTokenKinds    = "provider.auth.token-kinds"
	PAuthIsolation     = "provider.auth.instance-isolation"
	PCreateRetrieve    = "provider.requests.create-retrieve"
	PLongPoll          = "provider.requests.long-poll"
	PCancel            = "provider.requests.cancel"
	PIdemReplay        = "provider.idempotency.replay"
	PIdemConflict      = "provider.idempotency.conflict"
	PTerminalCancelled = "provider.terminal.cancelled-stays"
	PExpiry            = "provider.expiry.at-deadline"
	PContractResponses = "provider.contract.responses"
	PContractUnknown   = "provider.contract.unknown-fields"
	PContractInvalid   = "provider.contract.invalid-input"
	PImmutable         = "provider.immutability.tool-arguments"
	PInstLifecycle     = "provider.instances.lifecycle"
	PInstDelete        = "provider.instances.delete"
	PInstDeleteRetry   = "provider.instances.delete-retry"
	PInstUpdateRetry   = "provider.instances.update-retry"
	PDecisionApproved  = "provider.decision.approved"
	PDecisionDenied    = "provider.decision.denied"
)

func (p *providerRun) checks() []Check {
	return []Check{
		{ID: PAuthCredential, Requirement: "8_security.md Provider 1", Title: "a missing or unknown credential is 401, and never echoed", Run: p.checkAuthCredential},
		{ID: PAuthTokenKinds, Requirement: "8_security.md Trust", Title: "instance credentials cannot manage instances; provisioner tokens cannot request approval", Run: p.checkTokenKinds},
		{ID: PAuthIsolation, Requirement: "8_security.md Provider 1", Title: "another instance's request is 404 to read and cancel; keys are per instance", Run: p.checkIsolation},
		{ID: PCreateRetrieve, Requirement: "8_security.md Provider 2", Title: "create (201 pending, deadline not lengthened) and retrieve a request", Run: p.checkCreateRetrieve},
		{ID: PLongPoll, Requirement: "8_security.md Provider 2", Title: "?wait holds a pending request; a cancellation or a decision ends the long poll", Run: p.checkLongPoll},
		{ID: PCancel, Requirement: "8_security.md Provider 2", Title: "cancel a pending request; cancelling again returns the same cancelled request", Run: p.checkCancel},
		{ID: PIdemReplay, Requirement: "8_security.md Provider 3", Title: "same key and same values (other order, whitespace) return the same request", Run: p.checkIdemReplay},
		{ID: PIdemConflict, Requirement: "8_security.md Provider 3", Title: "same key with another body is 409 idempotency_conflict", Run: p.checkIdemConflict},
		{ID: PTerminalCancelled, Requirement: "8_security.md Provider 4", Title: "a cancelled request stays cancelled past its deadline and against a decision", Run: p.checkTerminalCancelled},
		{ID: PExpiry, Requirement: "8_security.md Provider 5", Title: "a request still pending at its deadline becomes expired, and stays so against a late approval", Run: p.checkExpiry},
		{ID: PContractUnknown, Requirement: "5_http.md Conventions", Title: "unknown fields of protocol objects are refused with 400, nothing stored", Run: p.checkUnknownFields},
		{ID: PContractInvalid, Requirement: "8_security.md Provider 6", Title: "invalid input (no Idempotency-Key, bad timeout, arguments not an object, no tool) is 400", Run: p.checkInvalidInput},
		{ID: PImmutable, Requirement: "8_security.md Provider 7", Title: "tool and arguments come back exactly, on every read", Run: p.checkImmutable},
		{ID: PInstLifecycle, Requirement: "8_security.md Provider 8", Title: "create (with a working credential), retrieve, update and replay an instance", Run: p.checkInstLifecycle},
		{ID: PInstDelete, Requirement: "8_security.md Provider 11", Title: "deleting an instance revokes its credential and cancels its pending requests", Run: p.checkInstDelete},
		{ID: PInstDeleteRetry, Requirement: "8_security.md Provider 12", Title: "a retried delete is 204 and never restores the instance", Run: p.checkInstDeleteRetry},
		{ID: PInstUpdateRetry, Requirement: "8_security.md Provider 12", Title: "a replayed update returns its result without overwriting a later update", Run: p.checkInstUpdateRetry},
		{ID: PDecisionApproved, Requirement: "8_security.md Provider 10", Title: "an approval has a fixed expires_at later than decided_at, across reads and retries", Run: p.checkApproved},
		{ID: PDecisionDenied, Requirement: "8_security.md Provider 4", Title: "a denial is final: no expires_at, cancellation is 409, a later approval changes nothing", Run: p.checkDenied},
		{ID: PContractResponses, Requirement: "8_security.md Provider 6", Title: "every answer of the run matches openapi.yaml and carries X-Request-ID", Final: true, Run: p.checkContract},
	}
}

func (p *providerRun) checkAuthCredential(ctx context.Context, t *T) {
	id := PAuthCredential
	bogus := "aap-conformance-not-a-credential-" + randHex(12)
	body := probeCall(id, "30m")
	cases := []struct {
		what, method, path, token string
		body                      any
	}{
		{"create a request without a credential", http.MethodPost, "/v1/requests", "", body},
		{"create a request with an unknown credential", http.MethodPost, "/v1/requests", bogus, body},
		{"read a request with an unknown credential", http.MethodGet, "/v1/requests/" + newUUID(), bogus, nil},
		{"provision an instance without a token", http.MethodPost, "/v1/instances", "", map[string]any{"instance_name": "x"}},
		{"provision an instance with an unknown token", http.MethodPost, "/v1/instances", bogus, map[string]any{"instance_name": "x"}},
		{"read an instance with an unknown token", http.MethodGet, "/v1/instances/" + newUUID(), bogus, nil},
	}
	for _, c := range cases {
		x := p.api.call(ctx, t, id, c.method, c.path, c.token, c.body, "Idempotency-Key", newKey(id))
		expectError(t, x, c.what, "", http.StatusUnauthorized)
		if x.Err == nil && (strings.Contains(string(x.RespBody), bogus) || strings.Contains(fmt.Sprint(x.RespHeader), bogus)) {
			t.Failf("%s: the answer echoes the credential that was sent (credentials must not appear in error messages)", c.what)
		}
	}
}

func (p *providerRun) checkTokenKinds(ctx context.Context, t *T) {
	id := PAuthTokenKinds
	inst := p.newInstance(ctx, t, id)
	x := p.api.call(ctx, t, id, http.MethodPost, "/v1/instances", inst.Token, map[string]any{"instance_name": "by-instance"}, "Idempotency-Key", newKey(id))
	expectError(t, x, "provision an instance with an instance credential", "", http.StatusUnauthorized, http.StatusForbidden)
	x = p.api.call(ctx, t, id, http.MethodGet, "/v1/instances/"+url.PathEscape(inst.ID), inst.Token, nil)
	expectError(t, x, "read an instance with its own instance credential", "", http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound)
	x = p.api.call(ctx, t, id, http.MethodPatch, "/v1/instances/"+url.PathEscape(inst.ID), inst.Token, map[string]any{"instance_name": "renamed-by-instance"}, "Idempotency-Key", newKey(id))
	expectError(t, x, "update an instance with its own instance credential", "", http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound)
	x = p.api.call(ctx, t, id, http.MethodDelete, "/v1/instances/"+url.PathEscape(inst.ID), inst.Token, nil)
	expectError(t, x, "delete an instance with its own instance credential", "", http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound)
	x = p.api.call(ctx, t, id, http.MethodPost, "/v1/requests", p.cfg.ProvisionerToken, probeCall(id, "30m"), "Idempotency-Key", newKey(id))
	expectError(t, x, "create a request with the provisioner token", "", http.StatusUnauthorized, http.StatusForbidden)
	// The instance survived its own credential's attempts.
	x = p.api.call(ctx, t, id, http.MethodGet, "/v1/instances/"+url.PathEscape(inst.ID), p.cfg.ProvisionerToken, nil)
	if x.Err != nil || x.Status != http.StatusOK {
		t.Failf("after the instance credential's attempts, the instance is not readable by its provisioner: %s", x.Describe())
	} else if v := x.JSON(); v == nil || v["name"] == "renamed-by-instance" {
		t.Failf("the instance credential renamed its own instance: %s", x.Describe())
	}
}

func (p *providerRun) checkIsolation(ctx context.Context, t *T) {
	id := PAuthIsolation
	a, b := p.newInstance(ctx, t, id+"-a"), p.newInstance(ctx, t, id+"-b")
	body := probeCall(id, "30m")
	// The agent's claims do not change whose request it is.
	body["context"] = map[string]any{"instance_id": b.ID, "instance_name": b.Name}
	key := newKey(id)
	v := expectRequest(t, p.create(ctx, t, id, a, key, body), "instance A creates a request", http.StatusCreated)
	expectError(t, p.get(ctx, t, id, b, v.ID, ""), "instance B reads A's request", "", http.StatusNotFound)
	expectError(t, p.cancel(ctx, t, id, b, v.ID), "instance B cancels A's request", "", http.StatusNotFound)
	after := expectRequest(t, p.get(ctx, t, id, a, v.ID, ""), "instance A reads its request", http.StatusOK)
	if after.Status != v.Status {
		t.Failf("instance B's cancellation changed A's request from %s to %s", v.Status, after.Status)
	}
	// Keys are scoped to the instance: B's identical submission is B's own.
	vb := expectRequest(t, p.create(ctx, t, id, b, key, body), "instance B submits with A's idempotency key", http.StatusCreated)
	if vb.ID == v.ID {
		t.Failf("instance B's submission with A's key returned A's request %s", v.ID)
	}
}

func (p *providerRun) checkCreateRetrieve(ctx context.Context, t *T) {
	id := PCreateRetrieve
	inst := p.newInstance(ctx, t, id)
	v, body, _ := p.pending(ctx, t, id, inst, "30m")
	if !uuidLike(v.ID) {
		t.Failf("request id %q is not a UUID", v.ID)
	}
	if v.Timeout != body["timeout"] {
		t.Failf("timeout came back as %q, submitted %q", v.Timeout, body["timeout"])
	}
	if v.CreatedAt.IsZero() || v.DeadlineAt.IsZero() {
		t.Failf("created_at %v or deadline_at %v missing or not RFC 3339", v.CreatedAt, v.DeadlineAt)
	} else {
		if !v.DeadlineAt.After(v.CreatedAt) {
			t.Failf("deadline_at %s is not after created_at %s", v.DeadlineAt, v.CreatedAt)
		}
		if v.DeadlineAt.After(v.CreatedAt.Add(30*time.Minute + time.Second)) {
			t.Failf("deadline_at %s lengthens the requested 30m window from created_at %s (it may be shortened, never lengthened)", v.DeadlineAt.Format(time.RFC3339), v.CreatedAt.Format(time.RFC3339))
		}
	}
	g := expectRequest(t, p.get(ctx, t, id, inst, v.ID, ""), "retrieve the request", http.StatusOK)
	if g.ID != v.ID || g.Status != "pending" {
		t.Failf("retrieving request %s returned %s in state %s", v.ID, g.ID, g.Status)
	}
	if !g.DeadlineAt.Equal(v.DeadlineAt) {
		t.Failf("deadline_at changed from %s to %s on retrieval", v.DeadlineAt, g.DeadlineAt)
	}
	expectError(t, p.get(ctx, t, id, inst, newUUID(), ""), "retrieve an unknown request ID", "", http.StatusNotFound)
}

func (p *providerRun) checkLongPoll(ctx context.Context, t *T) {
	id := PLongPoll
	inst := p.newInstance(ctx, t, id)
	v, _, _ := p.pending(ctx, t, id, inst, "30m")
	wait := p.cfg.LongPollWait
	x := p.get(ctx, t, id, inst, v.ID, seconds(wait))
	g := expectRequest(t, x, "long poll a pending request", http.StatusOK)
	if g.Status != "pending" {
		t.Failf("the long poll returned %s for a request nobody decided", g.Status)
	}
	if x.Elapsed < wait/2 {
		t.Failf("?wait=%s answered after %s: the provider did not hold the response", seconds(wait), x.Elapsed.Round(time.Millisecond))
	}
	expectError(t, p.get(ctx, t, id, inst, v.ID, "soon"), "long poll with wait=soon (not a duration)", "", http.StatusBadRequest)
	// A cancellation ends a long poll in progress, which returns the
	// cancelled request.
	v2, _, _ := p.pending(ctx, t, id, inst, "30m")
	done := make(chan *Exchange, 1)
	go func() { done <- p.get(ctx, t, id, inst, v2.ID, "20s") }()
	time.Sleep(300 * time.Millisecond)
	expectRequest(t, p.cancel(ctx, t, id, inst, v2.ID), "cancel while a long poll waits", http.StatusOK)
	select {
	case x := <-done:
		r := expectRequest(t, x, "the long poll during cancellation", http.StatusOK)
		if r.Status != "cancelled" {
			t.Failf("the long poll ended with %s, not the cancelled request", r.Status)
		}
	case <-time.After(10 * time.Second):
		t.Failf("a long poll with wait=20s was still waiting 10s after its request was cancelled")
	}
	if p.cfg.Decider == nil {
		t.Notef("no decider: a long poll ended by a decision was not tried")
		return
	}
	// A decision ends the long poll waiting at that moment. A decider may
	// be slow (a person): the kit polls until the decision is made, and
	// the poll in progress then must return it.
	v3, _, _ := p.pending(ctx, t, id, inst, "30m")
	var decidedAt atomic.Pointer[time.Time]
	go func() {
		time.Sleep(300 * time.Millisecond)
		out, err := p.cfg.Decider.Decide(ctx, v3.ID, true)
		t.Notef("%s (err %v)", out, err)
		now := time.Now()
		decidedAt.Store(&now)
	}()
	limit := time.Now().Add(p.cfg.DecisionTimeout + 30*time.Second)
	for time.Now().Before(limit) {
		x := p.get(ctx, t, id, inst, v3.ID, "25s")
		r := expectRequest(t, x, "long poll while the request is being approved", http.StatusOK)
		if r.Status == "approved" {
			return
		}
		if r.Status != "pending" {
			t.Fatalf("the request became %s, not approved", r.Status)
		}
		if x.Elapsed < time.Second {
			sleep(ctx, t, 100*time.Millisecond) // a provider that does not hold (see the first part)
		}
		if d := decidedAt.Load(); d != nil && time.Since(*d) > time.Second {
			t.Fatalf("a long poll returned pending %s after the approval was made: it should have returned the decision", time.Since(*d).Round(time.Millisecond))
		}
	}
	t.Failf("the approval did not show within %s", p.cfg.DecisionTimeout)
}

func (p *providerRun) checkCancel(ctx context.Context, t *T) {
	id := PCancel
	inst := p.newInstance(ctx, t, id)
	v, _, _ := p.pending(ctx, t, id, inst, "30m")
	c1 := expectRequest(t, p.cancel(ctx, t, id, inst, v.ID), "cancel a pending request", http.StatusOK)
	if c1.Status != "cancelled" || c1.Decision == nil || c1.Decision.Status != "cancelled" {
		t.Fatalf("cancellation answered status %s with decision %+v, not cancelled", c1.Status, c1.Decision)
	}
	c2 := expectRequest(t, p.cancel(ctx, t, id, inst, v.ID), "cancel it again", http.StatusOK)
	if c2.Status != "cancelled" || c2.Decision == nil || c2.Decision.DecidedRaw != c1.Decision.DecidedRaw {
		t.Failf("cancelling again must return the same cancelled request: got %s decided_at %v, first %s", c2.Status, c2.Decision, c1.Decision.DecidedRaw)
	}
	g := expectRequest(t, p.get(ctx, t, id, inst, v.ID, ""), "read the cancelled request", http.StatusOK)
	if g.Status != "cancelled" {
		t.Failf("the cancelled request reads as %s", g.Status)
	}
	expectError(t, p.cancel(ctx, t, id, inst, newUUID()), "cancel an unknown request ID", "", http.StatusNotFound)
}

func (p *providerRun) checkIdemReplay(ctx context.Context, t *T) {
	id := PIdemReplay
	inst := p.newInstance(ctx, t, id)
	key := newKey(id)
	raw := `{"tool":"conformance_probe","timeout":"30m","arguments":{"b":2,"a":{"y":[1,2],"x":"1"}},"context":{"k":"v","j":1}}`
	same := "{ \"context\" : {\"j\":1, \"k\":\"v\"},\n  \"arguments\": {\"a\": {\"x\": \"1\", \"y\": [1, 2]}, \"b\": 2},\n  \"timeout\": \"30m\", \"tool\": \"conformance_probe\" }"
	v := expectRequest(t, p.create(ctx, t, id, inst, key, raw), "create a request", http.StatusCreated)
	r := expectRequest(t, p.create(ctx, t, id, inst, key, same), "replay it with the same key: same values, other key order and whitespace", http.StatusOK)
	if r.ID != v.ID {
		t.Failf("the replay returned request %s, not the original %s", r.ID, v.ID)
	}
	expectRequest(t, p.cancel(ctx, t, id, inst, v.ID), "cancel it", http.StatusOK)
	r = expectRequest(t, p.create(ctx, t, id, inst, key, raw), "replay it after it became terminal", http.StatusOK)
	if r.ID != v.ID || r.Status != "cancelled" {
		t.Failf("a replay of a terminal request must return it in its current state: got %s %s, want %s cancelled", r.ID, r.Status, v.ID)
	}
}

func (p *providerRun) checkIdemConflict(ctx context.Context, t *T) {
	id := PIdemConflict
	inst := p.newInstance(ctx, t, id)
	v, body, key := p.pending(ctx, t, id, inst, "30m")
	other := probeCall(id, "30m")
	other["arguments"].(map[string]any)["amount"] = 1
	x := p.create(ctx, t, id, inst, key, other)
	expectError(t, x, "reuse the key for another body", "idempotency_conflict", http.StatusConflict)
	if x.Status < 300 {
		if w, err := parseView(x.RespBody); err == nil && w.ID == v.ID {
			t.Failf("the provider answered the other body with the original request %s (it reuses a request for another body)", v.ID)
		}
	}
	r := expectRequest(t, p.create(ctx, t, id, inst, key, body), "replay the original body with the key", http.StatusOK)
	if r.ID != v.ID {
		t.Failf("after the conflict, the key returns request %s, not the original %s", r.ID, v.ID)
	}
	n := expectRequest(t, p.create(ctx, t, id, inst, newKey(id), body), "the same call with a new key (another execution attempt)", http.StatusCreated)
	if n.ID == v.ID {
		t.Failf("a new key returned the existing request %s: each execution attempt needs its own request", v.ID)
	}
}

func (p *providerRun) checkTerminalCancelled(ctx context.Context, t *T) {
	id := PTerminalCancelled
	inst := p.newInstance(ctx, t, id)
	// A longer window than the expiry checks', so that the cancellation
	// surely comes first.
	timeout := p.cfg.ExpiryTimeout + 2*time.Second
	var v, c *reqView
	for attempt := 1; ; attempt++ {
		v, _, _ = p.pending(ctx, t, id, inst, seconds(timeout))
		x := p.cancel(ctx, t, id, inst, v.ID)
		if x.Status == http.StatusConflict && attempt < 3 && time.Now().After(deadlineOf(v, timeout)) {
			// The round trips took longer than the window: not the
			// provider's fault. Again with a longer one.
			t.Notef("the cancellation came after the deadline of %s; trying again with a longer window", seconds(timeout))
			timeout *= 2
			continue
		}
		c = expectRequest(t, x, "cancel the request before its deadline", http.StatusOK)
		break
	}
	if c.Decision == nil {
		t.Fatalf("the cancelled request has no decision")
	}
	sleep(ctx, t, time.Until(deadlineOf(v, timeout))+min(p.cfg.ExpiryGrace/2, time.Second))
	g := expectRequest(t, p.get(ctx, t, id, inst, v.ID, ""), "read it after its deadline", http.StatusOK)
	if g.Status != "cancelled" || g.Decision == nil || g.Decision.DecidedRaw != c.Decision.DecidedRaw {
		t.Failf("a cancelled request changed after its deadline: now %s (decided_at %v), was cancelled at %s", g.Status, g.Decision, c.Decision.DecidedRaw)
	}
	if p.cfg.Decider == nil {
		t.Notef("no decider: the attempt to approve the cancelled request was not made")
		return
	}
	out, err := p.cfg.Decider.Decide(ctx, v.ID, true)
	t.Notef("approve the cancelled request (the provider should refuse): %s (err %v)", out, err)
	g = expectRequest(t, p.get(ctx, t, id, inst, v.ID, ""), "read it after the attempt to approve", http.StatusOK)
	if g.Status != "cancelled" || g.Decision == nil || g.Decision.DecidedRaw != c.Decision.DecidedRaw {
		t.Failf("a cancelled request changed after an approval: now %s", g.Status)
	}
}

// deadlineOf is when a request created with timeout must be expired: its
// deadline_at, and never later than created_at + timeout.
func deadlineOf(v *reqView, timeout time.Duration) time.Time {
	d := v.DeadlineAt
	if lim := v.CreatedAt.Add(timeout); d.IsZero() || lim.Before(d) {
		d = lim
	}
	return d
}

// awaitExpiry waits for a request's deadline and reads it until it is no
// longer pending or the grace has passed.
func (p *providerRun) awaitExpiry(ctx context.Context, t *T, check string, inst *instance, v *reqView) *reqView {
	dl := deadlineOf(v, p.cfg.ExpiryTimeout)
	sleep(ctx, t, time.Until(dl))
	limit := time.Now().Add(p.cfg.ExpiryGrace)
	for {
		g := expectRequest(t, p.get(ctx, t, check, inst, v.ID, ""), "read the request after its deadline", http.StatusOK)
		if g.Status != "pending" || time.Now().After(limit) {
			return g
		}
		sleep(ctx, t, 250*time.Millisecond)
	}
}

func (p *providerRun) checkExpiry(ctx context.Context, t *T) {
	id := PExpiry
	inst := p.newInstance(ctx, t, id)
	v, _, _ := p.pending(ctx, t, id, inst, seconds(p.cfg.ExpiryTimeout))
	g := p.awaitExpiry(ctx, t, id, inst, v)
	if g.Status != "expired" {
		t.Fatalf("%s after its deadline %s (+%s grace), the request is %s, not expired", p.cfg.ExpiryGrace, deadlineOf(v, p.cfg.ExpiryTimeout).Format(time.RFC3339), p.cfg.ExpiryGrace, g.Status)
	}
	if g.Decision == nil || g.Decision.Status != "expired" || g.Decision.ExpiresAt != nil {
		t.Failf("an expired request needs decision.status expired and no expires_at: %+v", g.Decision)
	}
	expectError(t, p.cancel(ctx, t, id, inst, v.ID), "cancel the expired request", "already_terminal", http.StatusConflict)
	again := expectRequest(t, p.get(ctx, t, id, inst, v.ID, ""), "read it after the cancellation attempt", http.StatusOK)
	if again.Status != "expired" {
		t.Failf("cancelling an expired request changed it to %s", again.Status)
	}
	if p.cfg.Decider == nil {
		t.Notef("no decider: a late approval was not attempted")
		return
	}
	// A second request is approved right after its deadline, before the
	// provider may have noticed the deadline on its own: it must not
	// become approved.
	v2, _, _ := p.pending(ctx, t, id, inst, seconds(p.cfg.ExpiryTimeout))
	sleep(ctx, t, time.Until(deadlineOf(v2, p.cfg.ExpiryTimeout))+100*time.Millisecond)
	out, err := p.cfg.Decider.Decide(ctx, v2.ID, true)
	t.Notef("approve a request after its deadline (the provider should refuse): %s (err %v)", out, err)
	if g := p.awaitExpiry(ctx, t, id, inst, v2); g.Status != "expired" {
		t.Failf("a request approved after its deadline is %s, not expired", g.Status)
	}
}

func (p *providerRun) checkUnknownFields(ctx context.Context, t *T) {
	id := PContractUnknown
	inst := p.newInstance(ctx, t, id)
	body := probeCall(id, "30m")
	body["approved"] = true
	key := newKey(id)
	expectError(t, p.create(ctx, t, id, inst, key, body), "create a request with an unknown field", "", http.StatusBadRequest)
	delete(body, "approved")
	// Nothing was stored under the key: the valid body creates anew.
	x := p.create(ctx, t, id, inst, key, body)
	if x.Err == nil && x.Status != http.StatusCreated {
		t.Failf("after the refused submission, the same key with a valid body answered %d, not 201: the refused one was stored (%s)", x.Status, x.Describe())
	}
	x = p.api.call(ctx, t, id, http.MethodPost, "/v1/instances", p.cfg.ProvisionerToken,
		map[string]any{"instance_name": "aap-conformance-unknown", "credential": map[string]any{"token": "chosen-by-caller"}}, "Idempotency-Key", newKey(id))
	expectError(t, x, "provision an instance with an unknown field", "", http.StatusBadRequest)
	if x.Status < 300 {
		if inst2, err := parseProvisioned(x); err == nil {
			p.run.Cleanup(func(ctx context.Context) {
				p.api.call(ctx, &T{run: p.run}, "cleanup", http.MethodDelete, "/v1/instances/"+inst2.ID, p.cfg.ProvisionerToken, nil)
			})
		}
	}
	x = p.api.call(ctx, t, id, http.MethodPatch, "/v1/instances/"+url.PathEscape(inst.ID), p.cfg.ProvisionerToken,
		map[string]any{"instance_name": "aap-conformance-renamed", "owner": "someone"}, "Idempotency-Key", newKey(id))
	expectError(t, x, "update an instance with an unknown field", "", http.StatusBadRequest)
}

func (p *providerRun) checkInvalidInput(ctx context.Context, t *T) {
	id := PContractInvalid
	inst := p.newInstance(ctx, t, id)
	x := p.api.call(ctx, t, id, http.MethodPost, "/v1/requests", inst.Token, probeCall(id, "30m"))
	expectError(t, x, "create a request without an Idempotency-Key", "", http.StatusBadRequest)
	bad := []struct {
		what string
		edit func(map[string]any)
	}{
		{"a timeout that is not a duration (30x)", func(b map[string]any) { b["timeout"] = "30x" }},
		{"arguments that are not an object", func(b map[string]any) { b["arguments"] = []any{1, 2} }},
		{"no tool", func(b map[string]any) { delete(b, "tool") }},
	}
	for _, c := range bad {
		b := probeCall(id, "30m")
		c.edit(b)
		expectError(t, p.create(ctx, t, id, inst, newKey(id), b), "create a request with "+c.what, "", http.StatusBadRequest)
	}
}

func (p *providerRun) checkImmutable(ctx context.Context, t *T) {
	id := PImmutable
	inst := p.newInstance(ctx, t, id)
	v, body, key := p.pending(ctx, t, id, inst, "30m")
	want := body["arguments"]
	compare := func(what string, r *reqView) {
		if r.Tool != body["tool"] {
			t.Failf("%s: tool is %q, submitted %q", what, r.Tool, body["tool"])
		}
		if !sameJSONValue(r.Arguments, want) {
			got, _ := roundTrip(r.Arguments)
			t.Failf("%s: arguments are %v, submitted %v (keys, values and number literals must come back exactly)", what, got, want)
		}
	}
	compare("the creation answer", v)
	compare("a read", expectRequest(t, p.get(ctx, t, id, inst, v.ID, ""), "read the request", http.StatusOK))
	other := probeCall(id, "30m")
	other["arguments"] = map[string]any{"payment_id": "payment_other", "amount": 1}
	p.create(ctx, t, id, inst, key, other)
	compare("a read after the key was reused for other arguments", expectRequest(t, p.get(ctx, t, id, inst, v.ID, ""), "read the request", http.StatusOK))
	compare("a long poll", expectRequest(t, p.get(ctx, t, id, inst, v.ID, "1s"), "long poll the request", http.StatusOK))
	compare("a replay", expectRequest(t, p.create(ctx, t, id, inst, key, body), "replay the submission", http.StatusOK))
	compare("the cancellation answer", expectRequest(t, p.cancel(ctx, t, id, inst, v.ID), "cancel the request", http.StatusOK))
	compare("a read of the cancelled request", expectRequest(t, p.get(ctx, t, id, inst, v.ID, ""), "read the request", http.StatusOK))
}

func (p *providerRun) getInstance(ctx context.Context, t *T, check, instID string) *Exchange {
	return p.api.call(ctx, t, check, http.MethodGet, "/v1/instances/"+url.PathEscape(instID), p.cfg.ProvisionerToken, nil)
}

func (p *providerRun) patchInstance(ctx context.Context, t *T, check, instID, key string, body any) *Exchange {
	return p.api.call(ctx, t, check, http.MethodPatch, "/v1/instances/"+url.PathEscape(instID), p.cfg.ProvisionerToken, body, "Idempotency-Key", key)
}

func instanceName(x *Exchange) string {
	if m := x.JSON(); m != nil {
		if s, ok := m["name"].(string); ok {
			return s
		}
	}
	return ""
}

func (p *providerRun) checkInstLifecycle(ctx context.Context, t *T) {
	id := PInstLifecycle
	inst := p.newInstance(ctx, t, id)
	x := p.getInstance(ctx, t, id, inst.ID)
	if x.Err != nil || x.Status != http.StatusOK {
		t.Fatalf("retrieve the new instance: %s", x.Describe())
	}
	if m := x.JSON(); m == nil || m["id"] != inst.ID {
		t.Failf("retrieving instance %s returned another: %s", inst.ID, x.Describe())
	}
	if strings.Contains(string(x.RespBody), inst.Token) || strings.Contains(fmt.Sprint(x.RespHeader), inst.Token) {
		t.Failf("an instance read returns its credential")
	}
	// The credential issued at creation is bound to this instance.
	expectRequest(t, p.create(ctx, t, id, inst, newKey(id), probeCall(id, "30m")), "create a request with the issued credential", http.StatusCreated)
	newName := inst.Name + "-renamed"
	x = p.patchInstance(ctx, t, id, inst.ID, newKey(id), map[string]any{"instance_name": newName})
	if x.Err != nil || x.Status != http.StatusOK {
		t.Failf("update the instance's name: %s", x.Describe())
	}
	x = p.getInstance(ctx, t, id, inst.ID)
	if got := instanceName(x); got != newName {
		t.Failf("after the update, the instance's name is %q, not %q", got, newName)
	}
	// Creation is idempotent: the replay returns the same instance and
	// credential, and the key cannot be reused for other input.
	x = p.api.call(ctx, t, id, http.MethodPost, "/v1/instances", p.cfg.ProvisionerToken, inst.body, "Idempotency-Key", inst.Key)
	if r, err := parseProvisioned(x); err != nil {
		t.Failf("replay the instance creation: %v", err)
	} else {
		if x.Status != http.StatusOK {
			t.Failf("a creation replay answered %d, not 200", x.Status)
		}
		if r.ID != inst.ID || r.Token != inst.Token {
			t.Failf("a creation replay returned instance %s with another credential (or another instance), not the original %s and its credential", r.ID, inst.ID)
		}
	}
	x = p.api.call(ctx, t, id, http.MethodPost, "/v1/instances", p.cfg.ProvisionerToken, map[string]any{"instance_name": inst.Name + "-other"}, "Idempotency-Key", inst.Key)
	expectError(t, x, "reuse the creation key with another name", "idempotency_conflict", http.StatusConflict)
	expectError(t, p.getInstance(ctx, t, id, newUUID()), "retrieve an unknown instance", "", http.StatusNotFound)
}

func (p *providerRun) checkInstDelete(ctx context.Context, t *T) {
	id := PInstDelete
	inst := p.newInstance(ctx, t, id)
	pend, _, _ := p.pending(ctx, t, id, inst, "30m")
	done, _, _ := p.pending(ctx, t, id, inst, "30m")
	expectRequest(t, p.cancel(ctx, t, id, inst, done.ID), "cancel one request before deletion", http.StatusOK)
	type polledAt struct {
		x  *Exchange
		at time.Time
	}
	polled := make(chan polledAt, 1)
	go func() {
		x := p.get(ctx, t, id, inst, pend.ID, "5s")
		polled <- polledAt{x, time.Now()}
	}()
	time.Sleep(300 * time.Millisecond)
	deleting := time.Now()
	x := p.api.call(ctx, t, id, http.MethodDelete, "/v1/instances/"+url.PathEscape(inst.ID), p.cfg.ProvisionerToken, nil)
	if x.Err != nil || x.Status != http.StatusNoContent {
		t.Fatalf("delete the instance: expected 204, got %s", x.Describe())
	}
	expectError(t, p.getInstance(ctx, t, id, inst.ID), "retrieve the deleted instance", "", http.StatusNotFound)
	expectError(t, p.get(ctx, t, id, inst, pend.ID, ""), "read a request with the deleted instance's credential", "", http.StatusUnauthorized)
	expectError(t, p.create(ctx, t, id, inst, newKey(id), probeCall(id, "30m")), "create a request with the deleted instance's credential", "", http.StatusUnauthorized)
	select {
	case pa := <-polled:
		x := pa.x
		_ = pa.at
		if x.Err == nil && x.Status == http.StatusOK {
			// A poll that held its whole wait read the request after the
			// deletion: pending then means it was not cancelled. (One that
			// did not hold is the long-poll check's business.)
			if v, err := parseView(x.RespBody); err == nil && v.Status == "pending" && x.Elapsed >= 4500*time.Millisecond {
				t.Failf("a long poll over the instance's deletion returned its request still pending %s after the deletion (deletion cancels pending requests)", time.Since(deleting).Round(time.Millisecond))
			} else if err == nil {
				t.Notef("the long poll in progress returned the request %s", v.Status)
			}
		}
	case <-time.After(15 * time.Second):
		t.Failf("a long poll with wait=5s had not returned 15s after it started")
	}
}

func (p *providerRun) checkInstDeleteRetry(ctx context.Context, t *T) {
	id := PInstDeleteRetry
	inst := p.newInstance(ctx, t, id)
	path := "/v1/instances/" + url.PathEscape(inst.ID)
	for i, what := range []string{"delete the instance", "delete it again (a retry)"} {
		x := p.api.call(ctx, t, id, http.MethodDelete, path, p.cfg.ProvisionerToken, nil)
		if x.Err != nil || x.Status != http.StatusNoContent {
			t.Failf("%s: expected 204, got %s", what, x.Describe())
			if i == 0 {
				return
			}
		}
	}
	expectError(t, p.getInstance(ctx, t, id, inst.ID), "retrieve it after the retried delete", "", http.StatusNotFound)
	expectError(t, p.patchInstance(ctx, t, id, inst.ID, newKey(id), map[string]any{"instance_name": "restored"}), "update the deleted instance", "", http.StatusNotFound)
	x := p.api.call(ctx, t, id, http.MethodPost, "/v1/instances", p.cfg.ProvisionerToken, inst.body, "Idempotency-Key", inst.Key)
	expectError(t, x, "replay the deleted instance's creation", "instance_deleted", http.StatusConflict)
	if x.Status < 300 {
		if r, err := parseProvisioned(x); err == nil {
			p.run.Cleanup(func(ctx context.Context) {
				p.api.call(ctx, &T{run: p.run}, "cleanup", http.MethodDelete, "/v1/instances/"+url.PathEscape(r.ID), p.cfg.ProvisionerToken, nil)
			})
			t.Failf("the replay recreated an instance (%s)", r.ID)
		}
	}
	expectError(t, p.api.call(ctx, t, id, http.MethodDelete, "/v1/instances/"+newUUID(), p.cfg.ProvisionerToken, nil), "delete an unknown instance", "", http.StatusNotFound)
}

func (p *providerRun) checkInstUpdateRetry(ctx context.Context, t *T) {
	id := PInstUpdateRetry
	inst := p.newInstance(ctx, t, id)
	k1, k2 := newKey(id), newKey(id)
	first, later := map[string]any{"instance_name": inst.Name + "-first"}, map[string]any{"instance_name": inst.Name + "-later"}
	x1 := p.patchInstance(ctx, t, id, inst.ID, k1, first)
	if x1.Err != nil || x1.Status != http.StatusOK {
		t.Fatalf("first update: %s", x1.Describe())
	}
	if x := p.patchInstance(ctx, t, id, inst.ID, k2, later); x.Err != nil || x.Status != http.StatusOK {
		t.Fatalf("later update: %s", x.Describe())
	}
	r := p.patchInstance(ctx, t, id, inst.ID, k1, first)
	if r.Err != nil || r.Status != http.StatusOK {
		t.Failf("replay the first update: expected 200, got %s", r.Describe())
	}
	if got := instanceName(p.getInstance(ctx, t, id, inst.ID)); got != later["instance_name"] {
		t.Failf("after replaying the first update, the instance is named %q: the replay overwrote the later update %q", got, later["instance_name"])
	}
	expectError(t, p.patchInstance(ctx, t, id, inst.ID, k1, map[string]any{"instance_name": inst.Name + "-other"}), "reuse the first update's key for other input", "idempotency_conflict", http.StatusConflict)
	if got := instanceName(p.getInstance(ctx, t, id, inst.ID)); got != later["instance_name"] {
		t.Failf("after a conflicting reuse of a key, the instance is named %q, not %q", got, later["instance_name"])
	}
}

func (p *providerRun) checkApproved(ctx context.Context, t *T) {
	id := PDecisionApproved
	if p.cfg.Decider == nil {
		t.Skipf("needs a decision: pass --decide-command 'CMD {id} {decision}' or --interactive")
	}
	inst := p.newInstance(ctx, t, id)
	v, body, key := p.pending(ctx, t, id, inst, "30m")
	a := p.decide(ctx, t, id, inst, v.ID, true)
	if a.Status != "approved" {
		t.Fatalf("after approval the request is %s", a.Status)
	}
	if a.Decision == nil || a.Decision.ExpiresAt == nil {
		t.Fatalf("an approved decision carries no expires_at: %+v", a.Decision)
	}
	if !a.Decision.ExpiresAt.After(a.Decision.DecidedAt) {
		t.Failf("expires_at %s is not later than decided_at %s", a.Decision.ExpiresRaw, a.Decision.DecidedRaw)
	}
	same := func(what string, r *reqView) {
		if r.Status != "approved" || r.Decision == nil || r.Decision.DecidedRaw != a.Decision.DecidedRaw || r.Decision.ExpiresRaw != a.Decision.ExpiresRaw {
			var got string
			if r.Decision != nil {
				got = fmt.Sprintf("decided_at %s expires_at %s", r.Decision.DecidedRaw, r.Decision.ExpiresRaw)
			}
			t.Failf("%s: %s %s, first read approved decided_at %s expires_at %s (a fixed expires_at must be preserved across reads and retries)",
				what, r.Status, got, a.Decision.DecidedRaw, a.Decision.ExpiresRaw)
		}
	}
	same("a second read", expectRequest(t, p.get(ctx, t, id, inst, v.ID, ""), "read the approved request", http.StatusOK))
	same("a replay of the submission", expectRequest(t, p.create(ctx, t, id, inst, key, body), "replay the submission", http.StatusOK))
	sleep(ctx, t, 1100*time.Millisecond)
	same("a read a second later", expectRequest(t, p.get(ctx, t, id, inst, v.ID, "5s"), "read it again later", http.StatusOK))
	expectError(t, p.cancel(ctx, t, id, inst, v.ID), "cancel the approved request", "already_terminal", http.StatusConflict)
	same("a read after the refused cancellation", expectRequest(t, p.get(ctx, t, id, inst, v.ID, ""), "read it", http.StatusOK))
}

func (p *providerRun) checkDenied(ctx context.Context, t *T) {
	id := PDecisionDenied
	if p.cfg.Decider == nil {
		t.Skipf("needs a decision: pass --decide-command 'CMD {id} {decision}' or --interactive")
	}
	inst := p.newInstance(ctx, t, id)
	v, _, _ := p.pending(ctx, t, id, inst, "30m")
	d := p.decide(ctx, t, id, inst, v.ID, false)
	if d.Status != "denied" || d.Decision == nil || d.Decision.Status != "denied" {
		t.Fatalf("after denial the request is %s with decision %+v", d.Status, d.Decision)
	}
	if d.Decision.ExpiresRaw != "" {
		t.Failf("a denial carries expires_at %s", d.Decision.ExpiresRaw)
	}
	expectError(t, p.cancel(ctx, t, id, inst, v.ID), "cancel the denied request", "already_terminal", http.StatusConflict)
	out, err := p.cfg.Decider.Decide(ctx, v.ID, true)
	t.Notef("approve the denied request (the provider should refuse): %s (err %v)", out, err)
	g := expectRequest(t, p.get(ctx, t, id, inst, v.ID, ""), "read it after the attempts to change it", http.StatusOK)
	if g.Status != "denied" || g.Decision == nil || g.Decision.DecidedRaw != d.Decision.DecidedRaw {
		t.Failf("a denied request changed to %s: one terminal outcome per request", g.Status)
	}
}

func (p *providerRun) checkContract(ctx context.Context, t *T) {
	if p.cfg.Contract == nil {
		t.Skipf("no OpenAPI document: pass --openapi PATH (the AAP repository's openapi.yaml)")
	}
	var bad int
	var mu sync.Mutex
	xs := p.api.exchanges()
	for _, x := range xs {
		if x.Check == "cleanup" || x.Err != nil {
			continue
		}
		if err := p.cfg.Contract.ValidateExchange(x); err != nil {
			mu.Lock()
			bad++
			if bad <= 5 {
				t.add(x.evidence())
				t.Notef("%s %s -> %d (from check %s) violates %s: %s", x.Method, x.Path, x.Status, x.Check, p.cfg.Contract.Source, shortError(err))
			}
			mu.Unlock()
		}
	}
	if bad > 0 {
		t.Failf("%d of %d answers violate the contract (the first %d are shown)", bad, len(xs), min(bad, 5))
		return
	}
	t.Notef("%d answers validated against %s", len(xs), p.cfg.Contract.Source)
}

// shortError keeps the first lines of each of a validator's messages,
// without the schema dumps.
func shortError(err error) string {
	var out []string
	for _, line := range strings.Split(err.Error(), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "Schema:") || strings.HasPrefix(line, "Value:") || strings.HasPrefix(line, "{") ||
			strings.HasPrefix(line, "}") || strings.HasPrefix(line, "\"") || strings.HasPrefix(line, "[") || strings.HasPrefix(line, "]") {
			continue
		}
		out = append(out, line)
		if len(out) == 6 {
			break
		}
	}
	return strings.Join(out, " | ")
}
