package delivery

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentowl/agentowl"
)

// sharedSlots bounds the attempts in flight per destination key (host:port,
// resolved address, account) across every process sharing the database.
// Slots are rows in the store that a process leases for a while. A process
// keeps the slots it leased in a local pool and reuses them attempt after
// attempt, so a busy destination costs one lease write per burst rather
// than one per attempt. Leases are renewed while held, and each slot is
// handed back once nothing here has used it for slotIdle, so other
// processes can take it; the slots of a process that died come free when
// their lease lapses.
//
// The invariant, for every key: the slots this process holds are the
// attempts it has in flight on them plus idle slots it hands back within
// slotIdle (and one housekeeping tick). Three rules keep it:
//   - A held slot's identity is its *slotLease, never its lease end:
//     renewal moves the end and nothing else, so a slot renewed while an
//     attempt uses it is released like any other. A slot leased again
//     after its lease lapsed is a new *slotLease, which a holder of the old
//     one cannot give back.
//   - Each taking of a slot has its own generation; a release whose
//     generation is not the slot's current one changes nothing, so a
//     double release, or a late one after the slot was reclaimed, cannot
//     free a slot another attempt uses.
//   - Every acquire waits with its own deadline (its context), and a slot
//     busy for longer than any attempt can last is reported and reclaimed
//     (reclaimStale): a bug that drops a slot costs a minute, not the
//     destination.
type sharedSlots struct {
	store agentowl.Store
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
	dropped []*slotLease // leases given up here, to hand back
}

// keySlots is this process's part of one key's slots.
type keySlots struct {
	held    map[int]*slotLease // by slot number: every slot leased here, busy or idle
	free    []*slotLease       // held and idle, most recently idle last
	waiters []chan heldSlot    // attempts waiting for a slot, oldest first
	leasing bool               // a lease loop is running for the waiters
	made    bool               // the key's slot rows exist
	// hold is the moving average of how long an attempt holds one of the
	// key's slots; nextTurn is the turn the last attempt sent away was
	// given (see acquire).
	hold     time.Duration
	nextTurn time.Time
}

// slotLease is one lease of one slot as this process holds it.
type slotLease struct {
	key   string
	n     int
	until time.Time // end of the lease as the store has it; renew moves it
	gen   uint64    // counts the takings of this slot
	busy  bool      // an attempt holds it
	// since is when it was last taken (busy) or last became idle, in the
	// process's real time: for hand-back and the stale check, not a
	// schedule.
	since time.Time
}

// heldSlot is one slot as an attempt holds it: the lease and the taking.
type heldSlot struct {
	lease *slotLease
	gen   uint64
}

// slotIdle is how long a process keeps an idle slot before handing it
// back; slotRetry is how soon it asks again when every slot is taken.
const (
	slotIdle  = 200 * time.Millisecond
	slotRetry = 20 * time.Millisecond
)

// Pacing. An attempt that would wait longer than maxSlotWait for one of
// its key's slots does not wait: it is sent away with a turn, and its
// message put back until then. Turns follow each other by the key's hold
// time over its slots, the pace at which the key frees them, so a slow
// destination's backlog comes back to the engine at the pace the
// destination takes it, not all at once: its messages neither hold the
// engine's own concurrency while they wait nor crowd other destinations'
// messages out of the claims. Turns come a quarter faster than the
// estimate (turnPace): a turn is fixed when it is given, and a slot left
// idle for want of a message costs throughput, while a message back too
// early only waits a moment here or takes a new turn on a fresher
// estimate. defaultHold stands for a key's hold time until one is
// measured (a burst is sent away before any attempt of it has ended);
// maxTurn caps a turn, so a destination that speeds up is not left
// waiting on old estimates.
const (
	maxSlotWait = 250 * time.Millisecond
	defaultHold = 100 * time.Millisecond
	turnPace    = 0.75
	maxTurn     = time.Minute
)

// newSharedSlots returns the slots of keys, limit(key) of each. A slot must
// have minLeft of its lease left to start an attempt; leases are renewed
// when a third of them has passed, so they are at least three times
// minLeft.
func newSharedSlots(st agentowl.Store, clock agentowl.Clock, log *slog.Logger, owner string, limit func(key string) int, lease, minLeft time.Duration) *sharedSlots {
	ctx, cancel := context.WithCancel(context.Background())
	return &sharedSlots{store: st, clock: clock, log: log, owner: owner, limit: limit, lease: max(lease, 3*minLeft),
		minLeft: minLeft, ctx: ctx, cancel: cancel, keys: map[string]*keySlots{}}
}

func (s *sharedSlots) key(k string) *keySlots {
	ks := s.keys[k]
	if ks == nil {
		ks = &keySlots{held: map[int]*slotLease{}}
		s.keys[k] = ks
	}
	return ks
}

