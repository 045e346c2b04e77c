package agentowl

import (
	"regexp"
	"testing"
	"time"

	"github.com/google/uuid"
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

// TestNewIDUUID checks the AAP form: a version 4, variant 10 UUID in
// canonical text, different each time; and SortedUUID's version 7 UUIDs,
// which sort by creation.
func TestNewIDUUID(t *testing.T) {
	t.Parallel()
	format := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	seen := map[string]bool{}
	for range 1000 {
		id := NewID("")
		if !format.MatchString(id) || !ValidUUID(id) {
			t.Fatalf("NewID(\"\") = %q, want a version 4 UUID", id)
		}
		if seen[id] {
			t.Fatalf("NewID(\"\") repeated %q", id)
		}
		seen[id] = true
	}
	at := time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC)
	a, b := newUUID(at.UnixMilli()), newUUID(at.Add(time.Millisecond).UnixMilli())
	if a >= b || a[:13] != "01a234e8-c600" {
		t.Fatalf("UUIDs of %v and a millisecond later: %q, %q; want them sorted, the first starting 01a234e8-c600", at, a, b)
	}
}

// TestNewIDUUIDParses cross-checks the UUID form with github.com/google/uuid.
func TestNewIDUUIDParses(t *testing.T) {
	t.Parallel()
	for kind, version := range map[string]uuid.Version{"": 4, SortedUUID: 7} {
		u, err := uuid.Parse(NewID(kind))
		if err != nil || u.Version() != version || u.Variant() != uuid.RFC4122 {
			t.Fatalf("NewID(%q): %v %v, version %v; want version %v", kind, u, err, u.Version(), version)
		}
	}
}
