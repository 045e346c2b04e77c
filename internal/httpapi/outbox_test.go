package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/work"
)

// failUntilEnded drives the clock from one attempt of the message of kind
// about subject (a work or event ID) to the next until it has failed, and
// returns it. The clock moves only while no message of subject is due or
// in flight, and then just to the next attempt, so it never runs ahead of
// the engine: a decision push ends as early as its window makes it end.
func (e *workEnv) failUntilEnded(t *testing.T, subject, kind string) *agentowl.OutboxMessage {
	t.Helper()
	var failed *agentowl.OutboxMessage
	eventually(t, syncLimit, kind+" failed", func() bool {
		now := e.clock.Now()
		var next time.Time
		for _, m := range e.messages(t, subject) {
			if m.Kind == kind && m.State == agentowl.MessageFailed {
				failed = m
				return true
			}
			if m.State != agentowl.MessagePending {
				continue
			}
			if m.LeaseOwner != "" || !m.NextAttempt.After(now) {
				e.engine.Wake() // due or in flight: the engine's turn
				return false
			}
			if next.IsZero() || m.NextAttempt.Before(next) {
				next = m.NextAttempt
			}
		}
		if !next.IsZero() {
			e.clock.Advance(next.Sub(now))
		}
		e.engine.Wake()
		return false
	})
	return failed
}

// waitState waits until message id of subject is in state.
func (e *workEnv) waitState(t *testing.T, subject, id string, state agentowl.MessageState) *agentowl.OutboxMessage {
	t.Helper()
	var got *agentowl.OutboxMessage
	eventually(t, syncLimit, "message "+id+" "+string(state), func() bool {
		for _, m := range e.messages(t, subject) {
			if m.ID == id && m.State == state {
				got = m
				return true
			}
		}
		e.engine.Wake()
		return false
	})
	return got
}

// memberToken makes a member operator of the default tenant and returns its token.
func (e *workEnv) memberToken(t *testing.T) string {
	t.Helper()
	name := "member-" + agentowl.NewID("x")[20:]
	wantJSON(t, "create member", e.do(http.MethodPost, tenantPath+"/operators", e.operatorToken,
		map[string]any{"name": name, "role": "member"}), http.StatusCreated)
	return wantJSON(t, "member token", e.do(http.MethodPost, tenantPath+"/operator-tokens", e.operatorToken,
		map[string]any{"operator": name}), http.StatusCreated)["token"].(string)
}

func (rt *fakeRuntime) succeedFromNow() {
	rt.mu.Lock()
	rt.script = nil
	rt.mu.Unlock()
}

// pushRuntime is a decision URL that refuses pushes with 503 and a far
// Retry-After until told to accept: the engine then makes one last attempt
// as late as the window allows, and the push fails ten seconds (one attempt
// timeout) before its request expires.
type pushRuntime struct {
	srv    *httptest.Server
	mu     sync.Mutex
	accept bool
	got    []map[string]any
}

func newPushRuntime(t *testing.T) *pushRuntime {
	t.Helper()
	p := &pushRuntime{}
	p.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var doc map[string]any
		_ = json.NewDecoder(r.Body).Decode(&doc)
		p.mu.Lock()
		defer p.mu.Unlock()
		p.got = append(p.got, doc)
		if !p.accept {
			w.Header().Set("Retry-After", "3600")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"accepted": true, "decision_id": doc["decision_id"]})
	}))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *pushRuntime) acceptFromNow() {
	p.mu.Lock()
	p.accept = true
	p.mu.Unlock()
}

func (p *pushRuntime) pushes() []map[string]any {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]map[string]any(nil), p.got...)
}

// itemIDs returns the IDs of a list document's items.
func itemIDs(doc map[string]any) []string {
	var out []string
	for _, it := range doc["items"].([]any) {
		out = append(out, it.(map[string]any)["id"].(string))
	}
	return out
}

// refuse makes rt answer 503 with a far Retry-After to its next n
// deliveries: the engine then makes one last attempt as late as the window
// allows, so a handoff fails in two attempts.
func (rt *fakeRuntime) refuse(n int) {
	rt.mu.Lock()
	rt.retryAfter = "3600"
	rt.mu.Unlock()
	s := make([]int, n)
	for i := range s {
		s[i] = http.StatusServiceUnavailable
	}
	rt.answer(s...)
}

