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
//
// Every lease is told from the slot's other leases by its end time, so a
// holder whose lease lapsed can neither renew, hand back nor reuse a slot
// that has been leased again since.
type sharedSlots struct {
	store store.Store
	clock agentowl.Clock
	log   *slog.Logger
	owner string
	limit func(key string) int // how many slots key has
	lease time.Duration        // length of a lease
	// minLeft is the lease time a slot must have left to start an attempt,
	// so an attempt always ends before its slot's lease could lapse.
	minLeft time.Duration

	ctx    context.Context // ends when the engine stops
	cancel context.CancelFunc
	lessor sync.WaitGroup // leaseFor goroutines

	mu      sync.Mutex
	keys    map[string]*keySlots
	dropped []store.Slot // leases given up here, to hand back
}

// keySlots is this process's part of one key's slots.
type keySlots struct {
	held     map[int]time.Time // slot → end of its lease
	free     []int             // held and idle
	waiters  []chan heldSlot   // attempts waiting for a slot, oldest first
	leasing  bool              // a lease loop is running for the waiters
	made     bool              // the key's slot rows exist
	lastUsed time.Time         // wall time a slot was last taken or given back
}

// heldSlot is one leased slot as an attempt holds it.
type heldSlot struct {
	key   string
	n     int
	until time.Time
}

// slotIdle is how long a process keeps a key's idle slots before handing
// them back; slotRetry is how soon it asks again when every slot is taken.
const (
	slotIdle  = 200 * time.Millisecond
	slotRetry = 20 * time.Millisecond
)

// newSharedSlots returns the slots of keys, limit(key) of each. A slot must
// have minLeft of its lease left to start an attempt; leases are renewed
// when a third of them has passed, so they are at least three times
// minLeft.
func newSharedSlots(st store.Store, clock agentowl.Clock, log *slog.Logger, owner string, limit func(key string) int, lease, minLeft time.Duration) *sharedSlots {
	ctx, cancel := context.WithCancel(context.Background())
	return &sharedSlots{store: st, clock: clock, log: log, owner: owner, limit: limit, lease: max(lease, 3*minLeft),
		minLeft: minLeft, ctx: ctx, cancel: cancel, keys: map[string]*keySlots{}}
}

func (s *sharedSlots) key(k string) *keySlots {
	ks := s.keys[k]
	if ks == nil {
		ks = &keySlots{held: map[int]time.Time{}}
		s.keys[k] = ks
	}
	return ks
}

// usable reports whether slot n of key may start an attempt now. A slot
// whose lease is too short is given up and handed back.
func (s *sharedSlots) usable(key string, ks *keySlots, n int, now time.Time) bool {
	end, ok := ks.held[n]
	if !ok {
		return false
	}
	if end.Sub(now) >= s.minLeft {
		return true
	}
	delete(ks.held, n)
	s.dropped = append(s.dropped, store.Slot{Key: key, N: n, Until: end})
	return false
}

// acquire takes one slot of key, waiting until give fires or ctx ends.
func (s *sharedSlots) acquire(ctx context.Context, key string, give <-chan time.Time) (heldSlot, bool) {
	s.mu.Lock()
	ks := s.key(key)
	now := s.clock.Now()
	for len(ks.free) > 0 {
		n := ks.free[len(ks.free)-1]
		ks.free = ks.free[:len(ks.free)-1]
		if s.usable(key, ks, n, now) {
			ks.lastUsed = time.Now()
			h := heldSlot{key: key, n: n, until: ks.held[n]}
			s.mu.Unlock()
			return h, true
		}
	}
	ch := make(chan heldSlot, 1) // a slot is handed over under s.mu, never blocking
	ks.waiters = append(ks.waiters, ch)
	if !ks.leasing && s.ctx.Err() == nil {
		ks.leasing = true
		s.lessor.Add(1)
		go s.leaseFor(key, ks)
	}
	s.mu.Unlock()
	select {
	case h := <-ch:
		return h, true
	case <-give:
	case <-ctx.Done():
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if i := slices.Index(ks.waiters, ch); i >= 0 {
		ks.waiters = slices.Delete(ks.waiters, i, i+1)
		return heldSlot{}, false
	}
	return <-ch, true // handed over just as the wait ended
}

// release gives a slot back: to the oldest waiter, or to the pool. A slot
// leased again since h's lease lapsed is not h's any more.
func (s *sharedSlots) release(h heldSlot) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ks := s.key(h.key)
	if end, ok := ks.held[h.n]; !ok || !end.Equal(h.until) || !s.usable(h.key, ks, h.n, s.clock.Now()) {
		return
	}
	ks.lastUsed = time.Now()
	if len(ks.waiters) > 0 {
		ch := ks.waiters[0]
		ks.waiters = ks.waiters[1:]
		ch <- h
		return
	}
	ks.free = append(ks.free, h.n)
}

