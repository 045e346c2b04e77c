package delivery

import (
	"sync"
	"time"

	"github.com/agentowl/agentowl/internal/store"
)

// lag tracks how far the engine itself is behind its due messages, for
// Backlog: the messages claimed here whose attempt has not begun yet, and
// the due messages still in the store when the last claim could not take
// them all. Waits that destination and account limits impose once an
// attempt has begun are not counted: they hold back one receiver's or one
// account's messages (at most a second, then the message is put back), and
// must not refuse every other account's writes.
type lag struct {
	mu sync.Mutex
	// starting holds, by message ID, since when each claimed message whose
	// attempt has not begun has been due.
	starting map[string]time.Time
	// unclaimed, when set, bounds the due time of the oldest message left
	// in the store: the last claim took as many as it asked for, oldest due
	// first, so what it left was due no earlier than the last it took.
	unclaimed time.Time
}

// claimed records a claim's messages; full tells that the claim took as
// many as it asked for, so more may be due.
func (l *lag) claimed(msgs []*store.Message, full bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.unclaimed = time.Time{}
	for _, m := range msgs {
		l.starting[m.ID] = m.NextAttempt
		if full && m.NextAttempt.After(l.unclaimed) {
			l.unclaimed = m.NextAttempt
		}
	}
}

// started records that the attempt of message id has begun.
func (l *lag) started(id string) {
	l.mu.Lock()
	delete(l.starting, id)
	l.mu.Unlock()
}

// behind is how long, at most, the oldest due message whose attempt has not
// begun has waited at now (zero when none waits).
func (l *lag) behind(now time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	oldest := l.unclaimed
	for _, due := range l.starting {
		if oldest.IsZero() || due.Before(oldest) {
			oldest = due
		}
	}
	if oldest.IsZero() {
		return 0
	}
	return max(now.Sub(oldest), 0)
}

// Backlog is how long, at most, the oldest due message this engine has not
// begun to attempt has been waiting: among the messages it claimed, and
// those its last claim left in the store when it could not take them all. The
// admission queues refuse new writes while it exceeds their wait
// (admission.Config.Backlog), so that the delay from a decision to its
// delivery stays bounded under overload. An engine that is not running
// reports no backlog.
func (e *Engine) Backlog() time.Duration { return e.lag.behind(e.clock.Now()) }
