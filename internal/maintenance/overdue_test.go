package maintenance_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/maintenance"
	"github.com/agentowl/agentowl/internal/work"
)

// wantOverdue checks that a work has n overdue incidents, the last one
// with rule and status, and returns the last.
func wantOverdue(t *testing.T, f *fixture, workID string, n int, rule string, status agentowl.AttentionStatus) *agentowl.AttentionItem {
	t.Helper()
	items := f.overdue(workID)
	if len(items) != n {
		t.Fatalf("work %s has %d overdue incidents, want %d: %+v", workID, len(items), n, items)
	}
	if n == 0 {
		return nil
	}
	it := items[n-1]
	if it.OverdueRule != rule || it.Status != status || it.Kind != work.KindIncident {
		t.Fatalf("overdue incident = %s %s %s, want an incident of rule %s, %s", it.Kind, it.OverdueRule, it.Status, rule, status)
	}
	return it
}

// Handoff delivered, no callback: the incident opens exactly at
// accept_within, once however often the scan runs (concurrently too), never
// changes the work's status, and the first callback resolves it.
func TestOverdueAcceptWithin(t *testing.T) {
	forEachBackend(t, maintenance.Config{}, func(t *testing.T, f *fixture) {
		ep := f.endpoint(nil)
		id := f.handOff(ep)
		f.deliverAll()
		undelivered := f.handOff(f.endpoint(nil)) // handed off after the delivery: never delivered

		f.clock.Advance(5*time.Minute - time.Second)
		if r := f.run(maintenance.JobOverdue); r.Affected != 0 {
			t.Fatalf("a second before accept_within the scan opened %d incidents", r.Affected)
		}
		wantOverdue(t, f, id, 0, "", "")
		f.clock.Advance(time.Second)
		var wg sync.WaitGroup
		for range 3 {
			wg.Go(func() { f.run(maintenance.JobOverdue) })
		}
		wg.Wait()
		f.run(maintenance.JobOverdue)
		it := wantOverdue(t, f, id, 1, maintenance.RuleAcceptWithin, agentowl.AttentionOpen)
		for _, want := range []string{id, "accept_within", "no callback came within 5m0s", "Last report: none", "stays pending"} {
			if !strings.Contains(it.Summary, want) {
				t.Errorf("summary %q lacks %q", it.Summary, want)
			}
		}
		if it.WorkID != id || it.EndpointID != ep.id || it.OverdueSequence != 0 {
			t.Errorf("incident names work %s endpoint %s sequence %d", it.WorkID, it.EndpointID, it.OverdueSequence)
		}
		if w := f.work(id); w.Status != agentowl.WorkPending || w.EndedAt != nil {
			t.Fatalf("the overdue work is %s (ended %v), want pending: the scan never changes it", w.Status, w.EndedAt)
		}
		if n := len(f.overdue(undelivered)); n != 0 {
			t.Errorf("work whose handoff was never delivered has %d overdue incidents", n)
		}

		f.callback(ep, id, 1, "accepted", nil)
		it = wantOverdue(t, f, id, 1, maintenance.RuleAcceptWithin, agentowl.AttentionResolved)
		if it.Resolution != work.ResolvedCallback || it.ResolvedAt == nil {
			t.Errorf("resolved as %q at %v, want callback", it.Resolution, it.ResolvedAt)
		}
		if w := f.work(id); w.Status != agentowl.WorkAccepted {
			t.Errorf("work is %s after the callback", w.Status)
		}
	})
}

// While accepted or running a callback is due every report_interval; each
// lapse opens one incident at the work's sequence, a callback resolves it,
// and the next lapse opens another.
func TestOverdueReportInterval(t *testing.T) {
	forEachBackend(t, maintenance.Config{}, func(t *testing.T, f *fixture) {
		ep := f.endpoint(nil)
		id := f.handOff(ep)
		f.deliverAll()
		f.callback(ep, id, 1, "running", nil)
		f.clock.Advance(30*time.Minute - time.Second)
		f.run(maintenance.JobOverdue)
		wantOverdue(t, f, id, 0, "", "")
		f.clock.Advance(time.Second)
		f.run(maintenance.JobOverdue)
		f.run(maintenance.JobOverdue)
		it := wantOverdue(t, f, id, 1, maintenance.RuleReportInterval, agentowl.AttentionOpen)
		if it.OverdueSequence != 1 || !strings.Contains(it.Summary, `callback "`+id+`:1", sequence 1, status running`) {
			t.Errorf("incident at sequence %d, summary %q: want the last report, callback 1", it.OverdueSequence, it.Summary)
		}
		if w := f.work(id); w.Status != agentowl.WorkRunning {
			t.Fatalf("work is %s, want running", w.Status)
		}

		f.callback(ep, id, 2, "running", nil)
		wantOverdue(t, f, id, 1, maintenance.RuleReportInterval, agentowl.AttentionResolved)
		f.clock.Advance(30 * time.Minute)
		f.run(maintenance.JobOverdue)
		it = wantOverdue(t, f, id, 2, maintenance.RuleReportInterval, agentowl.AttentionOpen)
		if it.OverdueSequence != 2 {
			t.Errorf("second incident at sequence %d, want 2", it.OverdueSequence)
		}
		// An incident reviewed by hand stays resolved: the same lapse
		// never opens it again.
		if _, err := f.srv.Work().ResolveAttention(f.ctx, f.admin, "default", it.ID); err != nil {
			t.Fatal(err)
		}
		f.clock.Advance(time.Hour)
		f.run(maintenance.JobOverdue)
		wantOverdue(t, f, id, 2, maintenance.RuleReportInterval, agentowl.AttentionResolved)

		// Ended work is never overdue.
		f.callback(ep, id, 3, "completed", nil)
		f.clock.Advance(24 * time.Hour)
		f.run(maintenance.JobOverdue)
		wantOverdue(t, f, id, 2, maintenance.RuleReportInterval, agentowl.AttentionResolved)
	})
}

