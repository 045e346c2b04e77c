// Package ratelimit holds keyed token-bucket limiters for abuse controls
// (per tenant, per destination). Limits are per process: with several
// replicas each enforces its own share, which docs/limits.md states.
package ratelimit

import (
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/agentowl/agentowl"
)

// Limit is a sustained rate with a burst. A zero Per disables the limit.
type Limit struct {
	Events int           // events allowed per Per, sustained
	Per    time.Duration // the period
	Burst  int           // events allowed at once; defaults to Events
}

// Keyed limits events per key (a tenant, a destination host).
type Keyed struct {
	limit   Limit
	clock   agentowl.Clock
	mu      sync.Mutex
	buckets map[string]*bucket
	sweep   time.Time
}

type bucket struct {
	l    *rate.Limiter
	seen time.Time
}

// New returns a keyed limiter.
func New(limit Limit, clock agentowl.Clock) *Keyed {
	if limit.Burst <= 0 {
		limit.Burst = limit.Events
	}
	return &Keyed{limit: limit, clock: clock, buckets: map[string]*bucket{}}
}

// Allow takes one event for key. When the limit is exhausted it reports
// false and how long until an event is allowed again.
func (k *Keyed) Allow(key string) (bool, time.Duration) {
	if k == nil || k.limit.Per <= 0 || k.limit.Events <= 0 {
		return true, 0
	}
	now := k.clock.Now()
	k.mu.Lock()
	defer k.mu.Unlock()
	if now.Sub(k.sweep) > 10*time.Minute { // forget idle keys
		for key, b := range k.buckets {
			if now.Sub(b.seen) > 10*time.Minute {
				delete(k.buckets, key)
			}
		}
		k.sweep = now
	}
	b := k.buckets[key]
	if b == nil {
		every := rate.Every(k.limit.Per / time.Duration(k.limit.Events))
		b = &bucket{l: rate.NewLimiter(every, k.limit.Burst)}
		k.buckets[key] = b
	}
	b.seen = now
	r := b.l.ReserveN(now, 1)
	if !r.OK() {
		return false, k.limit.Per
	}
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

// Error is the rate_limited error with its Retry-After.
func Error(what string, retryAfter time.Duration) error {
	secs := retryAfter.Truncate(time.Second) + time.Second
	return &agentowl.Error{Code: agentowl.ECodeRateLimited, RetryAfter: secs,
		Message: "Too many " + what + "; retry after " + secs.String() + "."}
}
