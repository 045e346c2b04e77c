package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/work"
)

var (
	digestA = strings.Repeat("a", 64)
	digestB = strings.Repeat("b", 64)
)

func (e *workEnv) expiry(d time.Duration) string {
	return e.clock.Now().Add(d).UTC().Format(time.RFC3339)
}

func approvalRequest(id string, rev int, digest, expires string) map[string]any {
	return map[string]any{"id": id, "revision": rev, "kind": "approval", "prompt": "May I send the refund?",
		"allowed_decisions": []any{"approve", "reject"}, "expires_at": expires,
		"action": map[string]any{"description": "Refund $20 to order 1234", "digest": digest}}
}

func questionRequest(id string, rev int, expires string) map[string]any {
	return map[string]any{"id": id, "revision": rev, "kind": "question", "prompt": "Which account?",
		"allowed_decisions": []any{"answer"}, "expires_at": expires}
}

func (e *workEnv) needsInput(h *handedOff, seq int, reqs ...map[string]any) *response {
	e.t.Helper()
	cb := callback(h.workID, fmt.Sprintf("%s:%d", h.workID, seq), seq, "needs_input")
	list := make([]any, len(reqs))
	for i, r := range reqs {
		list[i] = r
	}
	cb["requests"] = list
	return e.post(h, h.token, cb)
}

func (e *workEnv) attention(t *testing.T, query string) []map[string]any {
	t.Helper()
	return itemsOf(t, wantJSON(t, "list attention", e.do(http.MethodGet, tenantPath+"/attention"+query, e.operatorToken, nil), http.StatusOK))
}

// itemFor finds the item of request id at revision rev.
func (e *workEnv) itemFor(t *testing.T, workID, id string, rev int) map[string]any {
	t.Helper()
	for _, it := range e.attention(t, "?work="+workID) {
		if jsonAt(it, "request", "id") == id && jsonAt(it, "request", "revision") == float64(rev) {
			return it
		}
	}
	t.Fatalf("no attention item for %s revision %d", id, rev)
	return nil
}

func (e *workEnv) decide(attID string, body map[string]any, preview bool) *response {
	e.t.Helper()
	q := ""
	if preview {
		q = "?preview=true"
	}
	return e.do(http.MethodPost, tenantPath+"/attention/"+attID+"/decision"+q, e.operatorToken, body)
}

func approve(id string, rev int, digest string) map[string]any {
	return map[string]any{"decision_id": id, "request_revision": rev, "decision": "approve", "expected_action_digest": digest}
}