// A failed handoff is listed in the work outbox and in the event's
// publications; a redrive sends the same message (same webhook-id and work
// identity, no new work) in a new attempt series, resolves its incident and
// is audited; a delivered one is refused, as is one still being delivered.
func TestRedriveHandoff(t *testing.T) {
	t.Parallel()
	forEachWorkBackend(t, work.Config{HandoffWindow: time.Minute}, func(t *testing.T, e *workEnv) {
		rt := newRuntime(t, e)
		rt.refuse(1000)
		epID := e.endpoint(t, rt, true)["id"].(string)
		e.credential(t, epID, nil)
		bindingID, in := e.binding(t, epID, nil)
		eventID := e.send(t, in, map[string]any{"text": "please summarise"})["event_id"].(string)
		workID := e.listWork(t, "?endpoint="+epID)[0]["id"].(string)
		m := e.failUntilEnded(t, workID, work.MessageKindHandoff)
		if _, err := e.work.RecordDeliveryIncidents(context.Background()); err != nil {
			t.Fatal(err)
		}
		incident := e.incidents(t, workID)[0]

		outbox := tenantPath + "/work-outbox"
		list := wantJSON(t, "failed jobs", e.do(http.MethodGet, outbox+"?state=failed&endpoint="+epID, e.operatorToken, nil), http.StatusOK)
		if got := itemIDs(list); len(got) != 1 || got[0] != m.ID {
			t.Fatalf("failed jobs of the endpoint = %v, want %s", got, m.ID)
		}
		job := list["items"].([]any)[0].(map[string]any)
		if job["work_id"] != workID || job["event_id"] != eventID || job["endpoint_id"] != epID || job["binding_id"] != bindingID ||
			job["kind"] != "work.handoff" || job["redrives"] != 0.0 || job["series_first_attempt"] != 1.0 {
			t.Fatalf("job = %v", job)
		}
		pubs := wantJSON(t, "publications of the event", e.do(http.MethodGet, tenantPath+"/ingress-publications?event="+eventID,
			e.operatorToken, nil), http.StatusOK)
		if got := itemIDs(pubs); len(got) != 1 || got[0] != m.ID {
			t.Fatalf("publications of %s = %v, want %s", eventID, got, m.ID)
		}
		for q, want := range map[string]int{"?state=delivered": 0, "?older_than=1h": 0, "?older_than=30s": 1, "?work=" + workID: 1,
			"?work=work_other": 0, "?endpoint=ep_other": 0} {
			if got := itemIDs(wantJSON(t, "filter "+q, e.do(http.MethodGet, outbox+q, e.operatorToken, nil), http.StatusOK)); len(got) != want {
				t.Errorf("work-outbox%s = %v, want %d", q, got, want)
			}
		}
		expectRefused(t, "bad state", e.do(http.MethodGet, outbox+"?state=stuck", e.operatorToken, nil), 400, "invalid_field")
		expectRefused(t, "bad age", e.do(http.MethodGet, outbox+"?older_than=yesterday", e.operatorToken, nil), 400, "invalid_field")
		expectRefused(t, "negative age", e.do(http.MethodGet, outbox+"?older_than=-1h", e.operatorToken, nil), 400, "invalid_field")
		inspected := wantJSON(t, "inspect", e.do(http.MethodGet, outbox+"/"+m.ID, e.operatorToken, nil), http.StatusOK)
		if inspected["incident_id"] != incident["id"] || len(inspected["attempt_history"].([]any)) != m.Attempts {
			t.Fatalf("inspect = %v, want incident %v and %d attempts", inspected, incident["id"], m.Attempts)
		}

		expectRefused(t, "member redrive", e.do(http.MethodPost, outbox+"/"+m.ID+"/redrive", e.memberToken(t), nil), 403, "forbidden")
		expectRefused(t, "unknown job", e.do(http.MethodPost, outbox+"/"+strings.Repeat("0", 8)+"/redrive", e.operatorToken, nil),
			404, "not_found")

		rt.succeedFromNow()
		before := len(rt.deliveries())
		r := wantJSON(t, "redrive", e.do(http.MethodPost, outbox+"/"+m.ID+"/redrive", e.operatorToken, nil), http.StatusOK)
		if r["id"] != m.ID || r["state"] != "pending" || r["redrives"] != 1.0 || r["series_first_attempt"] != float64(m.Attempts+1) ||
			r["work_id"] != workID {
			t.Fatalf("redrive answer = %v", r)
		}
		got := rt.wait(t, before+1)[before]
		if got.Header.Get("webhook-id") != m.ID || got.WorkID() != workID || got.Doc["id"] != m.ID {
			t.Fatalf("redriven delivery: webhook-id %q, work %q; want %s and %s", got.Header.Get("webhook-id"), got.WorkID(), m.ID, workID)
		}
		done := e.waitState(t, workID, m.ID, agentowl.MessageDelivered)
		if done.Attempts != m.Attempts+1 || done.Redrives != 1 {
			t.Errorf("after the new series: %d attempts, %d redrives; want %d and 1", done.Attempts, done.Redrives, m.Attempts+1)
		}
		if n := len(e.listWork(t, "?endpoint="+epID)); n != 1 {
			t.Errorf("work after a redrive: %d, want the one work (a redrive is never new work)", n)
		}
		it := wantJSON(t, "incident", e.do(http.MethodGet, tenantPath+"/attention/"+incident["id"].(string), e.operatorToken, nil), http.StatusOK)
		if it["status"] != "resolved" || it["resolution"] != "redriven" {
			t.Errorf("incident after redrive = %v, want resolved as redriven", it)
		}
		if actions := e.auditActions(t); actions[len(actions)-1] != "outbox.redrive" {
			t.Errorf("audit log ends %v, want outbox.redrive", actions)
		}

		for _, q := range []string{"/work-outbox/", "/ingress-publications/"} {
			expectRefused(t, "redrive of a delivered handoff via "+q, e.do(http.MethodPost, tenantPath+q+m.ID+"/redrive", e.operatorToken, nil),
				409, "already_delivered")
		}

		// A handoff still being retried is refused.
		rt.refuse(1000)
		e.send(t, in, map[string]any{"text": "again"})
		second := e.listWork(t, "?endpoint="+epID)[0]["id"].(string)
		pending := e.messages(t, second)[0]
		expectRefused(t, "redrive of a pending handoff", e.do(http.MethodPost, outbox+"/"+pending.ID+"/redrive", e.operatorToken, nil),
			409, "delivery_pending")

		// A failed handoff to an endpoint deleted since is refused.
		failed := e.failUntilEnded(t, second, work.MessageKindHandoff)
		wantJSON(t, "delete binding", e.do(http.MethodDelete, tenantPath+"/bindings/"+bindingID, e.operatorToken, nil), http.StatusNoContent)
		wantJSON(t, "delete endpoint", e.do(http.MethodDelete, tenantPath+"/endpoints/"+epID, e.operatorToken, nil), http.StatusNoContent)
		expectRefused(t, "redrive to a deleted endpoint", e.do(http.MethodPost, outbox+"/"+failed.ID+"/redrive", e.operatorToken, nil),
			409, "conflict")
		if m := e.messages(t, second)[0]; m.State != agentowl.MessageFailed || m.Redrives != 0 {
			t.Errorf("a refused redrive changed the message: %+v", m)
		}
	})
}

