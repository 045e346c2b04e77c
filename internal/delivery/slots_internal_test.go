package delivery

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

// A slot given up because its lease ran short is handed back, and it is
// not renewed meanwhile, so another process can have it before the lease
// would lapse; the slots this process still uses are renewed.
func TestSharedSlotsHandBackWhatTheyGiveUp(t *testing.T) {
	EachStore(t, func(t *testing.T, st agentowl.Store) {
		s, clock := newTestSlots(t, st, 1)
		ctx := context.Background()
		take := func(key string) heldSlot {
			t.Helper()
			h, ok, _ := s.acquire(ctx, key)
			if !ok {
				t.Fatalf("no slot of %s", key)
			}
			return h
		}
		otherLeases := func(key string) int {
			t.Helper()
			var got []int
			err := st.Write(ctx, func(tx agentowl.Tx) (err error) {
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
		gone, cancel := context.WithCancel(ctx)
		cancel()
		if _, ok, _ := s.acquire(gone, "host:k"); ok {
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
		if j2 := s.keys["host:j"].held[j.lease.n]; j2 != j.lease || !j2.until.After(k.lease.until) {
			t.Fatalf("j's lease was not renewed: %+v", j2)
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

// newTestSlots is sharedSlots of owner p1 on st, limit slots per key, with
// a 30 s lease and a driven clock.
func newTestSlots(t *testing.T, st agentowl.Store, limit int) (*sharedSlots, *clocktest.Fake) {
	t.Helper()
	clock := clocktest.New(time.Date(2026, 9, 16, 12, 0, 0, 0, time.UTC))
	s := newSharedSlots(st, clock, slog.New(slog.NewTextHandler(io.Discard, nil)), "p1", func(string) int { return limit }, 30*time.Second, 15*time.Second)
	t.Cleanup(func() { s.cancel(); s.lessor.Wait() })
	return s, clock
}

// The regression of issue 25: a slot renewed while an attempt holds it is
// released like any other. Before the fix, renewal moved the lease end that
// release compared, the release was ignored, and the slot stayed busy for
// ever: after about 15 s of continuous use a destination had no slot left.
func TestSharedSlotsReleaseAfterRenewal(t *testing.T) {
	EachStore(t, func(t *testing.T, st agentowl.Store) {
		s, clock := newTestSlots(t, st, 1)
		ctx := context.Background()
		h, ok, _ := s.acquire(ctx, "host:k")
		if !ok {
			t.Fatal("no slot")
		}
		before := h.lease.until
		clock.Advance(s.lease/3 + time.Second) // over a third of the lease: renewal is due
		s.renew()
		if !h.lease.until.After(before) {
			t.Fatal("the busy slot's lease was not renewed")
		}
		// Another attempt waits for the key's only slot; the release
		// hands it over.
		got := make(chan heldSlot, 1)
		go func() {
			w, ok, _ := s.acquire(ctx, "host:k")
			if ok {
				got <- w
			}
			close(got)
		}()
		for waiting := false; !waiting; time.Sleep(time.Millisecond) { // synchronization, not a timing assertion
			s.mu.Lock()
			waiting = len(s.keys["host:k"].waiters) == 1
			s.mu.Unlock()
		}
		s.release(h)
		w, ok := <-got
		if !ok || w.lease != h.lease {
			t.Fatalf("the waiter did not get the released slot: %+v", w)
		}
		s.release(w)
		if c := s.counts(time.Hour)["host"]; c != (slotCounts{Idle: 1}) {
			t.Fatalf("after both releases: %+v, want one idle slot", c)
		}
		// Reused without a new lease: the same slot, the same lease.
		again, ok, _ := s.acquire(ctx, "host:k")
		if !ok || again.lease != h.lease {
			t.Fatalf("the idle slot was not reused: %+v", again)
		}
	})
}

// A release of an earlier taking changes nothing: a double release, or a
// late one after the slot was reclaimed, cannot free a slot another attempt
// uses.
func TestSharedSlotsStaleReleaseIsIgnored(t *testing.T) {
	st := storetest.Backends(t)[0].Open(t)
	s, _ := newTestSlots(t, st, 1)
	ctx := context.Background()
	first, _, _ := s.acquire(ctx, "host:k")
	s.release(first)
	second, ok, _ := s.acquire(ctx, "host:k")
	if !ok || second.lease != first.lease {
		t.Fatal("the slot was not reused")
	}
	s.release(first) // late: the slot is second's now
	if c := s.counts(time.Hour)["host"]; c != (slotCounts{Busy: 1}) {
		t.Fatalf("a stale release freed a busy slot: %+v", c)
	}
	s.release(second)
	s.release(second)
	if c := s.counts(time.Hour)["host"]; c != (slotCounts{Idle: 1}) {
		t.Fatalf("after a double release: %+v, want one idle slot", c)
	}
}

// A slot lost by its holder (an injected leak: taken, never released) is
// reported as stale once held longer than any attempt lasts, reclaimed, and
// handed to the next attempt; the lost holder's late release is ignored.
func TestSharedSlotsReclaimLeakedSlot(t *testing.T) {
	EachStore(t, func(t *testing.T, st agentowl.Store) {
		s, _ := newTestSlots(t, st, 1)
		ctx := context.Background()
		leaked, _, _ := s.acquire(ctx, "account:t")
		const maxHold = time.Minute
		var reported []string
		s.reclaimStale(maxHold, func(key string, _ time.Duration) { reported = append(reported, key) })
		if len(reported) != 0 {
			t.Fatal("a slot in use was reclaimed")
		}
		s.mu.Lock()
		leaked.lease.since = time.Now().Add(-maxHold - time.Second) // held past any attempt
		s.mu.Unlock()
		if c := s.counts(maxHold)["account"]; c != (slotCounts{Busy: 1, Stale: 1}) {
			t.Fatalf("counts before reclaiming: %+v, want one busy, stale slot", c)
		}
		short, cancel := context.WithCancel(ctx)
		cancel()
		if _, ok, _ := s.acquire(short, "account:t"); ok {
			t.Fatal("a leaked slot was handed out before it was reclaimed")
		}
		s.reclaimStale(maxHold, func(key string, _ time.Duration) { reported = append(reported, key) })
		if len(reported) != 1 || reported[0] != "account:t" {
			t.Fatalf("reported %v, want the leaked slot", reported)
		}
		next, ok, _ := s.acquire(ctx, "account:t")
		if !ok || next.lease != leaked.lease {
			t.Fatal("the reclaimed slot was not reused")
		}
		s.release(leaked) // the lost holder comes back: ignored
		if c := s.counts(maxHold)["account"]; c != (slotCounts{Busy: 1}) {
			t.Fatalf("the lost holder's release freed a slot in use: %+v", c)
		}
	})
}

// Pacing: with a key's slots busy, an attempt whose wait would be short
// waits; the next ones are sent away at once, each with a turn after the
// last by the key's hold time over its slots (the pace the destination
// frees them), so a slow destination's backlog neither holds the engine's
// concurrency nor comes back all at once.
func TestSharedSlotsPaceABusyKey(t *testing.T) {
	st := storetest.Backends(t)[0].Open(t)
	s, _ := newTestSlots(t, st, 2)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for range 2 {
		if _, ok, _ := s.acquire(ctx, "host:slow"); !ok {
			t.Fatal("no slot")
		}
	}
	s.mu.Lock()
	s.keys["host:slow"].hold = 200 * time.Millisecond // measured from earlier attempts
	s.mu.Unlock()
	// Two waits of 100 and 200 ms (under maxSlotWait) wait here.
	waiting := make(chan bool, 2)
	for range 2 {
		go func() {
			_, ok, _ := s.acquire(ctx, "host:slow")
			waiting <- ok
		}()
	}
	for n := 0; n < 2; time.Sleep(time.Millisecond) { // synchronization, not a timing assertion
		s.mu.Lock()
		n = len(s.keys["host:slow"].waiters)
		s.mu.Unlock()
	}
	// The rest are sent away with turns 75 ms apart (200 ms / 2 slots, a
	// quarter faster: turnPace), the first after the two waiting: 300 ms.
	var turns []time.Duration
	for range 4 {
		_, ok, turn := s.acquire(ctx, "host:slow")
		if ok || turn <= 0 {
			t.Fatalf("an attempt that would wait %s was not sent away (turn %s)", 300*time.Millisecond, turn)
		}
		turns = append(turns, turn)
	}
	if turns[0] < 290*time.Millisecond || turns[0] > 300*time.Millisecond {
		t.Errorf("first turn %s, want 300ms: after the two waiting", turns[0])
	}
	for i := 1; i < len(turns); i++ {
		// Each turn is the last one's plus 75 ms, less the real time
		// between the two calls.
		if gap := turns[i] - turns[i-1]; gap < 65*time.Millisecond || gap > 75*time.Millisecond {
			t.Errorf("turn %d is %s after the one before, want 75ms (turns %v)", i, gap, turns)
		}
	}
	cancel()
	for range 2 {
		<-waiting
	}
}
