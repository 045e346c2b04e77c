// Package ratelimit enforces abuse limits (per tenant, per destination) as
// fixed-window counters kept in the store, so every process sharing a
// database enforces one limit together.
package ratelimit

import (
	"context"
	"sync"
	"time"

	"github.com/agentowl/agentowl"
)

// Limit is Events per Per. A zero Limit is unlimited.
type Limit struct {
	Events int
	Per    time.Duration
}

// Limiter counts events per key in fixed windows.
//
// Each process keeps a local tally and adds it to the shared counter once it
// reaches a twentieth of the limit (at once for limits below 20), so a
// window can be exceeded by at most that share per process while hot keys
// cost one write per share, not one per event.
type Limiter struct {
	name  string
	limit Limit
	store agentowl.Store
	clock agentowl.Clock
	mu    sync.Mutex
	keys  map[string]*window
}

type window struct {
	mu      sync.Mutex
	start   time.Time
	global  int64 // shared total as last seen
	pending int64 // admitted here, not yet added to the shared total
}

// New returns a limiter; name prefixes its keys in the shared counters.
func New(name string, limit Limit, st agentowl.Store, clock agentowl.Clock) *Limiter {
	return &Limiter{name: name, limit: limit, store: st, clock: clock, keys: map[string]*window{}}
}

// Allow admits one event for key, or reports how long until the window
// ends. A store failure admits the event: limits protect receivers and the
// service, and must not turn a database hiccup into refused work.
func (l *Limiter) Allow(ctx context.Context, key string) (bool, time.Duration) {
	_, ok, wait := l.Take(ctx, key)
	return ok, wait
}

// Token is one event admitted by Take.
type Token struct {
	l      *Limiter
	key    string
	window time.Time // start of the window it counts in; zero when unlimited
}

// Take is Allow for a caller that may find, after the event was admitted,
// that it will not happen after all: it gives the Token back with Return.
func (l *Limiter) Take(ctx context.Context, key string) (Token, bool, time.Duration) {
	if l == nil || l.limit.Events <= 0 || l.limit.Per <= 0 {
		return Token{}, true, 0
	}
	now := l.clock.Now()
	start := now.Truncate(l.limit.Per)
	w := l.window(key)
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.start.Equal(start) {
		w.start, w.global, w.pending = start, 0, 0
	}
	if w.global+w.pending >= int64(l.limit.Events) {
		return Token{}, false, start.Add(l.limit.Per).Sub(now)
	}
	w.pending++
	if w.pending >= max(int64(l.limit.Events)/20, 1) {
		var total int64
		err := l.store.Write(ctx, func(tx agentowl.Tx) (err error) {
			total, err = tx.CounterAdd(ctx, l.name+":"+key, start, w.pending)
			return err
		})
		if err == nil {
			w.global, w.pending = total, 0
			if total > int64(l.limit.Events) {
				// Others filled the window first; this event is over the
				// limit and does not happen, so it is taken off the count.
				if l.store.Write(ctx, func(tx agentowl.Tx) (err error) {
					total, err = tx.CounterAdd(ctx, l.name+":"+key, start, -1)
					return err
				}) == nil {
					w.global = total
				}
				return Token{}, false, start.Add(l.limit.Per).Sub(now)
			}
		}
	}
	return Token{l: l, key: key, window: start}, true, 0
}

// Return gives back an event that Take admitted and that did not happen,
// so it no longer counts against its window; once that window has ended
// there is nothing to give back.
func (t Token) Return(ctx context.Context) {
	l := t.l
	if l == nil || !l.clock.Now().Before(t.window.Add(l.limit.Per)) {
		return
	}
	w := l.window(t.key)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.start.Equal(t.window) && w.pending > 0 {
		w.pending-- // not added to the shared count yet
		return
	}
	var total int64
	err := l.store.Write(ctx, func(tx agentowl.Tx) (err error) {
		total, err = tx.CounterAdd(ctx, l.name+":"+t.key, t.window, -1)
		return err
	})
	if err == nil && w.start.Equal(t.window) {
		w.global = total
	}
}

// Limit returns the limiter's limit.
func (l *Limiter) Limit() Limit { return l.limit }

// Used reports how many events of key the shared counter holds for the
// current window and for the one before it, as every process sharing the
// database recorded them: each adds its tally once it reaches a twentieth
// of the limit, so the counts may lag by that share per process. For
// health reports (work-doctor); it writes nothing.
func (l *Limiter) Used(ctx context.Context, key string) (current, previous int64, err error) {
	if l.limit.Per <= 0 {
		return 0, 0, nil
	}
	start := l.clock.Now().Truncate(l.limit.Per)
	err = l.store.Read(ctx, func(tx agentowl.Tx) error {
		if current, err = tx.CounterGet(ctx, l.name+":"+key, start); err != nil {
			return err
		}
		previous, err = tx.CounterGet(ctx, l.name+":"+key, start.Add(-l.limit.Per))
		return err
	})
	return current, previous, err
}

func (l *Limiter) window(key string) *window {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.keys) > 10_000 { // forget idle keys; their windows are shared anyway
		l.keys = map[string]*window{}
	}
	w := l.keys[key]
	if w == nil {
		w = &window{}
		l.keys[key] = w
	}
	return w
}

// Error is the rate_limited error with its Retry-After.
func Error(what string, retryAfter time.Duration) error {
	secs := retryAfter.Truncate(time.Second) + time.Second
	return &agentowl.Error{Code: agentowl.ECodeRateLimited, RetryAfter: secs,
		Message: "Too many " + what + "; retry after " + secs.String() + "."}
}
