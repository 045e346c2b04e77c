package httpapi_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/agentowl/agentowl/internal/store/storetest"
	"github.com/agentowl/agentowl/internal/work"
	"github.com/agentowl/agentowl/workclient"
)

// AAP approval requests in the Needs-attention inbox (docs/attention.md,
// "AAP approval requests"): listed and inspected as approval items,
// decided there with the refusals of agent-work items, and notifying their
// receiver exactly as `approvals decide` does.

// setupInbox is setupWork with AAP asynchronous mode on, as cmd/agentowl
// runs them together.
func setupInbox(t *testing.T, b storetest.Backend) (*workEnv, *asyncEnv) {
	t.Helper()
	we := setupWork(t, b, work.Config{})
	return we, &asyncEnv{env: we.env, engine: we.engine, egress: we.server.Egress()}
}

// notificationsOf returns the receiver's request.resolved events of request id.
func notificationsOf(t *testing.T, rc *receiver, id string) []resolvedEvent {
	t.Helper()
	var out []resolvedEvent
	for _, ev := range rc.notifications() {
		var body resolvedEvent
		if json.Unmarshal(ev.Body, &body) == nil && body.RequestID == id {
			out = append(out, body)
		}
	}
	return out
}

func aapItem(t *testing.T, e *workEnv, attID string) map[string]any {
	t.Helper()
	for _, it := range e.attention(t, "?status=open") {
		if it["id"] == attID {
			return it
		}
	}
	return nil
}

func TestAttentionAAPApprovals(t *testing.T) {
	for _, b := range storetest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			e, ae := setupInbox(t, b)
			rc := newReceiver(t, ae)
			prov, _ := provisionerToken(t, e.env, "default")
			h := ae.provisionHooked(t, prov, rc)
			body := refundBody()
			body["agent_reasoning"] = "The customer was charged twice."
			req := submit(t, e.env, h.Credential, body)
			attID := "att_aap_" + req.ID

			// Listed and inspected as an approval item.
			it := aapItem(t, e, attID)
			if it == nil {
				t.Fatalf("no item %s in the open inbox", attID)
			}
			digest, err := workclient.ActionDigest(map[string]any{"tool": "issue_refund",
				"arguments": map[string]any{"payment_id": "payment_123", "amount": 4900, "currency": "GBP"}})
			if err != nil {
				t.Fatal(err)
			}
			if it["kind"] != "approval" || it["status"] != "open" || jsonAt(it, "request", "id") != req.ID ||
				jsonAt(it, "request", "revision") != float64(1) || jsonAt(it, "request", "action", "digest") != digest ||
				jsonAt(it, "request", "expires_at") != req.DeadlineAt || jsonAt(it, "approval_request", "instance_id") != h.ID {
				t.Errorf("item %v, want an open approval of %s with digest %s expiring %s", it, req.ID, digest, req.DeadlineAt)
			}
			if got := jsonAt(it, "request", "action", "description"); got != `issue_refund {"amount":4900,"currency":"GBP","payment_id":"payment_123"}` {
				t.Errorf("action description %q", got)
			}
			if got, _ := jsonAt(it, "request", "prompt").(string); got != `Allow the agent to call the tool "issue_refund"? The agent claims (unverified): "The customer was charged twice."` {
				t.Errorf("prompt %q", got)
			}
			ins := wantJSON(t, "inspect", e.do(http.MethodGet, tenantPath+"/attention/"+attID, e.operatorToken, nil), http.StatusOK)
			if jsonAt(ins, "request", "action", "digest") != digest || ins["status"] != "open" {
				t.Errorf("inspect %v", ins)
			}
			if len(e.attention(t, "?status=resolved")) != 0 || len(e.attention(t, "?work=work_x")) != 0 {
				t.Error("the AAP item is listed under another filter")
			}

			// Every refusal, in preview and on submission; nothing changes.
			other := approve("dec-x", 1, digest)
			other["decision"] = "answer"
			for _, preview := range []bool{true, false} {
				wantError(t, e.decide(attID, approve("dec-x", 2, digest), preview), http.StatusConflict, "stale_revision", "request_revision")
				wantError(t, e.decide(attID, approve("dec-x", 1, "ab"+digest[2:]), preview), http.StatusConflict, "digest_mismatch", "expected_action_digest")
				wantError(t, e.decide(attID, other, preview), http.StatusBadRequest, "decision_not_allowed", "decision")
				edit := approve("dec-x", 1, digest)
				edit["decision"] = "edit"
				wantError(t, e.decide(attID, edit, preview), http.StatusBadRequest, "edit_unsupported", "decision")
				noDigest := approve("dec-x", 1, digest)
				delete(noDigest, "expected_action_digest")
				wantError(t, e.decide(attID, noDigest, preview), http.StatusBadRequest, "missing_field", "expected_action_digest")
			}
			wantError(t, e.do(http.MethodPost, tenantPath+"/attention/"+attID+"/resolve", e.operatorToken, nil), http.StatusConflict, "not_a_request", "")
			wantError(t, e.do(http.MethodGet, tenantPath+"/attention/att_aap_"+newKey(), e.operatorToken, nil), http.StatusNotFound, "not_found", "")
			pv := wantJSON(t, "preview", e.decide(attID, approve("dec-1", 1, digest), true), http.StatusOK)
			if pv["preview"] != true || jsonAt(pv, "approval_request", "status") != "pending" {
				t.Errorf("preview %v", pv)
			}
			if got := getRequest(t, e.env, h.Credential, req.ID); got.Status != "pending" {
				t.Fatalf("after refusals and a preview the request is %s", got.Status)
			}

			// The decision wins, as approvals decide.
			e.clock.Advance(2 * time.Second)
			won := wantJSON(t, "decide", e.decide(attID, approve("dec-1", 1, digest), false), http.StatusCreated)
			if won["replay"] != false || jsonAt(won, "approval_request", "status") != "approved" ||
				jsonAt(won, "approval_request", "decision", "expires_at") == nil || jsonAt(won, "attention", "status") != "resolved" ||
				jsonAt(won, "attention", "resolution") != "decided" {
				t.Errorf("decision result %v", won)
			}
			got := getRequest(t, e.env, h.Credential, req.ID)
			if got.Status != "approved" || got.Decision == nil || got.Decision.ExpiresAt == nil {
				t.Fatalf("request after the inbox approval: %+v", got)
			}
			if aapItem(t, e, attID) != nil {
				t.Error("the decided request is still in the open inbox")
			}
			if v := operatorView(t, e.env, req.ID); v.Status != "approved" {
				t.Errorf("operator view %s", v.Status)
			}

			// Replay, conflict, a second decision.
			rp := wantJSON(t, "replay", e.decide(attID, approve("dec-1", 1, digest), false), http.StatusOK)
			if rp["replay"] != true || jsonAt(rp, "approval_request", "status") != "approved" {
				t.Errorf("replay %v", rp)
			}
			reject := approve("dec-1", 1, digest)
			reject["decision"] = "reject"
			wantError(t, e.decide(attID, reject, false), http.StatusConflict, "decision_conflict", "decision_id")
			wantError(t, e.decide(attID, approve("dec-2", 1, digest), false), http.StatusConflict, "already_decided", "")
			wantError(t, decide(e.env, req.ID, "deny"), http.StatusConflict, "already_terminal", "")

			// Exactly one request.resolved reached the receiver.
			ev := rc.waitNotifications(t, 1)[0]
			wantNotification(t, ev, h.ID, req.ID, got.Decision.DecidedAt)
			ae.barrier(t, h)
			if n := len(notificationsOf(t, rc, req.ID)); n != 1 {
				t.Errorf("the receiver got %d notifications of the request, want 1", n)
			}

			// An expired request is refused.
			late := submit(t, e.env, h.Credential, refundBody())
			e.clock.Advance(31 * time.Minute)
			wantError(t, e.decide("att_aap_"+late.ID, approve("dec-3", 1, digest), false), http.StatusConflict, "request_expired", "")
			if aapItem(t, e, "att_aap_"+late.ID) != nil {
				t.Error("the expired request is in the open inbox")
			}
		})
	}
}