func TestAttentionRequestsAndRefusals(t *testing.T) {
	parallelWork(t, func(t *testing.T, e *workEnv) {
		h := e.handOff(t)
		w := h.workID
		exp := e.expiry(time.Hour)
		receipt(t, "needs_input", e.needsInput(h, 1, approvalRequest("a1", 1, digestA, exp), questionRequest("q1", 1, exp)))
		if open := e.attention(t, "?status=open"); len(open) != 2 {
			t.Fatalf("open items = %v", open)
		}
		// Invalid requests refuse the whole callback.
		bad := []struct {
			name   string
			req    map[string]any
			status int
			code   string
		}{
			{"edit", func() map[string]any {
				r := approvalRequest("x", 1, digestA, exp)
				r["allowed_decisions"] = []any{"approve", "edit"}
				return r
			}(), http.StatusBadRequest, "edit_unsupported"},
			{"short digest", approvalRequest("x", 1, "abc", exp), http.StatusBadRequest, "invalid_field"},
			{"upper-case digest", approvalRequest("x", 1, strings.Repeat("A", 64), exp), http.StatusBadRequest, "invalid_field"},
			{"non-UTC expiry", questionRequest("x", 1, "2030-01-01T00:00:00+02:00"), http.StatusBadRequest, "invalid_field"},
			{"zero revision", questionRequest("x", 0, exp), http.StatusBadRequest, "invalid_field"},
			{"answer on approval", func() map[string]any {
				r := approvalRequest("x", 1, digestA, exp)
				r["allowed_decisions"] = []any{"answer"}
				return r
			}(), http.StatusBadRequest, "invalid_field"},
			{"approval without action", func() map[string]any {
				r := approvalRequest("x", 1, digestA, exp)
				delete(r, "action")
				return r
			}(), http.StatusBadRequest, "missing_field"},
			{"same id and revision, other content", func() map[string]any {
				r := approvalRequest("a1", 1, digestB, exp)
				return r
			}(), http.StatusConflict, "request_conflict"},
		}
		for i, c := range bad {
			expectRefused(t, c.name, e.needsInput(h, 10+i, questionRequest("fresh", 1, exp), c.req), c.status, c.code)
		}
		if all := e.attention(t, ""); len(all) != 2 {
			t.Fatalf("a refused callback recorded items: %v", all)
		}

		a1 := e.itemFor(t, w, "a1", 1)["id"].(string)
		expectRefused(t, "edit decision", e.decide(a1, map[string]any{"decision_id": "d0", "request_revision": 1, "decision": "edit"}, false),
			http.StatusBadRequest, "edit_unsupported")
		expectRefused(t, "answer an approval", e.decide(a1, map[string]any{"decision_id": "d0", "request_revision": 1, "decision": "answer",
			"answer": "x"}, false), http.StatusBadRequest, "decision_not_allowed")
		expectRefused(t, "stale revision", e.decide(a1, approve("d0", 2, digestA), false), http.StatusConflict, "stale_revision")
		expectRefused(t, "digest mismatch", e.decide(a1, approve("d0", 1, digestB), false), http.StatusConflict, "digest_mismatch")
		pv := wantJSON(t, "preview", e.decide(a1, approve("d1", 1, digestA), true), http.StatusOK)
		if pv["preview"] != true || jsonAt(pv, "body", "decision_id") != "d1" || jsonAt(pv, "attention", "decision") != nil {
			t.Fatalf("preview = %v", pv)
		}
		won := wantJSON(t, "approve", e.decide(a1, approve("d1", 1, digestA), false), http.StatusCreated)
		if jsonAt(won, "attention", "decision", "decision_id") != "d1" || jsonAt(won, "attention", "decision", "receipt", "status") != "pending" {
			t.Fatalf("decided = %v", won)
		}
		rp := wantJSON(t, "replay", e.decide(a1, approve("d1", 1, digestA), false), http.StatusOK)
		if rp["replay"] != true {
			t.Fatalf("replay = %v", rp)
		}
		expectRefused(t, "decision id reused", e.decide(a1, map[string]any{"decision_id": "d1", "request_revision": 1, "decision": "reject",
			"expected_action_digest": digestA}, false), http.StatusConflict, "decision_conflict")
		expectRefused(t, "second decision", e.decide(a1, approve("d2", 1, digestA), false), http.StatusConflict, "already_decided")

		q1 := e.itemFor(t, w, "q1", 1)["id"].(string)
		expectRefused(t, "answer without answer", e.decide(q1, map[string]any{"decision_id": "d3", "request_revision": 1, "decision": "answer"}, false),
			http.StatusBadRequest, "missing_field")
		wantJSON(t, "answer", e.decide(q1, map[string]any{"decision_id": "d3", "request_revision": 1, "decision": "answer",
			"answer": "Savings"}, false), http.StatusCreated)
		expectRefused(t, "resolve a request by hand", e.do(http.MethodPost, tenantPath+"/attention/"+q1+"/resolve", e.operatorToken, nil),
			http.StatusConflict, "not_a_request")

		// Expiry, supersession and acknowledgement.
		receipt(t, "more requests", e.needsInput(h, 30, questionRequest("q2", 1, e.expiry(time.Minute)),
			approvalRequest("a2", 1, digestA, exp)))
		a2r1 := e.itemFor(t, w, "a2", 1)["id"].(string)
		ack := wantJSON(t, "ack", e.do(http.MethodPost, tenantPath+"/attention/"+a2r1+"/ack", e.operatorToken,
			map[string]any{"assignee": "alice"}), http.StatusOK)
		if ack["status"] != "acknowledged" || ack["assignee"] != "alice" || ack["decision"] != nil {
			t.Fatalf("ack = %v", ack)
		}
		receipt(t, "revision 2", e.needsInput(h, 31, approvalRequest("a2", 2, digestB, exp)))
		expectRefused(t, "approve revision 1 after revision 2", e.decide(a2r1, approve("d4", 1, digestA), false),
			http.StatusConflict, "stale_revision")
		if it := e.itemFor(t, w, "a2", 1); it["status"] != "resolved" || it["resolution"] != "superseded" {
			t.Fatalf("superseded item = %v", it)
		}
		a2r2 := e.itemFor(t, w, "a2", 2)["id"].(string)
		expectRefused(t, "revision 1 file on revision 2", e.decide(a2r2, approve("d4", 1, digestA), false),
			http.StatusConflict, "stale_revision")
		expectRefused(t, "revision 1 digest on revision 2", e.decide(a2r2, approve("d4", 2, digestA), false),
			http.StatusConflict, "digest_mismatch")
		wantJSON(t, "approve revision 2", e.decide(a2r2, approve("d4", 2, digestB), false), http.StatusCreated)

		e.clock.Advance(2 * time.Minute)
		q2 := e.itemFor(t, w, "q2", 1)
		if jsonAt(q2, "request", "expired") != true {
			t.Fatalf("expired item = %v", q2)
		}
		expectRefused(t, "expired request", e.decide(q2["id"].(string), map[string]any{"decision_id": "d5", "request_revision": 1,
			"decision": "answer", "answer": "late"}, false), http.StatusConflict, "request_expired")
		// The server's own sweep may have expired it already.
		if n, err := e.work.ExpireRequests(t.Context()); err != nil || n > 1 {
			t.Fatalf("expire sweep: %d, %v", n, err)
		}
		if it := e.itemFor(t, w, "q2", 1); it["resolution"] != "expired" {
			t.Fatalf("swept item = %v", it)
		}

		// A later callback resolves decided items; failed work opens an incident.
		fail := callback(w, w+":40", 40, "failed")
		fail["error"] = map[string]any{"message": "the tool crashed"}
		receipt(t, "failed", e.post(h, h.token, fail))
		if it := e.itemFor(t, w, "a1", 1); it["status"] != "resolved" || it["resolution"] != "outcome" {
			t.Fatalf("decided item after outcome = %v", it)
		}
		var incident map[string]any
		for _, it := range e.attention(t, "?status=open") {
			if it["kind"] == "incident" {
				incident = it
			}
		}
		if incident == nil || !strings.Contains(incident["summary"].(string), "the tool crashed") {
			t.Fatalf("open items after failure: %v", e.attention(t, "?status=open"))
		}
		expectRefused(t, "decide an incident", e.decide(incident["id"].(string), approve("d6", 1, digestA), false),
			http.StatusConflict, "not_a_request")
		res := wantJSON(t, "resolve incident", e.do(http.MethodPost, tenantPath+"/attention/"+incident["id"].(string)+"/resolve",
			e.operatorToken, nil), http.StatusOK)
		if res["status"] != "resolved" || res["resolution"] != "reviewed" {
			t.Fatalf("resolved incident = %v", res)
		}
		expectRefused(t, "bad status filter", e.do(http.MethodGet, tenantPath+"/attention?status=done", e.operatorToken, nil),
			http.StatusBadRequest, "invalid_field")
		expectRefused(t, "unknown item", e.do(http.MethodGet, tenantPath+"/attention/att_nope", e.operatorToken, nil),
			http.StatusNotFound, "not_found")
	})
}