// needs_input whose request expired unanswered opens an input_expiry
// incident; the work stays needs_input.
func TestOverdueInputExpiry(t *testing.T) {
	forEachBackend(t, maintenance.Config{}, func(t *testing.T, f *fixture) {
		ep := f.endpoint(nil)
		id := f.handOff(ep)
		f.deliverAll()
		expiry := f.clock.Now().Add(10 * time.Minute)
		f.callback(ep, id, 1, "needs_input", map[string]any{"requests": []any{map[string]any{
			"id": "q1", "revision": 1, "kind": "question", "prompt": "Which order?", "allowed_decisions": []string{"answer"},
			"expires_at": expiry.Format(time.RFC3339)}}})
		f.clock.Advance(10*time.Minute - time.Second)
		f.run(maintenance.JobExpiry)
		f.run(maintenance.JobOverdue)
		wantOverdue(t, f, id, 0, "", "")
		f.clock.Advance(time.Second)
		f.run(maintenance.JobOverdue) // before the expiry sweep recorded it
		f.run(maintenance.JobExpiry)
		f.run(maintenance.JobOverdue)
		it := wantOverdue(t, f, id, 1, maintenance.RuleInputExpiry, agentowl.AttentionOpen)
		if !strings.Contains(it.Summary, "expired unanswered at "+expiry.Format(time.RFC3339)) {
			t.Errorf("summary %q does not name the expiry", it.Summary)
		}
		if w := f.work(id); w.Status != agentowl.WorkNeedsInput {
			t.Fatalf("work is %s, want needs_input", w.Status)
		}
		f.callback(ep, id, 2, "failed", map[string]any{"error": map[string]any{"message": "no answer"}})
		wantOverdue(t, f, id, 1, maintenance.RuleInputExpiry, agentowl.AttentionResolved)
	})
}

// An endpoint's own expectations replace the defaults: a shorter
// accept_within, a rule turned off.
func TestOverduePerEndpoint(t *testing.T) {
	forEachBackend(t, maintenance.Config{Overdue: maintenance.Expectations{ReportInterval: time.Hour}}, func(t *testing.T, f *fixture) {
		minute, off, no := time.Minute, time.Duration(0), false
		quick := f.endpoint(&agentowl.EndpointOverdue{AcceptWithin: &minute})
		quiet := f.endpoint(&agentowl.EndpointOverdue{AcceptWithin: &off, ReportInterval: &off, InputExpiry: &no})
		deflt := f.endpoint(nil)
		q, s, d := f.handOff(quick), f.handOff(quiet), f.handOff(deflt)
		f.deliverAll()
		f.clock.Advance(time.Minute)
		f.run(maintenance.JobOverdue)
		wantOverdue(t, f, q, 1, maintenance.RuleAcceptWithin, agentowl.AttentionOpen)
		wantOverdue(t, f, d, 0, "", "")
		f.callback(quiet, s, 1, "running", nil)
		f.callback(deflt, d, 1, "running", nil)
		f.clock.Advance(59 * time.Minute)
		f.run(maintenance.JobOverdue)
		wantOverdue(t, f, d, 0, "", "")
		f.clock.Advance(time.Minute) // the server's report_interval, an hour here
		f.run(maintenance.JobOverdue)
		wantOverdue(t, f, d, 1, maintenance.RuleReportInterval, agentowl.AttentionOpen)
		f.clock.Advance(30 * 24 * time.Hour)
		f.run(maintenance.JobOverdue)
		wantOverdue(t, f, s, 0, "", "")

		eff := f.sched.Effective(agentowl.EndpointOverdue{AcceptWithin: &minute})
		if eff.AcceptWithin != time.Minute || eff.ReportInterval != time.Hour || eff.InputExpiryOff {
			t.Errorf("effective expectations = %+v", eff)
		}
	})
}
