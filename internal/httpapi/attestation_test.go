package httpapi_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentowl/agentowl/attest"
	"github.com/agentowl/agentowl/internal/server"
)

// Decision attestations end to end (docs/attestations.md): every kind of
// decision, on each store, has an attestation that verifies against the
// JWK Set the server publishes, for exactly the decided action.

const jwksPath = "/.well-known/agentowl/jwks.json"

// publishedKeys fetches the server's JWK Set.
func publishedKeys(t *testing.T, e *env) attest.StaticKeys {
	t.Helper()
	r := e.do(http.MethodGet, jwksPath, "", nil)
	wantStatus(t, r, http.StatusOK)
	keys, err := attest.ParseJWKS(r.Body)
	if err != nil {
		t.Fatalf("JWK Set: %v: %s", err, r.Body)
	}
	return keys
}

// attestationOf reads an attestation route, expecting 200, and returns the
// token and the issuer its jwks_url names.
func attestationOf(t *testing.T, e *env, path, token string) (jws, issuer string) {
	t.Helper()
	m := wantJSON(t, "GET "+path, e.do(http.MethodGet, path, token, nil), http.StatusOK)
	jws, _ = m["attestation"].(string)
	url, _ := m["jwks_url"].(string)
	if jws == "" || !strings.HasSuffix(url, jwksPath) {
		t.Fatalf("%s: %v", path, m)
	}
	return jws, strings.TrimSuffix(url, jwksPath)
}

func (e *env) nowFunc() func() time.Time { return func() time.Time { return e.clock.Now() } }

