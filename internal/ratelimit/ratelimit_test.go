package ratelimit_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/clocktest"
	"github.com/agentowl/agentowl/internal/ratelimit"
	"github.com/agentowl/agentowl/internal/store/storetest"
)

// onEachStore runs test on a fresh store of each backend, in parallel,
// with a fake clock at start.
func onEachStore(t *testing.T, start time.Time, test func(t *testing.T, st agentowl.Store, clock *clocktest.Fake)) {
	for _, b := range storetest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			test(t, b.Open(t), clocktest.New(start))
		})
	}
}

// allowInTurn asks a and b for key in turn, n times in all, as two serve
// processes sharing a limit would; it returns how many were admitted and
// the wait of the last refusal.
func allowInTurn(ctx context.Context, a, b *ratelimit.Limiter, n int, key string) (admitted int, lastWait time.Duration) {
	for i := range n {
		l := a
		if i%2 == 1 {
			l = b
		}
		if ok, wait := l.Allow(ctx, key); ok {
			admitted++
		} else {
			lastWait = wait
		}
	}
	return admitted, lastWait
}

var t0 = time.Date(2026, 9, 16, 12, 0, 0, 0, time.UTC)

func TestLimitHoldsAcrossProcesses(t *testing.T) {
	onEachStore(t, t0, func(t *testing.T, st agentowl.Store, clock *clocktest.Fake) {
		limit := ratelimit.Limit{Events: 10, Per: time.Minute}
		// Two limiters on one database stand for two serve processes.
		a := ratelimit.New("test", limit, st, clock)
		c := ratelimit.New("test", limit, st, clock)
		ctx := context.Background()
		admitted, lastWait := allowInTurn(ctx, a, c, 40, "tenant-1")
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

func TestHighLimitsWriteInShares(t *testing.T) {
	onEachStore(t, t0, func(t *testing.T, st agentowl.Store, clock *clocktest.Fake) {
		limit := ratelimit.Limit{Events: 1000, Per: time.Minute}
		a := ratelimit.New("test", limit, st, clock)
		c := ratelimit.New("test", limit, st, clock)
		admitted, _ := allowInTurn(context.Background(), a, c, 3000, "k")
		// Each process may overshoot by at most one share (1000/20).
		if admitted < 1000 || admitted > 1000+2*50 {
			t.Fatalf("admitted %d, want 1000 to 1100", admitted)
		}
	})
}

// An event given back no longer counts, whether it was still in this
// process's tally (limits of 20 and more) or already in the shared count.
func TestReturnedEventsDoNotCount(t *testing.T) {
	for _, events := range []int{3, 40} {
		t.Run(strconv.Itoa(events), func(t *testing.T) {
			t.Parallel()
			onEachStore(t, t0, func(t *testing.T, st agentowl.Store, clock *clocktest.Fake) {
				limit := ratelimit.Limit{Events: events, Per: time.Minute}
				l := ratelimit.New("test", limit, st, clock)
				other := ratelimit.New("test", limit, st, clock)
				ctx := context.Background()
				for range events {
					tok, ok, _ := l.Take(ctx, "k")
					if !ok {
						t.Fatal("refused within the limit")
					}
					tok.Return(ctx)
				}
				admitted, _ := allowInTurn(ctx, l, other, 2*events, "k")
				// As in TestHighLimitsWriteInShares, each process may overshoot by a share.
				if admitted < events || admitted > events+2*(events/20) {
					t.Fatalf("after %d events given back, %d more were admitted of a limit of %d", events, admitted, events)
				}
			})
		})
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
	onEachStore(t, t0.Add(30*time.Second), func(t *testing.T, st agentowl.Store, clock *clocktest.Fake) {
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
