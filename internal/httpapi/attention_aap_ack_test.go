package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/agentowl/agentowl/internal/store/storetest"
)

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