// usable reports whether idle slot l may start an attempt now. A slot
// whose lease is too short is given up and handed back.
func (s *sharedSlots) usable(ks *keySlots, l *slotLease, now time.Time) bool {
	if ks.held[l.n] != l {
		return false
	}
	if l.until.Sub(now) >= s.minLeft {
		return true
	}
	delete(ks.held, l.n)
	s.dropped = append(s.dropped, l)
	return false
}

// take marks idle slot l busy for a new holder. Under s.mu.
func take(l *slotLease) heldSlot {
	l.gen++
	l.busy, l.since = true, time.Now()
	return heldSlot{lease: l, gen: l.gen}
}

// acquire takes one slot of key, waiting until ctx ends (its deadline, or
// the engine stopping). Without a slot it reports in how long the attempt
// may come back for one: its turn (see maxSlotWait), zero when the wait
// was cut short by ctx alone.
func (s *sharedSlots) acquire(ctx context.Context, key string) (heldSlot, bool, time.Duration) {
	s.mu.Lock()
	ks := s.key(key)
	now := s.clock.Now()
	for len(ks.free) > 0 {
		l := ks.free[len(ks.free)-1]
		ks.free = ks.free[:len(ks.free)-1]
		if s.usable(ks, l, now) {
			h := take(l)
			s.mu.Unlock()
			return h, true, 0
		}
	}
	if turn := s.turn(key, ks, false); turn > 0 {
		s.mu.Unlock()
		return heldSlot{}, false, turn
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
		return h, true, 0
	case <-ctx.Done():
	}
	s.mu.Lock()
	if i := slices.Index(ks.waiters, ch); i >= 0 {
		ks.waiters = slices.Delete(ks.waiters, i, i+1)
		turn := s.turn(key, ks, true)
		s.mu.Unlock()
		return heldSlot{}, false, turn
	}
	s.mu.Unlock()
	// Handed over just as the wait ended: the wait is over, so the slot
	// goes to the next waiter or the pool.
	s.release(<-ch)
	return heldSlot{}, false, 0
}

// turn is how long an attempt that found no free slot of key should stay
// away: zero when it may wait here (a slot may still be leased, or its
// wait would be short), else a turn after the attempts already waiting and
// those sent away before it. A wait that ran out (waited) always gets a
// turn. Under s.mu.
func (s *sharedSlots) turn(key string, ks *keySlots, waited bool) time.Duration {
	hold := ks.hold
	if hold <= 0 {
		hold = defaultHold
	}
	limit := max(s.limit(key), 1)
	busy := 0
	for _, l := range ks.held {
		if l.busy {
			busy++
		}
	}
	// Waiting for the attempts here to free a slot: those waiting first
	// and this one take turns as the busy slots come free.
	ahead := busy + len(ks.waiters) + 1 - limit
	wait := hold * time.Duration(max(ahead, 0)) / time.Duration(limit)
	if !waited && wait <= maxSlotWait {
		return 0
	}
	pace := time.Duration(float64(hold) * turnPace / float64(limit))
	wait = max(wait, pace)
	now := time.Now() // real time: the pace of receivers, not a schedule
	at := now.Add(wait)
	if next := ks.nextTurn.Add(pace); next.After(at) {
		at = next
	}
	if cap := now.Add(maxTurn); at.After(cap) {
		at = cap
	}
	ks.nextTurn = at
	return at.Sub(now)
}

// release gives a slot back: to the oldest waiter, or to the pool. It
// changes nothing unless h is the slot's current taking and the slot is
// still held here (its lease was not lost meanwhile).
func (s *sharedSlots) release(h heldSlot) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.giveBack(h.lease, h.gen)
}

// giveBack ends taking gen of l. Under s.mu.
func (s *sharedSlots) giveBack(l *slotLease, gen uint64) {
	if l == nil || l.gen != gen || !l.busy {
		return
	}
	held := time.Since(l.since)
	l.busy, l.since = false, time.Now()
	ks := s.keys[l.key]
	if ks != nil {
		// A moving average over the last few attempts.
		if ks.hold == 0 {
			ks.hold = held
		} else {
			ks.hold = (ks.hold*4 + held) / 5
		}
	}
	if ks == nil || !s.usable(ks, l, s.clock.Now()) {
		return // lost (not renewed) or given up: nothing of it to pool
	}
	s.handOut(ks, l)
}

// handOut gives idle slot l to the oldest waiter, or to the pool. Under
// s.mu.
func (s *sharedSlots) handOut(ks *keySlots, l *slotLease) {
	if len(ks.waiters) > 0 {
		ch := ks.waiters[0]
		ks.waiters = ks.waiters[1:]
		ch <- take(l)
		return
	}
	ks.free = append(ks.free, l)
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
		err := s.store.Write(s.ctx, func(tx agentowl.Tx) (err error) {
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
			l := &slotLease{key: key, n: n, until: until, since: time.Now()}
			ks.held[n] = l
			s.handOut(ks, l)
		}
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

// run renews the held leases, hands back idle slots and reclaims stale ones
// until ctx ends; then, once every attempt is over, it hands back every
// slot. onStale hears of each slot reclaimed from a holder that kept it
// longer than maxHold.
func (s *sharedSlots) run(ctx context.Context, maxHold time.Duration, onStale func(key string, held time.Duration)) {
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
			s.reclaimStale(maxHold, onStale)
			s.renew()
			s.releaseIdle(false)
		}
	}
}