func TestOneDecisionWins(t *testing.T) {
	parallelWork(t, func(t *testing.T, e *workEnv) {
		h := e.handOff(t)
		receipt(t, "needs_input", e.needsInput(h, 1, approvalRequest("a1", 1, digestA, e.expiry(time.Hour))))
		id := e.itemFor(t, h.workID, "a1", 1)["id"].(string)
		const n = 16
		statuses := make([]int, n)
		codes := make([]string, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				r := e.decide(id, approve(fmt.Sprintf("race-%d", i), 1, digestA), false)
				statuses[i] = r.Status
				if r.Status != http.StatusCreated {
					codes[i] = r.ErrorCode(t)
				}
			})
		}
		wg.Wait()
		winners := 0
		for i, s := range statuses {
			switch {
			case s == http.StatusCreated:
				winners++
			case s != http.StatusConflict || codes[i] != "already_decided":
				t.Errorf("submission %d: %d %s", i, s, codes[i])
			}
		}
		if winners != 1 {
			t.Fatalf("%d winners, want exactly 1 (%v)", winners, statuses)
		}
	})
}

// decisionRuntime is a decision receiver answering with scripted bodies.
type decisionRuntime struct {
	srv    *httptest.Server
	mu     sync.Mutex
	bearer string
	bodies []string
	got    []map[string]any
	auth   []string
}

func newDecisionRuntime(t *testing.T, bearer string, bodies ...string) *decisionRuntime {
	d := &decisionRuntime{bearer: bearer, bodies: bodies}
	d.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var doc map[string]any
		_ = json.Unmarshal(body, &doc)
		d.mu.Lock()
		defer d.mu.Unlock()
		d.got, d.auth = append(d.got, doc), append(d.auth, r.Header.Get("Authorization"))
		answer := fmt.Sprintf(`{"accepted": true, "decision_id": %q}`, doc["decision_id"])
		if len(d.bodies) > 0 {
			answer, d.bodies = d.bodies[0], d.bodies[1:]
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, answer)
	}))
	t.Cleanup(d.srv.Close)
	return d
}

func (d *decisionRuntime) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.got)
}

// handOffWithDecisions is handOff for an endpoint with a decision URL and a
// credential that may recover decisions.
func (e *workEnv) handOffWithDecisions(t *testing.T, decisionURL string) *handedOff {
	t.Helper()
	rt := newRuntime(t, e)
	id := e.endpoint(t, rt, true)["id"].(string)
	if decisionURL != "" {
		wantJSON(t, "set decision URL", e.do(http.MethodPatch, tenantPath+"/endpoints/"+id, e.operatorToken,
			map[string]any{"decision_url": decisionURL, "decision_secret": "bearer-secret-0123456789"}), http.StatusOK)
	}
	cred := e.credential(t, id, map[string]any{"scopes": []any{"callbacks:write", "decisions:read"}})
	_, in := e.binding(t, id, nil)
	e.send(t, in, map[string]any{"text": "please refund"})
	items := e.listWork(t, "?endpoint="+id)
	return &handedOff{endpointID: id, workID: items[0]["id"].(string), token: cred["token"].(string),
		credentialID: cred["id"].(string), ingress: in}
}

func TestDecisionPushReceipt(t *testing.T) {
	parallelWork(t, func(t *testing.T, e *workEnv) {
		dr := newDecisionRuntime(t, "bearer-secret-0123456789",
			`{"accepted": true, "decision_id": "someone-else"}`, `{"accepted": false, "decision_id": "d1"}`, `OK`)
		h := e.handOffWithDecisions(t, dr.srv.URL+"/decisions")
		receipt(t, "needs_input", e.needsInput(h, 1, approvalRequest("a1", 1, digestA, e.expiry(time.Hour))))
		id := e.itemFor(t, h.workID, "a1", 1)["id"].(string)
		wantJSON(t, "approve", e.decide(id, approve("d1", 1, digestA), false), http.StatusCreated)
		eventually(t, syncLimit, "the matching answer", func() bool {
			e.advanceBetweenAttempts(t, h.workID, 5*time.Second)
			return dr.count() >= 4
		})
		var it map[string]any
		// The receipt is recorded while the attempt is judged; the push is
		// marked delivered just after. On PostgreSQL a read's statements
		// see each commit as it lands (read committed, no snapshot across
		// them), so the view may read the item before the receipt's commit
		// and the decision after it: wait for the item too.
		eventually(t, syncLimit, "the receipt", func() bool {
			it = wantJSON(t, "inspect", e.do(http.MethodGet, tenantPath+"/attention/"+id, e.operatorToken, nil), http.StatusOK)
			return jsonAt(it, "decision", "receipt", "status") == "received" && jsonAt(it, "push", "state") == "delivered" &&
				it["status"] == "resolved"
		})
		// Four pushes reached the runtime. An attempt that failed in
		// transport (a reused keep-alive connection the server had just
		// closed, on a loaded machine) counts as an attempt too, so the
		// push may show more attempts than the runtime saw.
		attempts, _ := jsonAt(it, "push", "attempts").(float64)
		if dr.count() != 4 || jsonAt(it, "decision", "receipt", "via") != "push" || it["status"] != "resolved" ||
			it["resolution"] != "receipt" || jsonAt(it, "push", "state") != "delivered" || attempts < 4 ||
			jsonAt(it, "push", "last_status") != float64(200) ||
			it["work_status"] != "needs_input" {
			t.Fatalf("after push: %d pushes, item %v", dr.count(), it)
		}
		dr.mu.Lock()
		for i, a := range dr.auth {
			if a != "Bearer bearer-secret-0123456789" {
				t.Errorf("push %d Authorization %q", i, a)
			}
		}
		doc := dr.got[0]
		dr.mu.Unlock()
		if doc["version"] != "agent-work.v1" || doc["type"] != "decision" || doc["work_id"] != h.workID || doc["request_id"] != "a1" ||
			doc["request_revision"] != float64(1) || doc["decision"] != "approve" || doc["expected_action_digest"] != digestA ||
			doc["decided_at"] == nil || doc["request_expires_at"] == nil {
			t.Fatalf("pushed body = %v", doc)
		}
	})
}

