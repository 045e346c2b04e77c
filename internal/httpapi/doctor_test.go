package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/agentowl/agentowl/internal/work"
)

// The report is served to admins with its findings and counts, validated
// against the contract; a credential installed clears its finding.
func TestDoctorRoute(t *testing.T) {
	t.Parallel()
	forEachWorkBackend(t, work.Config{}, func(t *testing.T, e *workEnv) {
		rt := newRuntime(t, e)
		ep := e.endpoint(t, rt, true)["id"].(string)
		report := func() map[string]any {
			return wantJSON(t, "doctor", e.do(http.MethodGet, tenantPath+"/doctor", e.operatorToken, nil), http.StatusOK)
		}
		r := report()
		fs := r["findings"].([]any)
		first := fs[0].(map[string]any)
		if r["status"] != "error" || jsonAt(r, "counts", "error") != 1.0 || first["check"] != "runtime_credentials" ||
			first["subject"] != "endpoint:"+ep || first["command"] != "agentowl runtime-credentials create "+ep+" --days 90" {
			t.Fatalf("report of an endpoint without credentials = %v", r)
		}
		// The scheduler and overdue work are not assembled yet: notes.
		if jsonAt(r, "counts", "info") != 2.0 {
			t.Errorf("notes = %v, want the two checks that did not run", jsonAt(r, "counts"))
		}
		e.credential(t, ep, nil)
		if r := report(); r["status"] != "ok" || jsonAt(r, "counts", "error") != 0.0 {
			t.Errorf("after a credential: %v", r)
		}
		expectRefused(t, "a member", e.do(http.MethodGet, tenantPath+"/doctor", e.memberToken(t), nil), 403, "forbidden")
	})
}
