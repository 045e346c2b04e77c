package admission_test

import (
	"context"
	"errors"
	"sync/atomic"
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
	return counted(t, set, "agentowl_admission_rejected_total")
}

// counted sums the counter name over the surfaces.
func counted(t *testing.T, set *admission.Set, name string) float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(set.Collectors()...)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, mf := range mfs {
		if mf.GetName() == name {
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

// The delivery backlog takes its share of the maximum wait: while it is the
// maximum wait or more, a write is refused at once even with a turn free
// (counted as refused, and as refused for the backlog); below it, a write
// that must wait does so for the maximum wait less the backlog and less the
// time a write takes (the pace of the last writes), so that its wait, its
// write and the backlog ahead of its delivery fit in the maximum wait.
func TestDeliveryBacklogTakesTheWait(t *testing.T) {
	clock := clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var backlog atomic.Int64
	set := admission.New(admission.Config{Concurrency: 1, MaxWait: 250 * time.Millisecond,
		Backlog: func() time.Duration { return time.Duration(backlog.Load()) }}, clock)
	q := set.Queue(admission.Decisions)

	backlog.Store(int64(250 * time.Millisecond))
	_, err := q.Admit(context.Background())
	wantOverloaded(t, err)
	if clock.Waiters() != 0 || q.Waiting() != 0 {
		t.Fatal("the write refused for the backlog waited")
	}
	if n, b := rejected(t, set), counted(t, set, "agentowl_admission_backlog_rejected_total"); n != 1 || b != 1 {
		t.Fatalf("rejected %v, for the backlog %v; want 1 and 1", n, b)
	}

	backlog.Store(int64(100 * time.Millisecond))
	done := admit(t, q) // a turn is free: it runs despite the backlog
	clock.Advance(50 * time.Millisecond)
	done() // writes take 50ms
	held := admit(t, q)
	got := make(chan error, 1)
	go func() {
		_, err := q.Admit(context.Background())
		got <- err
	}()
	for clock.Waiters() == 0 {
		time.Sleep(time.Millisecond) // synchronizes only: the write has parked on the clock
	}
	clock.Advance(99 * time.Millisecond) // 250 − 100 (backlog) − 50 (its write) = 100ms to wait
	select {
	case err := <-got:
		t.Fatalf("the write ended its wait before its budget: %v", err)
	default:
	}
	clock.Advance(time.Millisecond)
	wantOverloaded(t, <-got)
	if n, b := rejected(t, set), counted(t, set, "agentowl_admission_backlog_rejected_total"); n != 2 || b != 1 {
		t.Fatalf("rejected %v, for the backlog %v; want 2 and 1", n, b)
	}
	held()
	backlog.Store(0)
	admit(t, q)()
}
