package maintenance

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/clocktest"
	"github.com/agentowl/agentowl/internal/store/storetest"
)

// replica is a scheduler without jobs: the leadership alone, ticked by
// hand, so a test can stop one as a crash would (no more ticks, no
// hand-back).
func replica(st agentowl.Store, clock *clocktest.Fake) *Scheduler {
	return &Scheduler{store: st, clock: clock, cfg: Config{}.withDefaults(), log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		owner: agentowl.NewID(""), running: map[string]bool{}, m: newMetrics()}
}

func leader(t *testing.T, s *Scheduler) *Leader {
	t.Helper()
	st, err := s.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st.Leader
}

// One replica leads at a time; a dead leader's lease lapses and another
// takes over within the lease, driven by the clock; a live leader keeps
// renewing, and a replica that stops cleanly hands the lease over at once.
func TestLeadership(t *testing.T) {
	for _, b := range storetest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			st := b.Open(t)
			clock := clocktest.New(time.Date(2026, 9, 16, 12, 0, 0, 0, time.UTC))
			ctx := context.Background()
			a, c := replica(st, clock), replica(st, clock)
			lease := a.cfg.Lease

			if l := leader(t, a); l != nil {
				t.Fatalf("before any tick the leader is %+v, want none", l)
			}
			a.tick(ctx)
			c.tick(ctx)
			if !a.Leading() || c.Leading() {
				t.Fatalf("after both ticked: a leads %v, c leads %v; want a alone", a.Leading(), c.Leading())
			}
			l := leader(t, c)
			if l == nil || l.Owner != a.owner || l.Self || !l.Until.Equal(clock.Now().Add(lease)) {
				t.Fatalf("c sees leader %+v, want a's lease until %s", l, clock.Now().Add(lease))
			}

			// A live leader renews once a third of its lease has passed, so
			// the follower never finds it lapsed.
			for range 6 {
				clock.Advance(lease / 3)
				a.tick(ctx)
				c.tick(ctx)
				if !a.Leading() || c.Leading() {
					t.Fatalf("at %s: a leads %v, c leads %v; want a alone while it renews", clock.Now(), a.Leading(), c.Leading())
				}
			}
			since := leader(t, a).Since
			if !since.Equal(time.Date(2026, 9, 16, 12, 0, 0, 0, time.UTC)) {
				t.Errorf("renewals moved the leader's start to %s", since)
			}

			// a dies: no more ticks. Until its lease lapses nobody else leads.
			clock.Advance(lease - time.Second)
			c.tick(ctx)
			if c.Leading() {
				t.Fatalf("c took the lease a second before it lapsed")
			}
			clock.Advance(time.Second)
			c.tick(ctx)
			if !c.Leading() {
				t.Fatalf("c did not take the lapsed lease")
			}
			if l := leader(t, a); l == nil || l.Owner != c.owner {
				t.Fatalf("leader after the hand-over = %+v, want c", l)
			}
			if a.Leading() {
				t.Errorf("a still believes it leads after its lease lapsed")
			}
			// a comes back: it follows.
			a.tick(ctx)
			if a.Leading() || !c.Leading() {
				t.Fatalf("after a's return: a leads %v, c leads %v; want c alone", a.Leading(), c.Leading())
			}

			// c stops cleanly: it hands the lease back and a leads at its
			// next tick, without waiting for the lease to lapse.
			c.stop()
			if l := leader(t, a); l != nil {
				t.Fatalf("after c handed the lease back the leader is %+v, want none", l)
			}
			a.tick(ctx)
			if !a.Leading() {
				t.Fatalf("a did not take the lease c handed back")
			}
		})
	}
}

// Defaults and bounds of the configuration.
func TestConfig(t *testing.T) {
	c := Config{}.withDefaults()
	if c.Overdue.AcceptWithin != 5*time.Minute || c.Overdue.ReportInterval != 30*time.Minute || c.Overdue.InputExpiryOff {
		t.Errorf("default expectations = %+v", c.Overdue)
	}
	if c.Intervals[JobExpiry] != time.Second || c.Intervals[JobRetention] != 10*time.Minute || c.Lease != 15*time.Second {
		t.Errorf("default intervals = %v, lease %s", c.Intervals, c.Lease)
	}
	off := Config{Overdue: Expectations{AcceptWithin: Off, ReportInterval: time.Hour}}.withDefaults()
	if off.Overdue.AcceptWithin != 0 || off.Overdue.ReportInterval != time.Hour {
		t.Errorf("Off and a set interval became %+v", off.Overdue)
	}
	for name, bad := range map[string]Config{
		"a lease shorter than three ticks": {Lease: 2 * time.Second, Tick: time.Second},
		"audit kept less than 30 days":     {Retention: Retention{Audit: 24 * time.Hour}},
		"an unknown job":                   {Intervals: map[string]time.Duration{"nope": time.Second}},
	} {
		if err := bad.withDefaults().validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if err := c.validate(); err != nil {
		t.Errorf("defaults refused: %v", err)
	}
}
