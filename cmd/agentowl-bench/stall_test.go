package main

import (
	"testing"
	"time"
)

// A subject's first 2xx is its earliest under any webhook-id, and every
// further 2xx of it, under the same webhook-id or another, is a duplicate.
func TestTallyOf(t *testing.T) {
	t.Parallel()
	t0 := time.Now()
	at := func(ms int, status int) attempt {
		return attempt{at: t0.Add(time.Duration(ms) * time.Millisecond), status: status}
	}
	a, b, c := subject{msgNotification, "request.resolved a"}, subject{msgNotification, "request.resolved b"}, subject{msgNotification, "request.resolved c"}
	msgs := map[string]message{
		"w1": {subj: a, attempts: []attempt{at(10, 500), at(20, 200)}},
		"w2": {subj: b, attempts: []attempt{at(30, 200), at(40, 200)}}, // answered 2xx twice
		"w3": {subj: c, attempts: []attempt{at(50, 200)}},
		"w4": {subj: c, attempts: []attempt{at(5, 0), at(45, 204)}}, // c again, under another webhook-id, earlier
		"w5": {subj: subject{msgNotification, "request.resolved x"}, attempts: []attempt{at(1, 200)}},
	}
	want := map[subject]bool{a: true, b: true, c: true}
	got := tallyOf(msgs, func(s subject) bool { return want[s] })
	if len(got.first) != 3 || got.attempts != 7 || got.duplicates != 2 {
		t.Errorf("first %v, attempts %d, duplicates %d; want 3 subjects, 7 attempts, 2 duplicates", got.first, got.attempts, got.duplicates)
	}
	for s, ms := range map[subject]int{a: 20, b: 30, c: 45} {
		if w := t0.Add(time.Duration(ms) * time.Millisecond); !got.first[s].Equal(w) {
			t.Errorf("first 2xx of %s at %v, want +%dms", s.id, got.first[s].Sub(t0), ms)
		}
	}
}
