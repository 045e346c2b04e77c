package httpapi_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestNotFoundNamesTenant checks that every operator look-up of an unknown
// object answers not_found with a message that names the tenant searched,
// so an operator who meant another tenant sees where the search went
// (issue 11, item 6).
func TestNotFoundNamesTenant(t *testing.T) {
	parallelWork(t, func(t *testing.T, e *workEnv) {
		const missing = "00000000-0000-4000-8000-000000000000"
		decision := map[string]any{"decision_id": "d1", "request_revision": 1, "decision": "approve",
			"expected_action_digest": strings.Repeat("0", 64)}
		for _, c := range []struct {
			method, path string
			body         any
		}{
			{http.MethodGet, "/instances/" + missing, nil},
			{http.MethodPatch, "/instances/" + missing, map[string]any{"approval_validity": "5m"}},
			{http.MethodGet, "/approvals/" + missing, nil},
			{http.MethodPost, "/approvals/" + missing + "/decision", map[string]any{"decision": "approve"}},
			{http.MethodPost, "/policies", map[string]any{"tool": "*", "effect": "approve", "instance_id": missing}},
			{http.MethodDelete, "/policies/" + missing, nil},
			{http.MethodGet, "/deliveries/" + missing, nil},
			{http.MethodGet, "/endpoints/ep_missing", nil},
			{http.MethodPatch, "/endpoints/ep_missing", map[string]any{"name": "x"}},
			{http.MethodDelete, "/endpoints/ep_missing", nil},
			{http.MethodPost, "/endpoints/ep_missing/rotate-secret", nil},
			{http.MethodPost, "/endpoints/ep_missing/pause", nil},
			{http.MethodPost, "/endpoints/ep_missing/resume", nil},
			{http.MethodGet, "/endpoints/ep_missing/runtime-credentials", nil},
			{http.MethodDelete, "/runtime-credentials/rc_missing", nil},
			{http.MethodGet, "/bindings/bnd_missing", nil},
			{http.MethodDelete, "/bindings/bnd_missing", nil},
			{http.MethodGet, "/work/work_missing", nil},
			{http.MethodPost, "/work/work_missing/replay", nil},
			{http.MethodGet, "/attention/att_missing", nil},
			{http.MethodPost, "/attention/att_missing/ack", map[string]any{}},
			{http.MethodPost, "/attention/att_missing/resolve", nil},
			{http.MethodPost, "/attention/att_missing/decision", decision},
			{http.MethodGet, "/attention/att_aap_" + missing, nil},
			{http.MethodPost, "/attention/att_aap_" + missing + "/ack", map[string]any{}},
			{http.MethodPost, "/attention/att_aap_" + missing + "/decision", decision},
			{http.MethodDelete, "/operator-tokens/" + missing, nil},
			{http.MethodDelete, "/provisioner-tokens/" + missing, nil},
		} {
			r := e.do(c.method, tenantPath+c.path, e.operatorToken, c.body)
			expectRefused(t, c.method+" "+c.path, r, http.StatusNotFound, "not_found")
			var body struct {
				Error struct{ Message string } `json:"error"`
			}
			if err := json.Unmarshal(r.Body, &body); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(body.Error.Message, `tenant "default"`) {
				t.Errorf("%s %s: message %q does not name the tenant searched", c.method, c.path, body.Error.Message)
			}
		}
	})
}
