package approval

import (
	"bytes"
	"context"
	"sync"

	"github.com/agentowl/agentowl"
)

// submissions runs keyed instance submissions (creations and updates) one
// at a time per idempotency key in this process. A receiver must be
// verified for exactly the input that commits, with the instance ID it
// commits under, and AAP allows no parallel verifications for one key: so a
// submission that arrives while another with the same key is in progress
// is refused at once when its input differs (idempotency_conflict), and
// otherwise waits for it and then replays what it committed, or shares its
// failed verification.
type submissions struct {
	mu      sync.Mutex
	running map[string]*submission
}

type submission struct {
	hash []byte
	done chan struct{}
	err  error // set before done closes
}

// run runs fn, the submission of key with input hash, once no other
// submission of key is in progress here. fn must replay a committed result
// of key before doing anything else, so that a submission that waited for
// another returns what that one committed.
func (ss *submissions) run(ctx context.Context, key string, hash []byte, fn func() error) error {
	for {
		ss.mu.Lock()
		cur, busy := ss.running[key]
		if !busy {
			own := &submission{hash: hash, done: make(chan struct{})}
			if ss.running == nil {
				ss.running = map[string]*submission{}
			}
			ss.running[key] = own
			ss.mu.Unlock()
			return ss.runOwn(key, own, fn)
		}
		ss.mu.Unlock()
		if !bytes.Equal(cur.hash, hash) {
			return errKeyReused()
		}
		select {
		case <-cur.done:
		case <-ctx.Done():
			return ctx.Err()
		}
		if agentowl.ErrorCode(cur.err) == agentowl.ECodeWebhookVerificationFailed {
			return cur.err // one verification per attempt, shared by its concurrent duplicates
		}
		// Anything else (success included) is found again by fn: a replay,
		// or a fresh attempt when the other one ended without committing.
	}
}

// runOwn runs fn as the submission of key and lets the waiting duplicates
// go when it ends, also when fn panics (the HTTP layer recovers the panic;
// the key must not stay busy for the life of the process).
func (ss *submissions) runOwn(key string, own *submission, fn func() error) error {
	own.err = agentowl.Errorf(agentowl.ECodeInternal, "The submission ended unexpectedly; retry it.")
	defer func() {
		ss.mu.Lock()
		delete(ss.running, key)
		ss.mu.Unlock()
		close(own.done)
	}()
	own.err = fn()
	return own.err
}

// errKeyReused is the answer to an idempotency key used again with
// different input.
func errKeyReused() error {
	return agentowl.Errorf(agentowl.ECodeIdempotencyConflict, "The idempotency key was already used with different input.")
}