func TestDecisionRecovery(t *testing.T) {
	parallelWork(t, func(t *testing.T, e *workEnv) {
		h := e.handOffWithDecisions(t, "")
		path := "/runtime/v1/work/" + h.workID + "/decisions"
		receipt(t, "needs_input", e.needsInput(h, 1, questionRequest("q1", 1, e.expiry(time.Hour))))
		id := e.itemFor(t, h.workID, "q1", 1)["id"].(string)
		wantJSON(t, "answer", e.decide(id, map[string]any{"decision_id": "d1", "request_revision": 1, "decision": "answer",
			"answer": "Savings"}, false), http.StatusCreated)
		l := wantJSON(t, "list", e.do(http.MethodGet, path, h.token, nil), http.StatusOK)
		items := l["items"].([]any)
		if len(items) != 1 || jsonAt(items[0].(map[string]any), "receipt", "status") != "pending" ||
			jsonAt(items[0].(map[string]any), "body", "answer") != "Savings" {
			t.Fatalf("decisions = %v", l)
		}
		r1 := wantJSON(t, "receipt", e.do(http.MethodPost, path+"/d1/receipt", h.token, nil), http.StatusOK)
		e.clock.Advance(time.Minute)
		r2 := wantJSON(t, "receipt again", e.do(http.MethodPost, path+"/d1/receipt", h.token, nil), http.StatusOK)
		if jsonAt(r1, "decision", "receipt", "status") != "received" || jsonAt(r1, "decision", "receipt", "via") != "recovery" ||
			jsonAt(r1, "decision", "receipt", "received_at") != jsonAt(r2, "decision", "receipt", "received_at") || r1["work_status"] != "needs_input" {
			t.Fatalf("receipts %v / %v", r1, r2)
		}
		if it := e.itemFor(t, h.workID, "q1", 1); it["resolution"] != "receipt" {
			t.Fatalf("item after receipt = %v", it)
		}
		// work inspect keeps the decision receipt apart from delivery and runtime status.
		wi := wantJSON(t, "work inspect", e.do(http.MethodGet, tenantPath+"/work/"+h.workID, e.operatorToken, nil), http.StatusOK)
		ds, _ := jsonAt(wi, "decision", "decisions").([]any)
		if len(ds) != 1 || jsonAt(ds[0].(map[string]any), "decision_id") != "d1" || jsonAt(ds[0].(map[string]any), "receipt_via") != "recovery" ||
			jsonAt(ds[0].(map[string]any), "receipt_at") == nil || jsonAt(wi, "runtime", "status") != "needs_input" {
			t.Fatalf("work inspect decision = %v", wi["decision"])
		}
		expectRefused(t, "unknown decision", e.do(http.MethodPost, path+"/nope/receipt", h.token, nil), http.StatusNotFound, "not_found")
		// A credential without decisions:read.
		plain := e.credential(t, h.endpointID, map[string]any{"scopes": []string{"callbacks:write"}})["token"].(string)
		expectRefused(t, "no scope", e.do(http.MethodGet, path, plain, nil), http.StatusForbidden, "insufficient_scope")
		// Receipt on completed work changes nothing.
		receipt(t, "needs_input 2", e.needsInput(h, 2, questionRequest("q2", 1, e.expiry(time.Hour))))
		id2 := e.itemFor(t, h.workID, "q2", 1)["id"].(string)
		wantJSON(t, "answer 2", e.decide(id2, map[string]any{"decision_id": "d2", "request_revision": 1, "decision": "answer",
			"answer": "Checking"}, false), http.StatusCreated)
		receipt(t, "completed", e.post(h, h.token, callback(h.workID, "c3", 3, "completed")))
		r3 := wantJSON(t, "receipt on completed work", e.do(http.MethodPost, path+"/d2/receipt", h.token, nil), http.StatusOK)
		if r3["work_status"] != "completed" || jsonAt(r3, "decision", "receipt", "status") != "pending" {
			t.Fatalf("receipt on completed work = %v", r3)
		}
		if st := jsonAt(e.getWork(t, h.workID), "runtime", "status"); st != "completed" {
			t.Fatalf("work reopened: %v", st)
		}
	})
}