// An event delivered in the original format (no agent work) is a
// publication, not a work-outbox job; its redrive sends the same event.
func TestRedrivePublication(t *testing.T) {
	t.Parallel()
	forEachWorkBackend(t, work.Config{HandoffWindow: time.Minute}, func(t *testing.T, e *workEnv) {
		rt := newRuntime(t, e)
		rt.refuse(1000)
		epID := e.endpoint(t, rt, false)["id"].(string)
		_, in := e.binding(t, epID, nil)
		eventID := e.send(t, in, map[string]any{"text": "plain"})["event_id"].(string)
		m := e.failUntilEnded(t, eventID, work.MessageKindEvent)

		pubs := wantJSON(t, "failed publications", e.do(http.MethodGet, tenantPath+"/ingress-publications?state=failed&endpoint="+epID,
			e.operatorToken, nil), http.StatusOK)
		if got := itemIDs(pubs); len(got) != 1 || got[0] != m.ID {
			t.Fatalf("failed publications = %v, want %s", got, m.ID)
		}
		if p := pubs["items"].([]any)[0].(map[string]any); p["event_id"] != eventID || p["channel"] != "webhook" || p["work_id"] != nil {
			t.Fatalf("publication = %v", p)
		}
		expectRefused(t, "a publication in the work outbox", e.do(http.MethodGet, tenantPath+"/work-outbox/"+m.ID, e.operatorToken, nil),
			404, "not_found")
		expectRefused(t, "its redrive in the work outbox", e.do(http.MethodPost, tenantPath+"/work-outbox/"+m.ID+"/redrive",
			e.operatorToken, nil), 404, "not_found")

		rt.succeedFromNow()
		before := len(rt.deliveries())
		wantJSON(t, "redrive", e.do(http.MethodPost, tenantPath+"/ingress-publications/"+m.ID+"/redrive", e.operatorToken, nil), http.StatusOK)
		got := rt.wait(t, before+1)[before]
		if got.Header.Get("webhook-id") != m.ID || jsonAt(got.Doc, "event", "id") != eventID || got.Doc["work"] != nil {
			t.Fatalf("redriven publication: %s", got.Body)
		}
		e.waitState(t, eventID, m.ID, agentowl.MessageDelivered)
		expectRefused(t, "redrive of a delivered publication", e.do(http.MethodPost, tenantPath+"/ingress-publications/"+m.ID+"/redrive",
			e.operatorToken, nil), 409, "already_delivered")
	})
}

