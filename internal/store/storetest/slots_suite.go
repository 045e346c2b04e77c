package storetest

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/agentowl/agentowl"
)

func (e *env) leaseSlots(t *testing.T, key, owner string, limit, n int, now time.Time) []int {
	t.Helper()
	var got []int
	e.write(t, func(tx agentowl.Tx) (err error) {
		if err := tx.SlotsMake(e.ctx, key, limit); err != nil {
			return err
		}
		got, err = tx.SlotLease(e.ctx, key, owner, limit, n, now, now.Add(time.Minute))
		return err
	})
	slices.Sort(got)
	return nonNil(got)
}

func (e *env) renewSlots(t *testing.T, owner string, slots []agentowl.Slot, now time.Time) []agentowl.Slot {
	t.Helper()
	var got []agentowl.Slot
	e.write(t, func(tx agentowl.Tx) (err error) {
		got, err = tx.SlotRenew(e.ctx, owner, slots, now, now.Add(time.Minute))
		return err
	})
	return nonNil(got)
}

func (e *env) releaseSlots(t *testing.T, owner string, slots ...agentowl.Slot) {
	t.Helper()
	e.write(t, func(tx agentowl.Tx) error { return tx.SlotRelease(e.ctx, owner, slots) })
}

func testSlotLease(t *testing.T, e *env) {
	lease := e.now.Add(time.Minute) // every lease below is made at e.now unless said
	slot := func(key string, n int, until time.Time) agentowl.Slot {
		return agentowl.Slot{Key: key, N: n, Until: until}
	}
	equal(t, "first lease", e.leaseSlots(t, "host:a", "p1", 3, 2, e.now), []int{0, 1})
	equal(t, "up to the limit", e.leaseSlots(t, "host:a", "p2", 3, 5, e.now), []int{2})
	equal(t, "all taken", e.leaseSlots(t, "host:a", "p3", 3, 1, e.now), []int{})
	equal(t, "other keys are separate", e.leaseSlots(t, "host:b", "p3", 3, 1, e.now), []int{0})
	equal(t, "a lower limit leaves higher slots unused", e.leaseSlots(t, "host:b", "p3", 1, 1, e.now), []int{})

	// p1 hands slot 0 back; it is free again at once.
	e.releaseSlots(t, "p1", slot("host:a", 0, lease))
	equal(t, "released slot", e.leaseSlots(t, "host:a", "p3", 3, 3, e.now), []int{0})
	// Handing back what another owner, or another lease, holds changes nothing.
	e.releaseSlots(t, "p1", slot("host:a", 2, lease))
	e.releaseSlots(t, "p2", slot("host:a", 2, lease.Add(time.Microsecond)))
	equal(t, "slot of another owner or lease", e.leaseSlots(t, "host:a", "p4", 3, 3, e.now), []int{})

	// p2 renews the lease it holds; a lease it does not hold is not renewed.
	later := e.now.Add(50 * time.Second)
	equal(t, "renewed", e.renewSlots(t, "p2", []agentowl.Slot{slot("host:a", 2, lease), slot("host:a", 1, lease)}, later),
		[]agentowl.Slot{slot("host:a", 2, later.Add(time.Minute))})
	// p1 (slot 1) and p3 (slot 0) did not renew: their leases lapse.
	lapsed := e.now.Add(61 * time.Second)
	equal(t, "after p1's and p3's leases lapsed", e.leaseSlots(t, "host:a", "p4", 3, 3, lapsed), []int{0, 1})
	equal(t, "a lapsed lease cannot be renewed", e.renewSlots(t, "p1", []agentowl.Slot{slot("host:a", 1, lease)}, lapsed), []agentowl.Slot{})
	// p1's late hand-back of its lapsed lease leaves p4's new lease alone.
	e.releaseSlots(t, "p1", slot("host:a", 1, lease))
	equal(t, "p4's lease survives p1's late hand-back", e.leaseSlots(t, "host:a", "p5", 3, 3, lapsed), []int{})

	// Slots unused for a day are purged and made again when next leased.
	e.purge(t, lapsed.Add(25*time.Hour))
	equal(t, "after the purge", e.leaseSlots(t, "host:b", "p5", 2, 2, lapsed.Add(25*time.Hour)), []int{0, 1})
}

// testSlotLeaseConcurrent: processes leasing one key's slots at once never
// hold more than the limit together.
func testSlotLeaseConcurrent(t *testing.T, e *env) {
	const workers, limit = 8, 5
	got := make([][]int, workers)
	errs := atOnce(workers, func(w int) error {
		for range 3 {
			var n []int
			err := e.s.Write(e.ctx, func(tx agentowl.Tx) (err error) {
				if err := tx.SlotsMake(e.ctx, "host:c", limit); err != nil {
					return err
				}
				n, err = tx.SlotLease(e.ctx, "host:c", fmt.Sprintf("w%d", w), limit, 2, e.now, e.now.Add(time.Minute))
				return err
			})
			if err != nil {
				return err
			}
			got[w] = append(got[w], n...)
		}
		return nil
	})
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	var all []int
	for _, g := range got {
		all = append(all, g...)
	}
	slices.Sort(all)
	equal(t, "slots leased by all workers together", all, []int{0, 1, 2, 3, 4})
}