// TestListPages pages through Needs attention (runtime requests and AAP
// requests merged, many at one time) and through work: the pages, joined,
// are the whole list in its order, and a bad page token is refused.
func TestListPages(t *testing.T) {
	parallelWork(t, func(t *testing.T, e *workEnv) {
		inst := newInstance(t, e.env)
		h := e.handOff(t)
		exp := e.expiry(time.Hour)
		for i := range 3 {
			submit(t, e.env, inst.Credential, refundBody())
			receipt(t, "needs_input", e.needsInput(h, i+1, questionRequest(fmt.Sprint("q", i), 1, exp)))
			if i == 1 {
				e.clock.Advance(time.Second)
			}
		}
		for range 2 {
			e.handOff(t)
		}
		for _, list := range []string{"/attention?status=unresolved&", "/work?"} {
			full := wantJSON(t, "full", e.do(http.MethodGet, tenantPath+list+"limit=1000", e.operatorToken, nil), http.StatusOK)
			want := full["items"].([]any)
			if full["next"] != nil || len(want) < 3 {
				t.Fatalf("%s: full list %v", list, full)
			}
			var got []any
			next := ""
			for pages := 0; ; pages++ {
				q := list + "limit=2"
				if next != "" {
					q += "&after=" + next
				}
				page := wantJSON(t, "page", e.do(http.MethodGet, tenantPath+q, e.operatorToken, nil), http.StatusOK)
				got = append(got, page["items"].([]any)...)
				n, _ := page["next"].(string)
				if n == "" || pages > 20 {
					break
				}
				next = n
			}
			if fmt.Sprint(pageIDs(got)) != fmt.Sprint(pageIDs(want)) {
				t.Fatalf("%s: pages give %v, want %v", list, pageIDs(got), pageIDs(want))
			}
			expectRefused(t, "bad page token", e.do(http.MethodGet, tenantPath+list+"after=x", e.operatorToken, nil),
				http.StatusBadRequest, "invalid_field")
		}
	})
}

func pageIDs(items []any) []any {
	var out []any
	for _, it := range items {
		out = append(out, it.(map[string]any)["id"])
	}
	return out
}

// failedMessage waits, advancing the clock, until the outbox message of
// kind about workID has failed, and returns it.
func (e *workEnv) failedMessage(t *testing.T, workID, kind string) *agentowl.OutboxMessage {
	t.Helper()
	var failed *agentowl.OutboxMessage
	eventually(t, syncLimit, kind+" failed", func() bool {
		e.advanceBetweenAttempts(t, workID, 10*time.Second)
		for _, m := range e.messages(t, workID) {
			if m.Kind == kind && m.State == agentowl.MessageFailed {
				failed = m
			}
		}
		return failed != nil
	})
	return failed
}

// messages returns the outbox messages about workID.
func (e *workEnv) messages(t *testing.T, workID string) []*agentowl.OutboxMessage {
	t.Helper()
	var ms []*agentowl.OutboxMessage
	err := e.store.Read(context.Background(), func(tx agentowl.Tx) error {
		tenant, err := tx.TenantGetByName(context.Background(), "default")
		if err != nil {
			return err
		}
		ms, err = tx.MessageList(context.Background(), agentowl.MessageListParams{TenantID: tenant.ID, Subject: workID})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

// advanceBetweenAttempts moves the clock by d and wakes the engine, but only
// while no message about workID is leased: an attempt in flight keeps its
// lease by the clock too, and one that would outlive it is put back rather
// than sent, so a clock racing ahead of the engine would starve it.
func (e *workEnv) advanceBetweenAttempts(t *testing.T, workID string, d time.Duration) {
	t.Helper()
	for _, m := range e.messages(t, workID) {
		if m.State == agentowl.MessagePending && m.LeaseOwner != "" {
			return
		}
	}
	e.clock.Advance(d)
	e.engine.Wake()
}

// incidents returns the work's incident items.
func (e *workEnv) incidents(t *testing.T, workID string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, it := range e.attention(t, "?work="+workID) {
		if it["kind"] == "incident" {
			out = append(out, it)
		}
	}
	return out
}

// A handoff or a decision push that exhausts its retries opens exactly one
// incident (the maintenance sweep), which an operator resolves after review.
func TestDeliveryIncidents(t *testing.T) {
	t.Parallel()
	forEachWorkBackend(t, work.Config{HandoffWindow: time.Minute}, func(t *testing.T, e *workEnv) {
		ctx := context.Background()
		// A handoff whose receiver always fails.
		rt := newRuntime(t, e)
		rt.answer(500, 500, 500, 500, 500, 500, 500, 500, 500, 500, 500, 500, 500, 500, 500, 500, 500, 500, 500, 500,
			500, 500, 500, 500, 500, 500, 500, 500, 500, 500, 500, 500, 500, 500, 500, 500, 500, 500, 500, 500)
		id := e.endpoint(t, rt, true)["id"].(string)
		e.credential(t, id, nil)
		_, in := e.binding(t, id, nil)
		e.send(t, in, map[string]any{"text": "please summarise"})
		workID := e.listWork(t, "?endpoint="+id)[0]["id"].(string)
		if n, err := e.work.RecordDeliveryIncidents(ctx); err != nil || n != 0 {
			t.Fatalf("sweep while pending: %d, %v", n, err)
		}
		m := e.failedMessage(t, workID, work.MessageKindHandoff)
		// The server's own sweep may have opened it already; the
		// incidents are counted below.
		if n, err := e.work.RecordDeliveryIncidents(ctx); err != nil || n > 1 {
			t.Fatalf("sweep after the handoff failed: %d, %v", n, err)
		}
		for range 2 { // sweeping again opens no second incident
			if n, err := e.work.RecordDeliveryIncidents(ctx); err != nil || n != 0 {
				t.Fatalf("second sweep: %d, %v", n, err)
			}
		}
		inc := e.incidents(t, workID)
		if len(inc) != 1 {
			t.Fatalf("incidents: %v", inc)
		}
		it := inc[0]
		summary, _ := it["summary"].(string)
		if it["status"] != "open" || it["message_id"] != m.ID || it["endpoint_id"] != id || it["work_id"] != workID ||
			!strings.Contains(summary, "Handoff delivery "+m.ID) || !strings.Contains(summary, "exhausted its retries") ||
			!strings.Contains(summary, "HTTP 500") {
			t.Fatalf("incident %v for message %+v", it, m)
		}
		r := wantJSON(t, "resolve", e.do(http.MethodPost, tenantPath+"/attention/"+it["id"].(string)+"/resolve", e.operatorToken, nil),
			http.StatusOK)
		if jsonAt(r, "status") != "resolved" && jsonAt(r, "attention", "status") != "resolved" {
			t.Fatalf("resolve: %v", r)
		}
		it = wantJSON(t, "inspect", e.do(http.MethodGet, tenantPath+"/attention/"+it["id"].(string), e.operatorToken, nil), http.StatusOK)
		if it["status"] != "resolved" || it["resolution"] != "reviewed" {
			t.Fatalf("after resolve: %v", it)
		}
		if n, err := e.work.RecordDeliveryIncidents(ctx); err != nil || n != 0 || len(e.incidents(t, workID)) != 1 {
			t.Fatalf("sweep after resolve: %d, %v", n, err)
		}

		// A decision push the runtime never accepts fails at the request's expiry.
		dr := newDecisionRuntime(t, "bearer-secret-0123456789", strings.Split(strings.Repeat("OK,", 60), ",")...)
		h := e.handOffWithDecisions(t, dr.srv.URL+"/decisions")
		receipt(t, "needs_input", e.needsInput(h, 1, approvalRequest("a1", 1, digestA, e.expiry(time.Minute))))
		att := e.itemFor(t, h.workID, "a1", 1)["id"].(string)
		wantJSON(t, "approve", e.decide(att, approve("d1", 1, digestA), false), http.StatusCreated)
		pm := e.failedMessage(t, h.workID, work.MessageKindDecision)
		// The server's own sweep may have opened it already; the
		// incidents are counted below.
		if n, err := e.work.RecordDeliveryIncidents(ctx); err != nil || n > 1 {
			t.Fatalf("sweep after the push failed: %d, %v", n, err)
		}
		if n, err := e.work.RecordDeliveryIncidents(ctx); err != nil || n != 0 {
			t.Fatalf("second sweep after the push failed: %d, %v", n, err)
		}
		inc = e.incidents(t, h.workID)
		if len(inc) != 1 || inc[0]["message_id"] != pm.ID ||
			!strings.Contains(inc[0]["summary"].(string), "Decision push of decision d1") {
			t.Fatalf("push incidents: %v", inc)
		}
	})
}
