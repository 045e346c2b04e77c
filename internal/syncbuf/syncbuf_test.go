package syncbuf

import (
	"strings"
	"sync"
	"testing"
)

// Writers and readers at once (run with -race): nothing is lost.
func TestConcurrentWritesAndReads(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				_, _ = b.Write([]byte("x"))
				_ = b.String()
				_ = b.Len()
			}
		})
	}
	wg.Wait()
	if got := b.String(); got != strings.Repeat("x", 800) || b.Len() != 800 {
		t.Fatalf("got %d bytes, want 800", len(got))
	}
}
