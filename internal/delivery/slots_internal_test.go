package delivery

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/agentowl/agentowl/internal/clocktest"
	"github.com/agentowl/agentowl/internal/store"
	"github.com/agentowl/agentowl/internal/store/storetest"
)

// A slot given up because its lease ran short is handed back, and it is
// not renewed meanwhile, so another process can have it before the lease
// would lapse; the slots this process still uses are renewed.
func TestSharedSlotsHandBackWhatTheyGiveUp(t *testing.T) {
	for _, b := range storetest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			st := b.Open(t)
			clock := clocktest.New(time.Date(2026, 9, 16, 12, 0, 0, 0, time.UTC))
			s := newSharedSlots(st, clock, slog.New(slog.NewTextHandler(io.Discard, nil)), "p1", func(string) int { return 1 }, 30*time.Second, 15*time.Second)
			t.Cleanup(func() { s.cancel(); s.lessor.Wait() })
			ctx := context.Background()
			never := make(chan time.Time)
			take := func(key string) heldSlot {
				t.Helper()
				h, ok := s.acquire(ctx, key, never)
				if !ok {
					t.Fatalf("no slot of %s", key)
				}
				return h
			}
			otherLeases := func(key string) int {
				t.Helper()
				var got []int
				err := st.Write(ctx, func(tx store.Tx) (err error) {
					got, err = tx.SlotLease(ctx, key, "p2", 1, 1, clock.Now(), clock.Now().Add(time.Minute))
					return err
				})
				if err != nil {
					t.Fatal(err)
				}
				return len(got)
			}

			k, j := take("host:k"), take("host:j")
			s.release(k)
			// Housekeeping fell behind (a big step of the clock): both
			// leases run short; the next attempt gives k up.
			clock.Advance(s.lease - s.minLeft + time.Second)
			gone := make(chan time.Time)
			close(gone)
			if _, ok := s.acquire(ctx, "host:k", gone); ok {
				t.Fatal("a slot with too little lease left was used")
			}
			// The lease loop that the attempt started ends with no one
			// waiting (synchronization, not a timing assertion).
			for leasing := true; leasing; time.Sleep(time.Millisecond) {
				s.mu.Lock()
				leasing = s.keys["host:k"].leasing
				s.mu.Unlock()
			}
			s.renew() // renews j, must not renew k
			if j2 := s.keys["host:j"].held[j.n]; !j2.After(j.until) {
				t.Fatalf("j's lease was not renewed: %v", j2)
			}
			s.releaseIdle(false) // hands k back
			if otherLeases("host:k") != 1 {
				t.Fatal("another process cannot lease the slot this one gave up")
			}
			if otherLeases("host:j") != 0 {
				t.Fatal("another process leased a slot this one holds")
			}
		})
	}
}