// A failed decision push redriven carries the same decision ID until the
// runtime accepts it (its receipt is recorded); pushes whose receipt is in,
// whose request expired, whose work ended or whose endpoint lost its
// decision URL are refused.
func TestRedriveDecisionPush(t *testing.T) {
	parallelWork(t, func(t *testing.T, e *workEnv) {
		// push fails one decision's push, the request expiring in a minute.
		push := func(dr *pushRuntime, decisionID string) (*handedOff, *agentowl.OutboxMessage) {
			t.Helper()
			h := e.handOffWithDecisions(t, dr.srv.URL+"/decisions")
			receipt(t, "needs_input", e.needsInput(h, 1, approvalRequest("a1", 1, digestA, e.expiry(time.Minute))))
			att := e.itemFor(t, h.workID, "a1", 1)["id"].(string)
			wantJSON(t, "approve", e.decide(att, approve(decisionID, 1, digestA), false), http.StatusCreated)
			return h, e.failUntilEnded(t, h.workID, work.MessageKindDecision)
		}
		redrive := func(id string) *response {
			return e.do(http.MethodPost, tenantPath+"/work-outbox/"+id+"/redrive", e.operatorToken, nil)
		}

		dr := newPushRuntime(t)
		h, m := push(dr, "d1")
		if !e.clock.Now().Before(m.DeadlineAt) {
			t.Fatalf("the push ended at %s, its request's expiry; the test needs it to end before", e.clock.Now())
		}
		job := wantJSON(t, "inspect push", e.do(http.MethodGet, tenantPath+"/work-outbox/"+m.ID, e.operatorToken, nil), http.StatusOK)
		if job["decision_id"] != "d1" || job["work_id"] != h.workID || job["kind"] != "work.decision" {
			t.Fatalf("push job = %v", job)
		}
		dr.acceptFromNow()
		before := len(dr.pushes())
		r := wantJSON(t, "redrive push", redrive(m.ID), http.StatusOK)
		if r["deadline_at"] != m.DeadlineAt.UTC().Format(time.RFC3339) {
			t.Errorf("redriven push ends %v, want the request's expiry %v", r["deadline_at"], m.DeadlineAt)
		}
		e.waitState(t, h.workID, m.ID, agentowl.MessageDelivered)
		if pushes := dr.pushes(); len(pushes) != before+1 || pushes[before]["decision_id"] != "d1" {
			t.Fatalf("redriven push: %d pushes after %d: %v", len(pushes), before, pushes)
		}
		w := e.getWork(t, h.workID)
		if ds := jsonAt(w, "decision", "decisions").([]any); jsonAt(ds[0].(map[string]any), "receipt_via") != "push" {
			t.Errorf("decision after the redriven push = %v, want a receipt via push", ds)
		}
		expectRefused(t, "redrive of a delivered push", redrive(m.ID), 409, "already_delivered")

		// The runtime recovered the decision itself: nothing to push.
		dr2 := newPushRuntime(t)
		h2, m2 := push(dr2, "d2")
		wantJSON(t, "recovery receipt", e.do(http.MethodPost, "/runtime/v1/work/"+h2.workID+"/decisions/d2/receipt", h2.token, nil),
			http.StatusOK)
		expectRefused(t, "redrive of a push whose receipt is in", redrive(m2.ID), 409, "already_delivered")

		// Lost decision URL, expired request, ended work.
		dr3 := newPushRuntime(t)
		h3, m3 := push(dr3, "d3")
		wantJSON(t, "remove decision URL", e.do(http.MethodPatch, tenantPath+"/endpoints/"+h3.endpointID, e.operatorToken,
			map[string]any{"decision_url": nil}), http.StatusOK)
		expectRefused(t, "redrive without a decision URL", redrive(m3.ID), 409, "conflict")
		wantJSON(t, "restore decision URL", e.do(http.MethodPatch, tenantPath+"/endpoints/"+h3.endpointID, e.operatorToken,
			map[string]any{"decision_url": dr3.srv.URL + "/decisions", "decision_secret": "bearer-secret-0123456789"}), http.StatusOK)
		e.clock.Advance(time.Minute)
		expectRefused(t, "redrive after the request expired", redrive(m3.ID), 409, "request_expired")
		receipt(t, "completed", e.post(h3, h3.token, callback(h3.workID, h3.workID+":2", 2, "completed")))
		expectRefused(t, "redrive after the work ended", redrive(m3.ID), 409, "already_terminal")
	})
}
