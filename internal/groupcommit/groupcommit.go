// Package groupcommit batches concurrent writes to a single-writer database
// so that one commit (one fsync) serves all the writes that arrived while the
// previous commit was in progress. The server's SQLite store and the harness
// kit's share it; each supplies how a batch is committed.
package groupcommit

import (
	"context"
	"errors"
	"sync"
)

// ErrClosed is returned for writes offered to, or still queued in, a closed
// queue: they did not happen.
var ErrClosed = errors.New("groupcommit: closed")

// Queue runs jobs in batches of at most max, one batch at a time.
type Queue[J any] struct {
	run   func(batch []J) []error
	max   int
	queue chan *pending[J]
	stop  chan struct{}
	done  chan struct{}
	once  sync.Once
	// mu orders Do's check of closed with its enqueue against Close, so the
	// loop drains every job queued before it stops.
	mu     sync.RWMutex
	closed bool
}

type pending[J any] struct {
	job    J
	result chan error
}

// New starts a queue. run commits one batch and returns each job's outcome
// (a failure of the batch itself is every job's outcome).
func New[J any](max int, run func(batch []J) []error) *Queue[J] {
	q := &Queue[J]{run: run, max: max, queue: make(chan *pending[J], 4*max), stop: make(chan struct{}), done: make(chan struct{})}
	go q.loop()
	return q
}

// Do queues job and waits for its batch's outcome. Once queued, the outcome
// is awaited even if ctx ends: the write may be committed, and the caller
// must not report otherwise.
func (q *Queue[J]) Do(ctx context.Context, job J) error {
	p := &pending[J]{job: job, result: make(chan error, 1)}
	q.mu.RLock()
	if q.closed {
		q.mu.RUnlock()
		return ErrClosed
	}
	select {
	case q.queue <- p:
		q.mu.RUnlock()
	case <-ctx.Done():
		q.mu.RUnlock()
		return ctx.Err()
	}
	return <-p.result
}

// Close stops the queue after the jobs already queued; it is idempotent.
func (q *Queue[J]) Close() {
	q.once.Do(func() {
		q.mu.Lock()
		q.closed = true
		q.mu.Unlock()
		close(q.stop)
	})
	<-q.done
}

func (q *Queue[J]) loop() {
	defer close(q.done)
	for {
		var first *pending[J]
		select {
		case first = <-q.queue:
		case <-q.stop:
			for {
				select {
				case p := <-q.queue:
					p.result <- ErrClosed
				default:
					return
				}
			}
		}
		batch := []*pending[J]{first}
	fill:
		for len(batch) < q.max {
			select {
			case p := <-q.queue:
				batch = append(batch, p)
			default:
				break fill
			}
		}
		jobs := make([]J, len(batch))
		for i, p := range batch {
			jobs[i] = p.job
		}
		for i, err := range q.run(jobs) {
			batch[i].result <- err
		}
	}
}
