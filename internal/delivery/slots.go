package delivery

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/store"
)

// sharedSlots bounds the attempts in flight per destination key (host:port,
// resolved address) across every process sharing the database. Slots are
// rows in the store that a process leases for a while. A process keeps the
// slots it leased in a local pool and reuses them attempt after attempt, so
// a busy destination costs one lease write per burst rather than one per
// attempt. Leases are renewed while held and handed back once nothing here
// has used them for a moment, so other processes can take them; the slots
// of a process that died come free when their lease lapses.
type sharedSlots struct {
	store store.Store
	clock agentowl.Clock
	log   *slog.Logger
	owner string
	limit int
	lease time.Duration // length of a lease
	// minLeft is the lease time a slot must have left to start an attempt,
	// so an attempt always ends before its slot's lease could lapse.
	minLeft time.Duration

	mu   sync.Mutex
	keys map[string]*keySlots
}

// keySlots is this process's part of one key's slots.
type keySlots struct {
	held     map[int]time.Time // slot → end of its lease
	free     []int             // held and idle
	waiters  []chan int        // attempts waiting for a slot, oldest first
	leasing  bool              // a lease loop is running for the waiters
	lastUsed time.Time         // wall time a slot was last taken or given back
}

// slotIdle is how long a process keeps a key's idle slots before handing
// them back; slotRetry is how soon it asks again when every slot is taken.
const (
	slotIdle  = 200 * time.Millisecond
	slotRetry = 20 * time.Millisecond
)

func newSharedSlots(st store.Store, clock agentowl.Clock, log *slog.Logger, owner string, limit int, lease, minLeft time.Duration) *sharedSlots {
	return &sharedSlots{store: st, clock: clock, log: log, owner: owner, limit: limit, lease: lease, minLeft: minLeft,
		keys: map[string]*keySlots{}}
}

func (s *sharedSlots) key(k string) *keySlots {
	ks := s.keys[k]
	if ks == nil {
		ks = &keySlots{held: map[int]time.Time{}}
		s.keys[k] = ks
	}
	return ks
}

// usable reports whether slot n of ks may start an attempt now; a slot
// whose lease is too short is forgotten (it lapses in the store).
func (s *sharedSlots) usable(ks *keySlots, n int, now time.Time) bool {
	if end, ok := ks.held[n]; ok && end.Sub(now) >= s.minLeft {
		return true
	}
	delete(ks.held, n)
	return false
}

