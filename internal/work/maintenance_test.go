package work

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/agentowl/agentowl/internal/clocktest"
	"github.com/agentowl/agentowl/internal/store/storetest"
)

// The maintenance loop sweeps on its interval and stops with its context.
func TestRunSweepsUntilCancelled(t *testing.T) {
	st := storetest.OpenSQLite(t)
	clock := clocktest.New(time.Date(2026, 9, 16, 12, 0, 0, 0, time.UTC))
	s := &Service{store: st, clock: clock, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	for clock.Waiters() == 0 { // synchronization: the loop parked on its timer
		time.Sleep(time.Millisecond)
	}
	clock.Advance(SweepInterval) // one sweep over an empty store
	for clock.Waiters() == 0 {   // and parked again: the sweep returned without error
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
}