// TestAttestationsAAPDecisions: an operator's approval and denial, a
// policy's approval, and an inbox decision each have an attestation,
// served on the /v1 extension route (the instance's own requests only)
// and the operator API, that verifies for the request's tool and
// arguments and refuses other arguments; AAP's own answers carry no new
// member; a pending request has none.
func TestAttestationsAAPDecisions(t *testing.T) {
	parallelWork(t, func(t *testing.T, e *workEnv) {
		inst := newInstance(t, e.env)
		check := func(what string, req *wireRequest, decision string, by attest.DecidedBy) *attest.Document {
			t.Helper()
			keys := publishedKeys(t, e.env)
			jws, issuer := attestationOf(t, e.env, "/v1/requests/"+req.ID+"/attestation", inst.Credential)
			if issuer != e.work.Config().PublicURL {
				t.Errorf("%s: issuer %s, want the public URL %s", what, issuer, e.work.Config().PublicURL)
			}
			if op, _ := attestationOf(t, e.env, tenantPath+"/approvals/"+req.ID+"/attestation", e.operatorToken); op != jws {
				t.Errorf("%s: the operator API serves another attestation", what)
			}
			want := attest.Expectation{Issuer: issuer, Subject: attest.Subject{Kind: attest.SubjectAAPRequest, RequestID: req.ID},
				Tool: req.Tool, Arguments: req.Arguments, Decision: decision, Now: e.nowFunc()}
			doc, err := attest.Verify(jws, keys, want)
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			if doc.DecidedBy != by {
				t.Errorf("%s: decided_by %+v, want %+v", what, doc.DecidedBy, by)
			}
			other := want
			other.Arguments = json.RawMessage(`{"payment_id": "payment_123", "amount": 490000, "currency": "GBP"}`)
			if _, err := attest.Verify(jws, keys, other); !errors.Is(err, attest.ErrAction) {
				t.Errorf("%s: other arguments: %v, want ErrAction", what, err)
			}
			// The contract's answer is unchanged: no attestation member.
			wantAbsent(t, e.do(http.MethodGet, "/v1/requests/"+req.ID, inst.Credential, nil).Body, "attestation")
			return doc
		}

		pending := submit(t, e.env, inst.Credential, refundBody())
		wantError(t, e.do(http.MethodGet, "/v1/requests/"+pending.ID+"/attestation", inst.Credential, nil), http.StatusNotFound, "not_found", "")
		other := newInstance(t, e.env)

		approved := submit(t, e.env, inst.Credential, refundBody())
		wantStatus(t, decide(e.env, approved.ID, "approve"), http.StatusOK)
		doc := check("operator approval", approved, attest.Approved, attest.DecidedBy{Kind: attest.ByOperator, Name: "admin"})
		if got := getRequest(t, e.env, inst.Credential, approved.ID); got.Decision == nil || got.Decision.ExpiresAt == nil ||
			!mustTime(t, *got.Decision.ExpiresAt).Equal(doc.ExpiresAt) {
			t.Errorf("the attestation expires at %s, the approval at %v", doc.ExpiresAt, got.Decision)
		}
		// Another instance of the tenant does not see it.
		wantError(t, e.do(http.MethodGet, "/v1/requests/"+approved.ID+"/attestation", other.Credential, nil), http.StatusNotFound, "not_found", "")

		denied := submit(t, e.env, inst.Credential, refundBody())
		wantStatus(t, decide(e.env, denied.ID, "deny"), http.StatusOK)
		check("operator denial", denied, attest.Denied, attest.DecidedBy{Kind: attest.ByOperator, Name: "admin"})

		pol := wantJSON(t, "policy", e.do(http.MethodPost, tenantPath+"/policies", e.operatorToken, map[string]any{
			"tool": "issue_refund", "condition": "arguments.amount <= 1000", "effect": "approve"}), http.StatusCreated)
		small := refundBody()
		small["arguments"] = map[string]any{"amount": 10}
		byPolicy := submit(t, e.env, inst.Credential, small)
		if byPolicy.Status != "approved" {
			t.Fatalf("policy: %s", byPolicy.Status)
		}
		check("policy approval", byPolicy, attest.Approved, attest.DecidedBy{Kind: attest.ByPolicy, PolicyID: pol["id"].(string)})

		viaInbox := submit(t, e.env, inst.Credential, refundBody())
		item := wantJSON(t, "item", e.do(http.MethodGet, tenantPath+"/attention/att_aap_"+viaInbox.ID, e.operatorToken, nil), http.StatusOK)
		digest := jsonAt(item, "request", "action", "digest").(string)
		wantJSON(t, "inbox decision", e.decide("att_aap_"+viaInbox.ID, approve("dec-aap-1", 1, digest), false), http.StatusCreated)
		doc = check("inbox approval", viaInbox, attest.Approved, attest.DecidedBy{Kind: attest.ByOperator, Name: "admin"})
		if doc.Action.Digest != digest {
			t.Errorf("inbox approval: attested digest %s, the inbox showed %s", doc.Action.Digest, digest)
		}

		// Cancelled and expired requests have none.
		wantStatus(t, e.do(http.MethodDelete, "/v1/requests/"+pending.ID, inst.Credential, nil), http.StatusOK)
		wantError(t, e.do(http.MethodGet, tenantPath+"/approvals/"+pending.ID+"/attestation", e.operatorToken, nil), http.StatusNotFound, "not_found", "")
	})
}