// acquire takes one slot of key, waiting until give is closed or ctx ends.
func (s *sharedSlots) acquire(ctx context.Context, key string, give <-chan time.Time) (int, bool) {
	s.mu.Lock()
	ks := s.key(key)
	now := s.clock.Now()
	for len(ks.free) > 0 {
		n := ks.free[len(ks.free)-1]
		ks.free = ks.free[:len(ks.free)-1]
		if s.usable(ks, n, now) {
			ks.lastUsed = time.Now()
			s.mu.Unlock()
			return n, true
		}
	}
	ch := make(chan int, 1) // a slot is handed over under s.mu, never blocking
	ks.waiters = append(ks.waiters, ch)
	if !ks.leasing {
		ks.leasing = true
		go s.leaseFor(ctx, key, ks)
	}
	s.mu.Unlock()
	select {
	case n := <-ch:
		return n, true
	case <-give:
	case <-ctx.Done():
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if i := slices.Index(ks.waiters, ch); i >= 0 {
		ks.waiters = slices.Delete(ks.waiters, i, i+1)
		return 0, false
	}
	return <-ch, true // handed over just as the wait ended
}

// release gives slot n of key back: to the oldest waiter, or to the pool.
func (s *sharedSlots) release(key string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ks := s.key(key)
	if !s.usable(ks, n, s.clock.Now()) {
		return // the lease was lost or is ending; waiters lease anew
	}
	ks.lastUsed = time.Now()
	if len(ks.waiters) > 0 {
		ch := ks.waiters[0]
		ks.waiters = ks.waiters[1:]
		ch <- n
		return
	}
	ks.free = append(ks.free, n)
}

// leaseFor leases slots from the store for key's waiters until none waits.
func (s *sharedSlots) leaseFor(ctx context.Context, key string, ks *keySlots) {
	for {
		s.mu.Lock()
		want := len(ks.waiters)
		if want == 0 || ctx.Err() != nil {
			ks.leasing = false
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		now := s.clock.Now()
		until := now.Add(s.lease)
		var got []int
		err := s.store.Write(ctx, func(tx store.Tx) (err error) {
			got, err = tx.SlotLease(ctx, key, s.owner, s.limit, want, now, until)
			return err
		})
		if err != nil && ctx.Err() == nil {
			s.log.Error("lease destination slots", "key", key, "err", err)
		}
		s.mu.Lock()
		for _, n := range got {
			ks.held[n] = until
			if len(ks.waiters) > 0 {
				ch := ks.waiters[0]
				ks.waiters = ks.waiters[1:]
				ch <- n
			} else {
				ks.free = append(ks.free, n)
			}
		}
		ks.lastUsed = time.Now()
		s.mu.Unlock()
		if len(got) < want {
			// Every slot is taken, here or by another process: ask again
			// soon (real time: a wait for a slot, not a schedule).
			select {
			case <-time.After(slotRetry):
			case <-ctx.Done():
			}
		}
	}
}

// run renews the held leases and hands back idle slots until ctx ends,
// then hands back every slot.
func (s *sharedSlots) run(ctx context.Context) {
	tick := time.NewTicker(slotIdle / 2) // real time: housekeeping, not a schedule
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			s.releaseIdle(true)
			return
		case <-tick.C:
			s.renew(ctx)
			s.releaseIdle(false)
		}
	}
}

// renew extends every held lease once some lease is half over; slots whose
// lease the store no longer has are forgotten.
func (s *sharedSlots) renew(ctx context.Context) {
	now := s.clock.Now()
	s.mu.Lock()
	due := false
	for _, ks := range s.keys {
		for _, end := range ks.held {
			due = due || end.Sub(now) < s.lease/2
		}
	}
	s.mu.Unlock()
	if !due {
		return
	}
	until := now.Add(s.lease)
	var kept []store.Slot
	err := s.store.Write(ctx, func(tx store.Tx) (err error) {
		kept, err = tx.SlotRenew(ctx, s.owner, now, until)
		return err
	})
	if err != nil {
		if ctx.Err() == nil {
			s.log.Error("renew destination slots", "err", err)
		}
		return // leases run out in time; usable stops using them first
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	still := map[store.Slot]bool{}
	for _, sl := range kept {
		still[sl] = true
	}
	for key, ks := range s.keys {
		for n := range ks.held {
			if still[store.Slot{Key: key, N: n}] {
				ks.held[n] = until
			} else {
				delete(ks.held, n)
			}
		}
		ks.free = slices.DeleteFunc(ks.free, func(n int) bool { _, ok := ks.held[n]; return !ok })
	}
}

// releaseIdle hands back the slots of keys that nothing here has used for
// slotIdle (all of them when all is set) and forgets keys with no slot.
func (s *sharedSlots) releaseIdle(all bool) {
	s.mu.Lock()
	var back []store.Slot
	for key, ks := range s.keys {
		busy := len(ks.held) - len(ks.free)
		if all || (busy == 0 && len(ks.waiters) == 0 && time.Since(ks.lastUsed) >= slotIdle) {
			for _, n := range ks.free {
				back = append(back, store.Slot{Key: key, N: n})
				delete(ks.held, n)
			}
			ks.free = nil
		}
		if len(ks.held) == 0 && len(ks.waiters) == 0 && !ks.leasing {
			delete(s.keys, key)
		}
	}
	s.mu.Unlock()
	if len(back) == 0 {
		return
	}
	err := s.store.Write(context.Background(), func(tx store.Tx) error { return tx.SlotRelease(context.Background(), s.owner, back) })
	if err != nil {
		s.log.Error("release destination slots", "err", err)
	}
}
