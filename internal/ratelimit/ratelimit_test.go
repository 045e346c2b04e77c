package ratelimit_test

import (
	"context"
	"errors"
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