// Acknowledging an AAP item assigns it without deciding it: it moves from
// the open list to the acknowledged one, the request stays pending, and an
// ended request cannot be acknowledged.
func TestAttentionAAPAcknowledge(t *testing.T) {
	for _, b := range storetest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			e, _ := setupInbox(t, b)
			inst := newInstance(t, e.env)
			req := submit(t, e.env, inst.Credential, refundBody())
			attID := "att_aap_" + req.ID
			path := tenantPath + "/attention/" + attID

			acked := wantJSON(t, "ack", e.do(http.MethodPost, path+"/ack", e.operatorToken, map[string]any{"assignee": "alice"}), http.StatusOK)
			if acked["status"] != "acknowledged" || acked["assignee"] != "alice" || acked["acknowledged_at"] == nil {
				t.Fatalf("acknowledged item = %v", acked)
			}
			if aapItem(t, e, attID) != nil {
				t.Error("an acknowledged item is still listed as open")
			}
			listed := false
			for _, it := range e.attention(t, "?status=acknowledged") {
				listed = listed || it["id"] == attID
			}
			if !listed {
				t.Error("the acknowledged item is not listed as acknowledged")
			}
			if got := getRequest(t, e.env, inst.Credential, req.ID); got.Status != "pending" {
				t.Fatalf("acknowledging changed the request to %s", got.Status)
			}
			ins := wantJSON(t, "inspect", e.do(http.MethodGet, path, e.operatorToken, nil), http.StatusOK)
			if ins["status"] != "acknowledged" || ins["assignee"] != "alice" {
				t.Errorf("inspect = %v", ins)
			}
			// Reassigning is allowed; the default assignee is the caller.
			again := wantJSON(t, "ack again", e.do(http.MethodPost, path+"/ack", e.operatorToken, nil), http.StatusOK)
			if again["assignee"] != "operator:admin" {
				t.Errorf("default assignee %v", again["assignee"])
			}
			wantStatus(t, e.do(http.MethodDelete, "/v1/requests/"+req.ID, inst.Credential, nil), http.StatusOK)
			wantError(t, e.do(http.MethodPost, path+"/ack", e.operatorToken, nil), http.StatusConflict, "conflict", "")
			wantError(t, e.do(http.MethodPost, tenantPath+"/attention/att_aap_00000000-0000-4000-8000-000000000000/ack", e.operatorToken, nil),
				http.StatusNotFound, "not_found", "")
		})
	}
}
