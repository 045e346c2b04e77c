package admission_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/admission"
	"github.com/agentowl/agentowl/internal/clocktest"
)

func newSet(concurrency int) (*admission.Set, *clocktest.Fake) {
	clock := clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	return admission.New(admission.Config{Concurrency: concurrency, MaxWait: 250 * time.Millisecond}, clock), clock
}

// rejected sums agentowl_admission_rejected_total over the surfaces.
func rejected(t *testing.T, set *admission.Set) float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(set.Collectors()...)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, mf := range mfs {
		if mf.GetName() == "agentowl_admission_rejected_total" {
			for _, m := range mf.GetMetric() {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return n
}

func wantOverloaded(t *testing.T, err error) {
	t.Helper()
	var ae *agentowl.Error
	if !errors.As(err, &ae) || ae.Code != agentowl.ECodeOverloaded || ae.RetryAfter != admission.RetryAfter {
		t.Fatalf("got %v, want overloaded with Retry-After %s", err, admission.RetryAfter)
	}
}

func admit(t *testing.T, q *admission.Queue) func() {
	t.Helper()
	done, err := q.Admit(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return done
}

// A write waits for a turn; it gets the turn a finished write hands back,
// and is refused once the maximum wait passes without one.
func TestWaitThenTurnOrRefusal(t *testing.T) {
	set, clock := newSet(1)
	q := set.Queue(admission.Decisions)
	first := admit(t, q)

	got := make(chan error, 1)
	go func() {
		done, err := q.Admit(context.Background())
		if err == nil {
			done()
		}
		got <- err
	}()
	for clock.Waiters() == 0 {
		time.Sleep(time.Millisecond) // synchronizes only: the write has parked on the clock
	}
	first()
	if err := <-got; err != nil {
		t.Fatalf("the waiting write, given the turn: %v", err)
	}

	held := admit(t, q)
	before := clock.Waiters() // the first wait's timer, still pending
	go func() {
		_, err := q.Admit(context.Background())
		got <- err
	}()
	for clock.Waiters() == before {
		time.Sleep(time.Millisecond)
	}
	clock.Advance(250 * time.Millisecond)
	wantOverloaded(t, <-got)
	held()
	held() // a second call is harmless
	admit(t, q)()
	if n := rejected(t, set); n != 1 {
		t.Fatalf("rejected counter %v, want 1", n)
	}
	if q.Waiting() != 0 {
		t.Fatalf("%d still waiting", q.Waiting())
	}
}

// Once the pace of writes is known, a write that would wait longer than the
// maximum for the writes ahead of it is refused at once, without waiting.
func TestRefusedAtOnceWhenThePaceCannotMakeIt(t *testing.T) {
	set, clock := newSet(1)
	q := set.Queue(admission.Events)
	done := admit(t, q)
	clock.Advance(300 * time.Millisecond) // each write takes 300ms
	done()
	admit(t, q) // runs, never ends
	_, err := q.Admit(context.Background())
	wantOverloaded(t, err)
	if clock.Waiters() != 0 {
		t.Fatal("the refused write waited")
	}
}

// A caller that goes away while it waits leaves the queue with its context's
// error, not counted as refused.
func TestCallerGone(t *testing.T) {
	set, _ := newSet(1)
	q := set.Queue(admission.Callbacks)
	admit(t, q)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := q.Admit(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	if n := rejected(t, set); n != 0 {
		t.Fatalf("rejected counter %v, want 0", n)
	}
}
