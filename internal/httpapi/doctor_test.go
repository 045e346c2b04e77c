package httpapi_test

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/maintenance"
)

// The report is served to admins with its findings and counts, validated
// against the contract; fixing what a finding names clears it. The
// scheduler's leadership is read from the leader lease (these tests run no
// scheduler, so there is no leader until the test takes the lease).
func TestDoctorRoute(t *testing.T) {
	parallelWork(t, func(t *testing.T, e *workEnv) {
		rt := newRuntime(t, e)
		ep := e.endpoint(t, rt, true)["id"].(string)
		report := func() (map[string]any, []string) {
			t.Helper()
			r := wantJSON(t, "doctor", e.do(http.MethodGet, tenantPath+"/doctor", e.operatorToken, nil), http.StatusOK)
			var found []string
			for _, f := range r["findings"].([]any) {
				f := f.(map[string]any)
				found = append(found, f["severity"].(string)+" "+f["check"].(string)+" "+f["subject"].(string))
			}
			return r, found
		}
		r, found := report()
		want := []string{"error runtime_credentials endpoint:" + ep, "error scheduler_leader scheduler"}
		if r["status"] != "error" || jsonAt(r, "counts", "error") != 2.0 || !slices.Equal(found, want) {
			t.Fatalf("report of an endpoint without credentials and no scheduler leader = %v, want findings %q", r, want)
		}
		if f := r["findings"].([]any)[0].(map[string]any); f["command"] != "agentowl runtime-credentials create "+ep+" --days 90" {
			t.Errorf("command %v", f["command"])
		}

		now := e.clock.Now()
		if err := e.store.Write(context.Background(), func(tx agentowl.Tx) error {
			_, err := tx.LeaseAcquire(context.Background(), maintenance.LeaseName, "test-leader", now, now.Add(time.Hour))
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if r, found = report(); !slices.Equal(found, want[:1]) {
			t.Fatalf("with a leader: %v", r)
		}
		e.credential(t, ep, nil)
		if r, found = report(); r["status"] != "ok" || len(found) != 0 {
			t.Errorf("after a credential: %v", r)
		}
		expectRefused(t, "a member", e.do(http.MethodGet, tenantPath+"/doctor", e.memberToken(t), nil), 403, "forbidden")
	})
}
