package groupcommit_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/agentowl/agentowl/internal/groupcommit"
)

// Every job gets its own outcome (also when it waited behind a batch in
// progress), and jobs racing Close either run or fail with ErrClosed — none
// waits forever. How well jobs are grouped is measured by the store
// benchmarks, not asserted here.
func TestQueue(t *testing.T) {
	var batches atomic.Int32
	release := make(chan struct{})
	q := groupcommit.New(64, func(batch []int) []error {
		if batches.Add(1) == 1 {
			<-release // hold the first batch so the others queue up behind it
		}
		out := make([]error, len(batch))
		for i, j := range batch {
			if j%2 == 1 {
				out[i] = errors.New("odd")
			}
		}
		return out
	})
	var wg sync.WaitGroup
	errs := make([]error, 20)
	for i := range errs {
		wg.Go(func() { errs[i] = q.Do(context.Background(), i) })
	}
	close(release)
	wg.Wait()
	for i, err := range errs {
		if (err != nil) != (i%2 == 1) {
			t.Fatalf("job %d: %v", i, err)
		}
	}
	for range 16 {
		wg.Go(func() {
			if err := q.Do(context.Background(), 2); err != nil && !errors.Is(err, groupcommit.ErrClosed) {
				t.Errorf("job racing Close: %v", err)
			}
		})
	}
	q.Close()
	wg.Wait()
	q.Close() // idempotent
	if err := q.Do(context.Background(), 0); !errors.Is(err, groupcommit.ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
}
