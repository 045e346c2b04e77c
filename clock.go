package agentowl

import "time"

// Clock is the source of time for every deadline, expiry, backoff and
// retention computation, so tests can drive time instead of sleeping.
type Clock interface {
	Now() time.Time
	// After returns a channel that receives once d has elapsed on this clock.
	After(d time.Duration) <-chan time.Time
}

// SystemClock is the wall clock.
type SystemClock struct{}

// Now returns the current UTC time.
func (SystemClock) Now() time.Time { return time.Now().UTC() }

// After wraps time.After.
func (SystemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }
