// Package storetest is the conformance suite that every aap.Store
// implementation passes.
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentowl/agentowl/aap"
)

// Run runs the suite; open returns a fresh, empty store closed at test end.
func Run(t *testing.T, open func(t *testing.T) aap.Store) {
	t.Run("executions", func(t *testing.T) { t.Parallel(); executions(t, open(t)) })
	t.Run("transition is compare-and-set", func(t *testing.T) { t.Parallel(); transitionRace(t, open(t)) })
	t.Run("registrations", func(t *testing.T) { t.Parallel(); registrations(t, open(t)) })
	t.Run("events and wake-ups", func(t *testing.T) { t.Parallel(); events(t, open(t)) })
}

var t0 = time.Date(2026, 9, 16, 12, 0, 0, 0, time.UTC)

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func executions(t *testing.T, s aap.Store) {
	ctx := context.Background()
	e := &aap.Execution{Key: "k1", Call: aap.Call{Tool: "issue_refund", Arguments: json.RawMessage(`{"amount":4900,"b":[1,2]}`),
		Timeout: "30m", AgentReasoning: "why", Context: json.RawMessage(`{"s":1}`)}, State: aap.ExecSubmitting, CreatedAt: t0, UpdatedAt: t0}
	must(t, s.CreateExecution(ctx, e))
	if err := s.CreateExecution(ctx, e); !errors.Is(err, aap.ErrConflict) {
		t.Fatalf("second CreateExecution: %v, want ErrConflict", err)
	}
	got, err := s.GetExecution(ctx, "k1")
	must(t, err)
	if string(got.Call.Arguments) != string(e.Call.Arguments) || string(got.Call.Context) != `{"s":1}` || got.Call.AgentReasoning != "why" ||
		got.State != aap.ExecSubmitting || !got.CreatedAt.Equal(t0) || got.RequestID != "" {
		t.Fatalf("GetExecution = %+v", got)
	}
	if _, err := s.GetExecution(ctx, "nope"); !errors.Is(err, aap.ErrNotFound) {
		t.Fatalf("GetExecution(unknown) = %v", err)
	}
	if _, err := s.ExecutionByRequest(ctx, "nope"); !errors.Is(err, aap.ErrNotFound) {
		t.Fatalf("ExecutionByRequest(unknown) = %v", err)
	}
	rid := uuid.NewString()
	ok, err := s.Transition(ctx, "k1", []aap.ExecState{aap.ExecWaiting}, aap.Change{State: aap.ExecStarted, At: t0})
	must(t, err)
	if ok {
		t.Fatal("Transition from a state it is not in applied")
	}
	ok, err = s.Transition(ctx, "k1", []aap.ExecState{aap.ExecSubmitting}, aap.Change{State: aap.ExecWaiting, RequestID: rid, At: t0.Add(time.Second)})
	must(t, err)
	if !ok {
		t.Fatal("Transition submitting→waiting did not apply")
	}
	got, err = s.ExecutionByRequest(ctx, rid)
	must(t, err)
	if got.Key != "k1" || got.State != aap.ExecWaiting || !got.UpdatedAt.Equal(t0.Add(time.Second)) {
		t.Fatalf("ExecutionByRequest = %+v", got)
	}
	// Another execution may not take the same request ID.
	must(t, s.CreateExecution(ctx, &aap.Execution{Key: "k2", Call: e.Call, State: aap.ExecSubmitting, CreatedAt: t0.Add(time.Second), UpdatedAt: t0}))
	if _, err := s.Transition(ctx, "k2", []aap.ExecState{aap.ExecSubmitting}, aap.Change{State: aap.ExecWaiting, RequestID: rid, At: t0}); !errors.Is(err, aap.ErrConflict) {
		t.Fatalf("duplicate request ID: %v, want ErrConflict", err)
	}
	// RequestID "" keeps the saved one.
	ok, err = s.Transition(ctx, "k1", []aap.ExecState{aap.ExecWaiting}, aap.Change{State: aap.ExecStarted, At: t0})
	must(t, err)
	ok2, err := s.Transition(ctx, "k1", []aap.ExecState{aap.ExecStarted}, aap.Change{State: aap.ExecFinished, Result: json.RawMessage(`{"ok":true}`), At: t0})
	must(t, err)
	got, err = s.GetExecution(ctx, "k1")
	must(t, err)
	if !ok || !ok2 || got.RequestID != rid || got.State != aap.ExecFinished || string(got.Result) != `{"ok":true}` {
		t.Fatalf("after start and finish: %+v", got)
	}
	list, err := s.ListExecutions(ctx, aap.ExecSubmitting, aap.ExecWaiting)
	must(t, err)
	if len(list) != 1 || list[0].Key != "k2" {
		t.Fatalf("ListExecutions = %v", list)
	}
}

func transitionRace(t *testing.T, s aap.Store) {
	ctx := context.Background()
	must(t, s.CreateExecution(ctx, &aap.Execution{Key: "race", Call: aap.Call{Tool: "t", Arguments: json.RawMessage(`{}`), Timeout: "1m"},
		State: aap.ExecSubmitting, CreatedAt: t0, UpdatedAt: t0}))
	var wins atomic.Int32
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			ok, err := s.Transition(ctx, "race", []aap.ExecState{aap.ExecSubmitting}, aap.Change{State: aap.ExecStarted, RequestID: uuid.NewString(), At: t0})
			if err != nil {
				t.Error(err)
			}
			if ok {
				wins.Add(1)
			}
		})
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Fatalf("%d concurrent transitions won, want exactly 1", wins.Load())
	}
}

