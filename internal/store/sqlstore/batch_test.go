package sqlstore_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/groupcommit"
	"github.com/agentowl/agentowl/internal/store/storetest"
)

// Writes racing Close either commit or fail; none waits forever.
func TestWritesRacingCloseNeverHang(t *testing.T) {
	for range 20 {
		st := storetest.OpenSQLite(t)
		var wg sync.WaitGroup
		for range 16 {
			wg.Go(func() {
				err := st.Write(context.Background(), func(agentowl.Tx) error { return nil })
				if err != nil && !errors.Is(err, groupcommit.ErrClosed) {
					t.Errorf("write: %v", err)
				}
			})
		}
		st.Close()
		wg.Wait()
	}
}
