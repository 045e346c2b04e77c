package approval

import (
	"context"
	"testing"
	"time"
)

// A submission whose fn panics lets its key go: the next submission of the
// key runs instead of waiting for good.
func TestSubmissionPanicFreesTheKey(t *testing.T) {
	var ss submissions
	func() {
		defer func() { _ = recover() }()
		_ = ss.run(context.Background(), "k", []byte("h"), func() error { panic("boom") })
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ran := false
	if err := ss.run(ctx, "k", []byte("other input"), func() error { ran = true; return nil }); err != nil || !ran {
		t.Fatalf("the next submission of the key: ran=%v, err=%v", ran, err)
	}
	if len(ss.running) != 0 {
		t.Fatalf("%d submissions left running", len(ss.running))
	}
}