// TestAttestationsWorkDecisions: approvals, rejections and answers of
// runtime requests carry their attestation in the decision document the
// runtime recovers (and is pushed), the same the operator API serves; it
// verifies for the request's action digest or the answer.
func TestAttestationsWorkDecisions(t *testing.T) {
	parallelWork(t, func(t *testing.T, e *workEnv) {
		h := e.handOff(t)
		exp := e.expiry(time.Hour)
		receipt(t, "needs_input", e.needsInput(h, 1, approvalRequest("a1", 1, digestA, exp), approvalRequest("a2", 1, digestB, exp),
			questionRequest("q1", 1, exp)))
		decisions := []struct {
			req, id string
			body    map[string]any
			want    attest.Expectation
		}{
			{"a1", "dec-a1", approve("dec-a1", 1, digestA), attest.Expectation{ActionDigest: digestA, Decision: attest.Approved}},
			{"a2", "dec-a2", map[string]any{"decision_id": "dec-a2", "request_revision": 1, "decision": "reject", "expected_action_digest": digestB},
				attest.Expectation{ActionDigest: digestB, Decision: attest.Denied}},
			{"q1", "dec-q1", map[string]any{"decision_id": "dec-q1", "request_revision": 1, "decision": "answer", "answer": "The café account 🦉"},
				attest.Expectation{Answer: "The café account 🦉", Decision: attest.Answered}},
		}
		for _, d := range decisions {
			it := e.itemFor(t, h.workID, d.req, 1)
			wantJSON(t, "decide "+d.req, e.decide(it["id"].(string), d.body, false), http.StatusCreated)
		}
		keys := publishedKeys(t, e.env)
		list := wantJSON(t, "recovery", e.do(http.MethodGet, "/runtime/v1/work/"+h.workID+"/decisions", h.token, nil), http.StatusOK)
		byID := map[string]string{}
		for _, item := range list["items"].([]any) {
			rec := item.(map[string]any)
			tok, _ := jsonAt(rec, "body", "attestation").(string)
			byID[rec["decision_id"].(string)] = tok
		}
		for _, d := range decisions {
			tok := byID[d.id]
			if tok == "" {
				t.Fatalf("%s: the recovered decision document carries no attestation: %v", d.id, list)
			}
			served, issuer := attestationOf(t, e.env, tenantPath+"/work/"+h.workID+"/decisions/"+d.id+"/attestation", e.operatorToken)
			if served != tok {
				t.Errorf("%s: the operator API serves another attestation", d.id)
			}
			want := d.want
			want.Issuer, want.Now = issuer, e.nowFunc()
			want.Subject = attest.Subject{Kind: attest.SubjectWorkRequest, WorkID: h.workID, RequestID: d.req, Revision: 1, DecisionID: d.id}
			doc, err := attest.Verify(tok, keys, want)
			if err != nil {
				t.Fatalf("%s: %v", d.id, err)
			}
			if !doc.ExpiresAt.Equal(mustTime(t, exp)) {
				t.Errorf("%s: expires_at %s, want the request's %s", d.id, doc.ExpiresAt, exp)
			}
			wrong := want
			wrong.Subject.Revision = 2
			if _, err := attest.Verify(tok, keys, wrong); !errors.Is(err, attest.ErrSubject) {
				t.Errorf("%s: another revision: %v, want ErrSubject", d.id, err)
			}
		}
		wantError(t, e.do(http.MethodGet, tenantPath+"/work/"+h.workID+"/decisions/nope/attestation", e.operatorToken, nil),
			http.StatusNotFound, "not_found", "")
	})
}

