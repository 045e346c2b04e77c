package httpapi_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/work"
)

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
