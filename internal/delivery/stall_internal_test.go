package delivery

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/clocktest"
)

// The stall detector: a slot deliberately leaked (taken, never released)
// shows in the metrics as held without an attempt, is reclaimed once held
// longer than any attempt lasts, and the engine's report in the store
// (which maintenance status and work-doctor read) says so. All of it
// within a minute of the leak with the default timings.
func TestEngineShowsLeakedSlot(t *testing.T) {
	EachStore(t, func(t *testing.T, st agentowl.Store) {
		clock := clocktest.New(time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC))
		e, err := New(st, clock, http.DefaultClient, Config{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			t.Fatal(err)
		}
		if within := e.maxHold() + slotIdle + heartbeat; within > time.Minute {
			t.Fatalf("a leak shows after %s, want within a minute", within)
		}
		// The report's pace is checked above; here it need not take
		// seconds of real time to reach the store.
		e.heartbeat = 50 * time.Millisecond
		ctx, stop := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { e.Run(ctx); close(done) }()
		t.Cleanup(func() { stop(); <-done })

		leaked, ok, _ := e.destSlots.acquire(ctx, accountKey("t1"))
		if !ok {
			t.Fatal("no slot")
		}
		reg := prometheus.NewRegistry()
		reg.MustRegister(e.Metrics().Collectors(st)...)
		gauge := func(kind, state string) float64 {
			t.Helper()
			const name = "agentowl_delivery_slots_held"
			fams, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range fams {
				for _, m := range f.GetMetric() {
					labels := map[string]string{}
					for _, l := range m.GetLabel() {
						labels[l.GetName()] = l.GetValue()
					}
					if f.GetName() == name && labels["kind"] == kind && labels["state"] == state {
						return m.GetGauge().GetValue()
					}
				}
			}
			t.Fatalf("%s{kind=%q,state=%q} not served", name, kind, state)
			return 0
		}
		if got := gauge("account", "busy"); got != 1 {
			t.Fatalf("busy account slots %v, want the leaked one", got)
		}
		// Held longer than any attempt lasts (the slot's age is real
		// time; the test moves its start back rather than wait).
		e.destSlots.mu.Lock()
		leaked.lease.since = time.Now().Add(-e.maxHold() + 50*time.Millisecond)
		e.destSlots.mu.Unlock()
		waitFor(t, "the leaked slot reported and reclaimed", func() bool {
			return e.reclaimed.Load() == 1
		})
		if got := gauge("account", "stale"); got != 0 {
			t.Errorf("stale account slots %v after the reclaim, want 0", got)
		}
		if got := gauge("account", "idle") + gauge("account", "busy"); got > 1 {
			t.Errorf("account slots held %v after the reclaim, want at most the one idle slot", got)
		}
		// The report in the store, for every replica's status.
		waitFor(t, "the engine's report of the reclaimed slot", func() bool {
			var rs []*agentowl.EngineReport
			_ = st.Read(ctx, func(tx agentowl.Tx) (err error) { rs, err = tx.EngineList(ctx); return err })
			return len(rs) == 1 && rs[0].SlotsReclaimed == 1 && rs[0].Owner == e.owner
		})
		// A clean stop removes the report.
		stop()
		<-done
		var rs []*agentowl.EngineReport
		if err := st.Read(context.Background(), func(tx agentowl.Tx) (err error) { rs, err = tx.EngineList(context.Background()); return err }); err != nil || len(rs) != 0 {
			t.Fatalf("reports after a clean stop: %v %v, want none", rs, err)
		}
	})
}

// waitFor polls cond (synchronization with the engine's goroutines, not a
// timing assertion) for up to a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}