// TestAttestationKeyRotation: decisions made while the key rotates (a
// replica keeps its key up to a minute) and after it all verify against
// the published set; the retired key stays published until the last
// attestation it signed has expired plus the retention, then leaves it.
// Time is the test clock's.
func TestAttestationKeyRotation(t *testing.T) {
	parallelWork(t, func(t *testing.T, e *workEnv) {
		inst := newInstance(t, e.env)
		decideMany := func(n int) []*wireRequest {
			reqs := make([]*wireRequest, n)
			for i := range reqs {
				reqs[i] = submit(t, e.env, inst.Credential, refundBody())
			}
			var wg sync.WaitGroup
			for _, r := range reqs {
				wg.Go(func() {
					if got := decide(e.env, r.ID, "approve"); got.Status != http.StatusOK {
						t.Errorf("decide %s: %d %s", r.ID, got.Status, got.Body)
					}
				})
			}
			wg.Wait()
			return reqs
		}
		verifyAll := func(what string, reqs []*wireRequest) map[string]int {
			t.Helper()
			keys := publishedKeys(t, e.env)
			kids := map[string]int{}
			for _, r := range reqs {
				jws, issuer := attestationOf(t, e.env, "/v1/requests/"+r.ID+"/attestation", inst.Credential)
				if _, err := attest.Verify(jws, keys, attest.Expectation{Issuer: issuer,
					Subject: attest.Subject{Kind: attest.SubjectAAPRequest, RequestID: r.ID}, Tool: r.Tool, Arguments: r.Arguments,
					Now: e.nowFunc()}); err != nil {
					t.Errorf("%s: %s: %v", what, r.ID, err)
				}
				tok, _ := attest.Parse(jws)
				kids[tok.KeyID]++
			}
			return kids
		}
		before := decideMany(4)
		firstKids := verifyAll("before rotation", before)
		if len(firstKids) != 1 {
			t.Fatalf("before rotation: keys %v", firstKids)
		}
		var oldKid string
		for k := range firstKids {
			oldKid = k
		}

		// Rotate, as `agentowl attestation-keys rotate` does, while
		// decisions are being made.
		pending := make([]*wireRequest, 6)
		for i := range pending {
			pending[i] = submit(t, e.env, inst.Credential, refundBody())
		}
		var wg sync.WaitGroup
		var newKey *server.AttestationKey
		wg.Go(func() {
			k, err := server.RotateAttestationKey(t.Context(), e.store, e.clock)
			if err != nil {
				t.Errorf("rotate: %v", err)
			}
			newKey = k
		})
		for _, r := range pending {
			wg.Go(func() {
				if got := decide(e.env, r.ID, "approve"); got.Status != http.StatusOK {
					t.Errorf("decide %s: %d %s", r.ID, got.Status, got.Body)
				}
			})
		}
		wg.Wait()
		if newKey == nil || newKey.ID == oldKid {
			t.Fatalf("rotation: %+v", newKey)
		}
		verifyAll("during rotation", append(before, pending...))

		// The server picks the new key up within its cache time.
		e.clock.Advance(61 * time.Second)
		after := decideMany(3)
		if kids := verifyAll("after rotation", after); kids[newKey.ID] != 3 {
			t.Errorf("after rotation signed by %v, want %s", kids, newKey.ID)
		}
		verifyAll("old ones after rotation", append(before, pending...))

		// The retired key: published until its last attestation expired
		// (approvals last 5 minutes by default) plus the retention: 30 days,
		// raised to the audit log's 365 (its checkpoints must verify).
		ks, err := server.AttestationKeys(t.Context(), e.store, e.clock, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		var old *server.AttestationKey
		for i := range ks {
			if ks[i].ID == oldKid {
				old = &ks[i]
			}
		}
		if old == nil || old.RetiredAt == nil || !old.Published || old.LastExpiresAt.IsZero() {
			t.Fatalf("the retired key: %+v", old)
		}
		if want := old.LastExpiresAt.Add(365 * 24 * time.Hour); !old.PublishedUntil.Equal(want) {
			t.Errorf("published until %s, want %s", old.PublishedUntil, want)
		}
		jws, _ := attestationOf(t, e.env, "/v1/requests/"+before[0].ID+"/attestation", inst.Credential)
		tok, _ := attest.Parse(jws)
		e.clock.Advance(old.PublishedUntil.Sub(e.clock.Now()) - time.Second)
		if err := tok.VerifySignature(t.Context(), publishedKeys(t, e.env)); err != nil {
			t.Errorf("a second before the retention ends: %v", err)
		}
		e.clock.Advance(time.Second)
		keys := publishedKeys(t, e.env)
		if err := tok.VerifySignature(t.Context(), keys); !errors.Is(err, attest.ErrUnknownKey) {
			t.Errorf("after the retention: %v, want ErrUnknownKey (the key unpublished)", err)
		}
		if _, ok := keys[newKey.ID]; !ok || len(keys) != 1 {
			t.Errorf("after the retention the set holds %v, want only %s", keys, newKey.ID)
		}
	})
}