// renew extends every held lease, busy or idle, once some lease is a
// third over; slots whose lease the store no longer has as given are
// forgotten (an attempt on one finds it gone when it releases it).
func (s *sharedSlots) renew() {
	now := s.clock.Now()
	type snapshot struct {
		l     *slotLease
		until time.Time
	}
	s.mu.Lock()
	var held []snapshot
	var slots []agentowl.Slot
	due := false
	for _, ks := range s.keys {
		for _, l := range ks.held {
			held = append(held, snapshot{l, l.until})
			slots = append(slots, agentowl.Slot{Key: l.key, N: l.n, Until: l.until})
			due = due || l.until.Sub(now) < s.lease*2/3
		}
	}
	s.mu.Unlock()
	if !due {
		return
	}
	until := now.Add(s.lease)
	var kept []agentowl.Slot
	err := s.store.Write(s.ctx, func(tx agentowl.Tx) (err error) {
		kept, err = tx.SlotRenew(s.ctx, s.owner, slots, now, until)
		return err
	})
	if err != nil {
		if s.ctx.Err() == nil {
			s.log.Error("renew destination slots", "err", err)
		}
		return // leases run out in time; usable stops using them first
	}
	renewed := map[agentowl.Slot]bool{}
	for _, sl := range kept {
		renewed[agentowl.Slot{Key: sl.Key, N: sl.N}] = true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, h := range held {
		l := h.l
		if renewed[agentowl.Slot{Key: l.key, N: l.n}] {
			// Held, or given up since the snapshot and waiting to be handed
			// back: either way the store's lease now ends at until.
			l.until = until
			continue
		}
		if ks := s.keys[l.key]; ks != nil && ks.held[l.n] == l {
			delete(ks.held, l.n)
			ks.free = slices.DeleteFunc(ks.free, func(f *slotLease) bool { return f == l })
		}
	}
}

// reclaimStale takes back every slot busy for longer than maxHold, longer
// than any attempt can last: its holder lost it without releasing it. It
// is a bug, reported through onStale; reclaiming keeps it from stalling the
// destination.
func (s *sharedSlots) reclaimStale(maxHold time.Duration, onStale func(key string, held time.Duration)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ks := range s.keys {
		for _, l := range ks.held {
			if held := time.Since(l.since); l.busy && held > maxHold {
				onStale(l.key, held)
				s.giveBack(l, l.gen)
			}
		}
	}
}

// releaseIdle hands back the slots given up here and those idle for
// slotIdle (every idle one when all is set), and forgets keys with no
// slot.
func (s *sharedSlots) releaseIdle(all bool) {
	s.mu.Lock()
	var back []agentowl.Slot
	for _, l := range s.dropped {
		back = append(back, agentowl.Slot{Key: l.key, N: l.n, Until: l.until})
	}
	s.dropped = nil
	for key, ks := range s.keys {
		ks.free = slices.DeleteFunc(ks.free, func(l *slotLease) bool {
			if !all && time.Since(l.since) < slotIdle {
				return false
			}
			back = append(back, agentowl.Slot{Key: key, N: l.n, Until: l.until})
			delete(ks.held, l.n)
			return true
		})
		if len(ks.held) == 0 && len(ks.waiters) == 0 && !ks.leasing {
			delete(s.keys, key)
		}
	}
	s.mu.Unlock()
	if len(back) == 0 {
		return
	}
	err := s.store.Write(context.Background(), func(tx agentowl.Tx) error { return tx.SlotRelease(context.Background(), s.owner, back) })
	if err != nil {
		s.log.Error("release destination slots", "err", err)
	}
}

// slotCounts is what this process holds of one kind of key ("host",
// "addr", "account").
type slotCounts struct {
	Busy, Idle int
	// Stale counts busy slots taken longer ago than the maxHold asked
	// about: held without an attempt.
	Stale int
}

// counts reports the slots held here by kind of key.
func (s *sharedSlots) counts(maxHold time.Duration) map[string]slotCounts {
	out := map[string]slotCounts{}
	s.mu.Lock()
	defer s.mu.Unlock()
	for key, ks := range s.keys {
		kind, _, _ := strings.Cut(key, ":")
		c := out[kind]
		for _, l := range ks.held {
			switch {
			case !l.busy:
				c.Idle++
			case time.Since(l.since) > maxHold:
				c.Busy++
				c.Stale++
			default:
				c.Busy++
			}
		}
		out[kind] = c
	}
	return out
}