// leaseFor leases slots from the store for key's waiters until none waits.
func (s *sharedSlots) leaseFor(key string, ks *keySlots) {
	defer s.lessor.Done()
	for {
		s.mu.Lock()
		want, made := len(ks.waiters), ks.made
		if want == 0 || s.ctx.Err() != nil {
			ks.leasing = false
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		now := s.clock.Now()
		until := now.Add(s.lease)
		var got []int
		err := s.store.Write(s.ctx, func(tx store.Tx) (err error) {
			if !made {
				if err := tx.SlotsMake(s.ctx, key, s.limit(key)); err != nil {
					return err
				}
			}
			got, err = tx.SlotLease(s.ctx, key, s.owner, s.limit(key), want, now, until)
			return err
		})
		if err != nil && s.ctx.Err() == nil {
			s.log.Error("lease destination slots", "key", key, "err", err)
		}
		s.mu.Lock()
		ks.made = ks.made || err == nil
		for _, n := range got {
			ks.held[n] = until
			if len(ks.waiters) > 0 {
				ch := ks.waiters[0]
				ks.waiters = ks.waiters[1:]
				ch <- heldSlot{key: key, n: n, until: until}
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
			case <-s.ctx.Done():
			}
		}
	}
}

// run renews the held leases and hands back idle slots until ctx ends;
// then, once every attempt is over, it hands back every slot.
func (s *sharedSlots) run(ctx context.Context) {
	tick := time.NewTicker(slotIdle / 2) // real time: housekeeping, not a schedule
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			s.cancel()
			s.lessor.Wait()
			s.releaseIdle(true)
			return
		case <-tick.C:
			s.renew()
			s.releaseIdle(false)
		}
	}
}

// renew extends every held lease once some lease is a third over; slots
// whose lease the store no longer has as given are forgotten.
func (s *sharedSlots) renew() {
	now := s.clock.Now()
	s.mu.Lock()
	var held []store.Slot
	due := false
	for key, ks := range s.keys {
		for n, end := range ks.held {
			held = append(held, store.Slot{Key: key, N: n, Until: end})
			due = due || end.Sub(now) < s.lease*2/3
		}
	}
	s.mu.Unlock()
	if !due {
		return
	}
	until := now.Add(s.lease)
	var kept []store.Slot
	err := s.store.Write(s.ctx, func(tx store.Tx) (err error) {
		kept, err = tx.SlotRenew(s.ctx, s.owner, held, now, until)
		return err
	})
	if err != nil {
		if s.ctx.Err() == nil {
			s.log.Error("renew destination slots", "err", err)
		}
		return // leases run out in time; usable stops using them first
	}
	renewed := map[store.Slot]bool{}
	for _, sl := range kept {
		renewed[store.Slot{Key: sl.Key, N: sl.N}] = true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sl := range held {
		ks := s.keys[sl.Key]
		if ks == nil || !ks.held[sl.N].Equal(sl.Until) {
			continue // handed back or given up meanwhile
		}
		if renewed[store.Slot{Key: sl.Key, N: sl.N}] {
			ks.held[sl.N] = until
		} else {
			delete(ks.held, sl.N)
			ks.free = slices.DeleteFunc(ks.free, func(n int) bool { return n == sl.N })
		}
	}
}

// releaseIdle hands back the slots given up here and those of keys that
// nothing here has used for slotIdle (all of them when all is set), and
// forgets keys with no slot.
func (s *sharedSlots) releaseIdle(all bool) {
	s.mu.Lock()
	back := s.dropped
	s.dropped = nil
	for key, ks := range s.keys {
		busy := len(ks.held) - len(ks.free)
		if all || (busy == 0 && len(ks.waiters) == 0 && time.Since(ks.lastUsed) >= slotIdle) {
			for _, n := range ks.free {
				back = append(back, store.Slot{Key: key, N: n, Until: ks.held[n]})
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
