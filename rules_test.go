package agentowl_test

import (
	"slices"
	"testing"
)

// unknown is a state no record type defines: every rule must refuse it,
// and the empty state, on either side of a transition.
const unknown = "bogus"

// checkTransitions asserts can(from, to) for every pair of states, and of
// each state with an unknown one on either side: true exactly for the
// pairs legal lists (from to its legal next states), false for every other
// pair, the unknown and the empty state included. legal must name every state as a from, so that a state added to
// the type without a row here fails the test instead of passing unchecked.
func checkTransitions[S ~string](t *testing.T, states []S, legal map[S][]S, can func(from, to S) bool) {
	t.Helper()
	if len(legal) != len(states) {
		t.Fatalf("the table has %d from states, the type %d: give every state a row", len(legal), len(states))
	}
	all := append(slices.Clone(states), S(unknown), "")
	n := 0
	for _, from := range all {
		nexts, ok := legal[from]
		if !ok && from != S(unknown) && from != "" {
			t.Fatalf("state %q has no row in the table", from)
		}
		for _, to := range all {
			want := slices.Contains(nexts, to)
			if got := can(from, to); got != want {
				t.Errorf("%q -> %q: CanBecome = %v, want %v", from, to, got, want)
			}
			n++
		}
	}
	if n != len(all)*len(all) {
		t.Fatalf("checked %d pairs, want %d", n, len(all)*len(all))
	}
}
