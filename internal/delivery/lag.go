package delivery

import (
	"sync"
	"time"

	"github.com/agentowl/agentowl"
)

// lag tracks how far the engine itself is behind, for Backlog: since when
// the oldest message that it has not begun to attempt has been waiting for
// it. That is a message committed here since the last claim began (it woke
// the engine), one claimed and not begun, or one a claim left in the store
// because it took all it asked for. Waits that destination and account
// limits impose once an attempt has begun are not counted: they hold back
// one receiver's or one account's messages (at most a second, then the
// message is put back), and must not refuse every other account's writes.
//
// Times are the process's real (monotonic) time, not the engine's clock:
// the backlog measures the engine's pace, not a schedule, and a driven
// clock (tests) jumping ahead does not make it lag.
type lag struct {
	mu sync.Mutex
	// woken is the first Wake since the last claim began, if any.
	woken time.Time
	// asked is what the claim under way answers for: the oldest wake or
	// leftover it was asked to take (zero: none known).
	asked time.Time
	// leftover, when set, is since when messages the last claim could not
	// take have waited.
	leftover time.Time
	// starting holds, by message ID, since when each claimed message whose
	// attempt has not begun has waited.
	starting map[string]time.Time
}

// woke records a Wake: a message committed, due now.
func (l *lag) woke() {
	now := time.Now()
	l.mu.Lock()
	if l.woken.IsZero() {
		l.woken = now
	}
	l.mu.Unlock()
}

// claiming records that a claim begins: it sees every message committed
// before it, and the messages the last claim left.
func (l *lag) claiming() {
	l.mu.Lock()
	l.asked = oldest(l.woken, l.leftover)
	if l.asked.IsZero() {
		l.asked = time.Now() // a claim on a poll or a free slot: whatever it finds waits from now at least
	}
	l.woken = time.Time{}
	l.mu.Unlock()
}

// claimed records what the claim took; full tells that it took as many as
// it asked for, so more may be due: they go on waiting since the claim's
// oldest.
func (l *lag) claimed(msgs []*agentowl.OutboxMessage, full bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, m := range msgs {
		l.starting[m.ID] = l.asked
	}
	l.leftover = time.Time{}
	if full {
		l.leftover = l.asked
	}
}

// started records that the attempt of message id has begun.
func (l *lag) started(id string) {
	l.mu.Lock()
	delete(l.starting, id)
	l.mu.Unlock()
}

// behind is how long the oldest message not begun has waited (zero when
// none waits).
func (l *lag) behind() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	first := oldest(l.woken, l.leftover)
	for _, since := range l.starting {
		first = oldest(first, since)
	}
	if first.IsZero() {
		return 0
	}
	return max(time.Since(first), 0)
}

// oldest is the earlier of two times, a zero one not counting.
func oldest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// Backlog is how long the oldest message this engine has not begun to
// attempt has been waiting for it, in real time: among those committed in
// this process since its last claim began (Wake), those it claimed, and
// those its last claim left in the store when it could not take them all.
// The admission queues refuse new writes while it exceeds their wait
// (admission.Config.Backlog), so that the delay from a decision to its
// delivery stays bounded under overload. An engine that is not running
// reports no backlog.
func (e *Engine) Backlog() time.Duration { return e.lag.behind() }
