package ratelimit_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/clocktest"
	"github.com/agentowl/agentowl/internal/ratelimit"
	"github.com/agentowl/agentowl/internal/store/storetest"
)

func TestLimitHoldsAcrossProcesses(t *testing.T) {
	for _, b := range storetest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			st := b.Open(t)
			clock := clocktest.New(time.Date(2026, 9, 16, 12, 0, 0, 0, time.UTC))
			limit := ratelimit.Limit{Events: 10, Per: time.Minute}
			// Two limiters on one database stand for two serve processes.
			a := ratelimit.New("test", limit, st, clock)
			c := ratelimit.New("test", limit, st, clock)
			ctx := context.Background()
			admitted := 0
			var lastWait time.Duration
			for i := range 40 {
				l := a
				if i%2 == 1 {
					l = c
				}
				if ok, wait := l.Allow(ctx, "tenant-1"); ok {
					admitted++
				} else {
					lastWait = wait
				}
			}
			if admitted != 10 {
				t.Fatalf("admitted %d events, want exactly the limit of 10 across both processes", admitted)
			}
			// The shared count holds what was admitted, not the refusals.
			var counted int64
			if err := st.Write(ctx, func(tx agentowl.Tx) (err error) {
				counted, err = tx.CounterAdd(ctx, "test:tenant-1", clock.Now().Truncate(time.Minute), 0)
				return err
			}); err != nil || counted != 10 {
				t.Fatalf("the shared count is %d (%v), want the 10 admitted", counted, err)
			}
			if lastWait <= 0 || lastWait > time.Minute {
				t.Fatalf("retry after %v, want until the window ends", lastWait)
			}
			if ok, _ := a.Allow(ctx, "tenant-2"); !ok {
				t.Fatal("another key shares the first key's window")
			}
			clock.Advance(time.Minute)
			if ok, _ := c.Allow(ctx, "tenant-1"); !ok {
				t.Fatal("a new window does not admit again")
			}
		})
	}
}

func TestHighLimitsWriteInShares(t *testing.T) {
	for _, b := range storetest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			st := b.Open(t)
			clock := clocktest.New(time.Date(2026, 9, 16, 12, 0, 0, 0, time.UTC))
			a := ratelimit.New("test", ratelimit.Limit{Events: 1000, Per: time.Minute}, st, clock)
			c := ratelimit.New("test", ratelimit.Limit{Events: 1000, Per: time.Minute}, st, clock)
			admitted := 0
			for i := range 3000 {
				l := a
				if i%2 == 1 {
					l = c
				}
				if ok, _ := l.Allow(context.Background(), "k"); ok {
					admitted++
				}
			}
			// Each process may overshoot by at most one share (1000/20).
			if admitted < 1000 || admitted > 1000+2*50 {
				t.Fatalf("admitted %d, want 1000 to 1100", admitted)
			}
		})
	}
}

// An event given back no longer counts, whether it was still in this
// process's tally (limits of 20 and more) or already in the shared count.
func TestReturnedEventsDoNotCount(t *testing.T) {
	for _, b := range storetest.Backends(t) {
		for _, events := range []int{3, 40} {
			t.Run(fmt.Sprintf("%s/%d", b.Name, events), func(t *testing.T) {
				t.Parallel()
				st := b.Open(t)
				clock := clocktest.New(time.Date(2026, 9, 16, 12, 0, 0, 0, time.UTC))
				l := ratelimit.New("test", ratelimit.Limit{Events: events, Per: time.Minute}, st, clock)
				other := ratelimit.New("test", ratelimit.Limit{Events: events, Per: time.Minute}, st, clock)
				ctx := context.Background()
				for range events {
					tok, ok, _ := l.Take(ctx, "k")
					if !ok {
						t.Fatal("refused within the limit")
					}
					tok.Return(ctx)
				}
				admitted := 0
				for i := range 2 * events {
					p := l
					if i%2 == 1 {
						p = other
					}
					if ok, _ := p.Allow(ctx, "k"); ok {
						admitted++
					}
				}
				// As in TestHighLimitsWriteInShares, each process may overshoot by a share.
				if admitted < events || admitted > events+2*(events/20) {
					t.Fatalf("after %d events given back, %d more were admitted of a limit of %d", events, admitted, events)
				}
			})
		}
	}
}

func TestErrorCarriesRetryAfter(t *testing.T) {
	err := ratelimit.Error("things", 2500*time.Millisecond)
	var ae *agentowl.Error
	if !errors.As(err, &ae) || ae.Code != agentowl.ECodeRateLimited || ae.RetryAfter != 3*time.Second {
		t.Fatalf("got %#v", err)
	}
}

func TestZeroLimitIsUnlimited(t *testing.T) {
	var l *ratelimit.Limiter
	if ok, _ := l.Allow(context.Background(), "k"); !ok {
		t.Fatal("nil limiter refused")
	}
}

// Used reads what every process recorded in the current and the previous
// window, without counting anything itself.
func TestUsed(t *testing.T) {
	for _, b := range storetest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			st := b.Open(t)
			clock := clocktest.New(time.Date(2026, 9, 16, 12, 0, 30, 0, time.UTC))
			// A limit under 20 adds every event to the shared count at once.
			a := ratelimit.New("test", ratelimit.Limit{Events: 10, Per: time.Minute}, st, clock)
			ctx := context.Background()
			used := func() (int64, int64) {
				t.Helper()
				cur, prev, err := a.Used(ctx, "k")
				if err != nil {
					t.Fatal(err)
				}
				return cur, prev
			}
			if cur, prev := used(); cur != 0 || prev != 0 {
				t.Fatalf("before any event: %d, %d", cur, prev)
			}
			for range 4 {
				a.Allow(ctx, "k")
			}
			if cur, prev := used(); cur != 4 || prev != 0 {
				t.Fatalf("after 4 events: current %d, previous %d", cur, prev)
			}
			clock.Advance(time.Minute)
			a.Allow(ctx, "k")
			if cur, prev := used(); cur != 1 || prev != 4 {
				t.Fatalf("in the next window: current %d, previous %d; want 1 and 4", cur, prev)
			}
			if cur, prev := used(); cur != 1 || prev != 4 {
				t.Fatalf("Used counted itself: current %d, previous %d", cur, prev)
			}
			if got := a.Limit(); got.Events != 10 || got.Per != time.Minute {
				t.Fatalf("Limit() = %+v", got)
			}
		})
	}
}
