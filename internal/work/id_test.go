package work

import (
	"regexp"
	"testing"
	"time"
)

// TestNewIDSortsByCreation checks the ID format of the contract
// (^prefix_[a-z2-7]{26}$) and that IDs sort by their creation time.
func TestNewIDSortsByCreation(t *testing.T) {
	t.Parallel()
	format := regexp.MustCompile(`^work_[a-z2-7]{26}$`)
	at := time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC)
	prev := ""
	for _, d := range []time.Duration{0, time.Millisecond, 25 * time.Millisecond, 26 * time.Millisecond, time.Second, time.Hour, 24 * 365 * 80 * time.Hour} {
		id := newIDAt("work", at.Add(d))
		if !format.MatchString(id) {
			t.Fatalf("ID %q does not match %s", id, format)
		}
		if id <= prev {
			t.Fatalf("ID %q made later sorts before %q", id, prev)
		}
		if again := newIDAt("work", at.Add(d)); again == id || again[:16] != id[:16] {
			t.Fatalf("IDs of one millisecond: %q and %q (want a shared time part and distinct random parts)", id, again)
		}
		prev = id
	}
	if a, b := newIDAt("x", time.UnixMilli(0)), newIDAt("x", time.UnixMilli(-5)); a[:13] != b[:13] {
		t.Fatalf("times before the epoch: %q, %q", a, b)
	}
}