func registrations(t *testing.T, s aap.Store) {
	ctx := context.Background()
	reg := &aap.Registration{ID: uuid.NewString(), Secret: "whsec_a", CreatedAt: t0}
	must(t, s.PutRegistration(ctx, reg))
	must(t, s.PutRegistration(ctx, reg)) // same again: no-op
	if err := s.PutRegistration(ctx, &aap.Registration{ID: reg.ID, Secret: "whsec_b", CreatedAt: t0}); !errors.Is(err, aap.ErrConflict) {
		t.Fatalf("other secret: %v, want ErrConflict", err)
	}
	inst1, inst2 := uuid.NewString(), uuid.NewString()
	must(t, s.BindRegistration(ctx, reg.ID, inst1, false))
	must(t, s.BindRegistration(ctx, reg.ID, inst2, false)) // unconfirmed: re-bindable (a retried creation proposes a new ID)
	must(t, s.BindRegistration(ctx, reg.ID, inst2, true))
	if err := s.BindRegistration(ctx, reg.ID, inst1, false); !errors.Is(err, aap.ErrConflict) {
		t.Fatalf("re-binding a confirmed registration: %v, want ErrConflict", err)
	}
	must(t, s.BindRegistration(ctx, reg.ID, inst2, false)) // the same instance again is fine
	if err := s.BindRegistration(ctx, uuid.NewString(), inst1, false); !errors.Is(err, aap.ErrNotFound) {
		t.Fatalf("unknown registration: %v, want ErrNotFound", err)
	}
	got, err := s.GetRegistration(ctx, reg.ID)
	must(t, err)
	if got.InstanceID != inst2 || !got.Confirmed || got.Secret != "whsec_a" {
		t.Fatalf("GetRegistration = %+v", got)
	}
	list, err := s.InstanceRegistrations(ctx, inst2)
	must(t, err)
	if len(list) != 1 || list[0].ID != reg.ID {
		t.Fatalf("InstanceRegistrations = %v", list)
	}
	must(t, s.DeleteRegistration(ctx, reg.ID))
	must(t, s.DeleteRegistration(ctx, reg.ID))
	if _, err := s.GetRegistration(ctx, reg.ID); !errors.Is(err, aap.ErrNotFound) {
		t.Fatalf("after delete: %v", err)
	}
}

func events(t *testing.T, s aap.Store) {
	ctx := context.Background()
	inst := uuid.NewString()
	reg := &aap.Registration{ID: uuid.NewString(), Secret: "whsec_a", CreatedAt: t0}
	must(t, s.PutRegistration(ctx, reg))
	must(t, s.BindRegistration(ctx, reg.ID, inst, false))
	var ids []string
	for i := range 3 {
		e := &aap.Event{ID: uuid.NewString(), InstanceID: inst, RequestID: uuid.NewString(), RegistrationID: reg.ID,
			CreatedAt: t0, ReceivedAt: t0.Add(time.Duration(i) * time.Second), KeepUntil: t0.Add(aap.EventRetention), Body: []byte(`{}`)}
		created, err := s.RecordEvent(ctx, e)
		must(t, err)
		again, err := s.RecordEvent(ctx, e)
		must(t, err)
		if !created || again {
			t.Fatalf("RecordEvent created=%v, duplicate created=%v", created, again)
		}
		ids = append(ids, e.ID)
	}
	if r, _ := s.GetRegistration(ctx, reg.ID); !r.Confirmed {
		t.Fatal("an accepted event did not confirm its registration")
	}
	now := t0.Add(time.Minute)
	ws, err := s.LeaseWakeups(ctx, now, now.Add(30*time.Second), 2)
	must(t, err)
	if len(ws) != 2 || ws[0].EventID != ids[0] || ws[1].EventID != ids[1] || ws[0].Attempts != 1 || ws[0].InstanceID != inst {
		t.Fatalf("first lease = %+v", ws)
	}
	ws, err = s.LeaseWakeups(ctx, now, now.Add(30*time.Second), 10)
	must(t, err)
	if len(ws) != 1 || ws[0].EventID != ids[2] {
		t.Fatalf("second lease = %+v, want only the unleased one", ws)
	}
	must(t, s.AckWakeup(ctx, ids[0], now))
	must(t, s.AckWakeup(ctx, ids[0], now)) // idempotent
	if err := s.AckWakeup(ctx, "nope", now); !errors.Is(err, aap.ErrNotFound) {
		t.Fatalf("AckWakeup(unknown) = %v", err)
	}
	later := now.Add(31 * time.Second)
	ws, err = s.LeaseWakeups(ctx, later, later.Add(30*time.Second), 10)
	must(t, err)
	if len(ws) != 2 || ws[0].EventID != ids[1] || ws[0].Attempts != 2 {
		t.Fatalf("after the lease lapsed = %+v, want the two unacknowledged ones again", ws)
	}
	// Purge keeps event IDs until KeepUntil, so duplicates stay recognised.
	n, err := s.PurgeEvents(ctx, t0.Add(aap.EventRetention-time.Second))
	must(t, err)
	if n != 0 {
		t.Fatalf("purged %d events before their retention ended", n)
	}
	n, err = s.PurgeEvents(ctx, t0.Add(aap.EventRetention+time.Second))
	must(t, err)
	if n != 3 {
		t.Fatalf("purged %d events, want 3", n)
	}
}
