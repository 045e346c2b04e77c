package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/maintenance"
)

// An endpoint's overdue expectations: set on creation, shown on the
// endpoint, replaced as a whole on update (null restores the defaults);
// bad values are invalid_field or unknown_field, and nothing is written.
func TestEndpointOverdue(t *testing.T) {
	parallelWork(t, func(t *testing.T, e *workEnv) {
		rt := newRuntime(t, e)
		create := func(overdue any) *response {
			return e.do(http.MethodPost, tenantPath+"/endpoints", e.operatorToken, map[string]any{"name": "ep-" + agentowl.NewID("x")[20:],
				"url": rt.URL(), "config": map[string]any{"agent_work": true}, "overdue": overdue})
		}
		ep := wantJSON(t, "create", create(map[string]any{"accept_within": "90s", "report_interval": "off"}), http.StatusCreated)
		if o, _ := ep["overdue"].(map[string]any); o["accept_within"] != "1m30s" || o["report_interval"] != "off" || len(o) != 2 {
			t.Fatalf("created endpoint's overdue = %v", ep["overdue"])
		}
		id := ep["id"].(string)
		path := tenantPath + "/endpoints/" + id
		up := wantJSON(t, "update", e.do(http.MethodPatch, path, e.operatorToken, map[string]any{"overdue": map[string]any{"input_expiry": false}}), http.StatusOK)
		if o, _ := up["overdue"].(map[string]any); o["input_expiry"] != false || len(o) != 1 {
			t.Fatalf("updated overdue = %v, want input_expiry alone (the object replaces the old one)", up["overdue"])
		}
		for name, c := range map[string]struct {
			overdue any
			code    string
		}{
			"not an object":        {"5m", "invalid_field"},
			"null on creation":     {nil, "invalid_field"},
			"a number":             {map[string]any{"accept_within": 300}, "invalid_field"},
			"not a duration":       {map[string]any{"accept_within": "soon"}, "invalid_field"},
			"negative":             {map[string]any{"report_interval": "-5m"}, "invalid_field"},
			"a fraction of second": {map[string]any{"report_interval": "1500ms"}, "invalid_field"},
			"past 90 days":         {map[string]any{"accept_within": "2161h"}, "invalid_field"},
			"not a boolean":        {map[string]any{"input_expiry": "yes"}, "invalid_field"},
			"null boolean":         {map[string]any{"input_expiry": nil}, "invalid_field"},
			"unknown":              {map[string]any{"accept_whenever": "5m"}, "unknown_field"},
		} {
			r := create(c.overdue)
			if name == "null on creation" {
				r = e.do(http.MethodPost, tenantPath+"/endpoints", e.operatorToken, fmt.Sprintf(`{"name":"n-%s","url":%q,"overdue":null}`,
					agentowl.NewID("x")[20:], rt.URL()))
			}
			expectRefused(t, name, r, http.StatusBadRequest, c.code)
			if name != "null on creation" {
				expectRefused(t, name+" (update)", e.do(http.MethodPatch, path, e.operatorToken, map[string]any{"overdue": c.overdue}),
					http.StatusBadRequest, c.code)
			}
		}
		got := wantJSON(t, "inspect", e.do(http.MethodGet, path, e.operatorToken, nil), http.StatusOK)
		if o, _ := got["overdue"].(map[string]any); o["input_expiry"] != false || len(o) != 1 {
			t.Fatalf("after refused updates overdue = %v", got["overdue"])
		}
		if got := wantJSON(t, "reset", e.do(http.MethodPatch, path, e.operatorToken, map[string]any{"overdue": nil}), http.StatusOK); got["overdue"] != nil {
			t.Fatalf("after overdue null: %v", got["overdue"])
		}
	})
}

// An overdue incident in Needs attention names its cause and rule; the
// first callback resolves it; GET /api/v1/maintenance shows the job's run.
func TestOverdueIncidentAndMaintenanceStatus(t *testing.T) {
	parallelWork(t, func(t *testing.T, e *workEnv) {
		h := e.handOff(t)
		eventually(t, syncLimit, "the handoff delivered", func() bool {
			return jsonAt(e.getWork(t, h.workID), "delivery", "state") == "delivered"
		})
		e.clock.Advance(5 * time.Minute)
		r, err := e.server.Scheduler().RunJob(context.Background(), maintenance.JobOverdue)
		if err != nil || r.Outcome != "ok" || r.Affected != 1 {
			t.Fatalf("overdue run = %+v, %v; want one incident", r, err)
		}
		items := e.attention(t, "?work="+h.workID)
		if len(items) != 1 || items[0]["kind"] != "incident" || items[0]["cause"] != "work_overdue" || items[0]["rule"] != "accept_within" ||
			items[0]["status"] != "open" || items[0]["work_status"] != "pending" {
			t.Fatalf("attention of the overdue work = %v", items)
		}
		receipt(t, "accepted", e.post(h, h.token, callback(h.workID, h.workID+":1", 1, "accepted")))
		items = e.attention(t, "?work="+h.workID)
		if len(items) != 1 || items[0]["status"] != "resolved" || items[0]["resolution"] != "callback" {
			t.Fatalf("after the callback: %v", items)
		}

		st := wantJSON(t, "maintenance status", e.do(http.MethodGet, "/api/v1/maintenance", e.operatorToken, nil), http.StatusOK)
		if st["enabled"] != false || st["leader"] != nil {
			t.Errorf("status of a server without a running scheduler: enabled %v, leader %v", st["enabled"], st["leader"])
		}
		var found bool
		for _, j := range st["jobs"].([]any) {
			j := j.(map[string]any)
			if j["name"] == maintenance.JobOverdue {
				found = jsonAt(j, "last_run", "outcome") == "ok" && jsonAt(j, "last_run", "affected") == float64(1)
			}
		}
		if !found {
			t.Errorf("the overdue job's run is not in the status: %v", st["jobs"])
		}
	})
}

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
