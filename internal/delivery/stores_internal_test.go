package delivery

import (
	"sync"
	"testing"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/store/storetest"
)

// EachStore runs fn in a subtest per store (storetest.Backends), on a fresh
// store, the stores side by side. These tests wait on receivers, leases and
// tickers, not the CPU: run as parallel subtests, each store would queue for
// one of go test's -parallel slots (as many as the CPUs); here a test takes
// one slot for all its stores. (Exported for the external tests.)
func EachStore(t *testing.T, fn func(t *testing.T, st agentowl.Store)) {
	t.Helper()
	var wg sync.WaitGroup
	for _, b := range storetest.Backends(t) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t.Run(b.Name, func(t *testing.T) { fn(t, b.Open(t)) })
		}()
	}
	wg.Wait()
}
