package storetest

import (
	"testing"
	"time"

	"github.com/agentowl/agentowl"
)

// opsTests are the conformance subtests of agentowl.OperationStore: redrive and the
// views behind work-outbox, ingress-publications and work-doctor.
var opsTests = []suiteCase[*env]{
	{"OutboxFind", testOutboxFind},
	{"MessageRedrive", testMessageRedrive},
	{"OutboxHealth", testOutboxHealth},
	{"DecisionsAwaitingReceipt", testDecisionsAwaitingReceipt},
	{"WorkByCallbacks", testWorkByCallbacks},
	{"AttentionByMessage", testAttentionByMessage},
	{"CounterGet", testCounterGet},
}

// ---- factories

// workMessage returns a pending message of kind about subject to
// destination, created at created.
func workMessage(tenantID, kind, destination, subject string, created time.Time) *agentowl.OutboxMessage {
	m := newMessage(tenantID, created)
	m.Kind, m.Destination, m.Subject = kind, destination, subject
	return m
}

// ended makes m a message that ended in state at ended after attempts.
func ended(m *agentowl.OutboxMessage, state agentowl.MessageState, attempts int, at time.Time) *agentowl.OutboxMessage {
	m.State, m.Attempts, m.EndedAt, m.RetainUntil = state, attempts, ptr(at), ptr(at.Add(7*24*time.Hour))
	m.LastStatus, m.LastError = 503, "HTTP 503"
	return m
}

func newIncident(w *agentowl.Work, messageID string, at time.Time) *agentowl.AttentionItem {
	return &agentowl.AttentionItem{ID: wid("att"), TenantID: w.TenantID, Kind: "incident", Status: agentowl.AttentionOpen, AllowedDecisions: []string{},
		WorkID: w.ID, EndpointID: w.EndpointID, Summary: "Handoff failed", MessageID: messageID, CreatedAt: at, UpdatedAt: at}
}

func (e *env) attention(t *testing.T, it *agentowl.AttentionItem) *agentowl.AttentionItem {
	t.Helper()
	e.write(t, func(tx agentowl.Tx) error { return tx.AttentionCreate(e.ctx, it) })
	return it
}

// decided persists a question item of w and a decision on it made at at,
// pushed by messageID ("" for none).
func (e *env) decided(t *testing.T, w *agentowl.Work, messageID string, at time.Time) *agentowl.WorkDecision {
	t.Helper()
	it := &agentowl.AttentionItem{ID: wid("att"), TenantID: w.TenantID, Kind: "question", Status: agentowl.AttentionOpen, WorkID: w.ID,
		EndpointID: w.EndpointID, RequestID: "q-" + agentowl.NewID("")[:8], Revision: 1, Prompt: "Which?",
		AllowedDecisions: []string{"answer"}, ExpiresAt: ptr(at.Add(time.Hour)), ContentHash: hashOf("q"), Request: []byte(`{}`),
		CreatedAt: at, UpdatedAt: at}
	d := &agentowl.WorkDecision{WorkID: w.ID, ID: "dec-" + agentowl.NewID("")[:8], TenantID: w.TenantID, AttentionID: it.ID,
		RequestID: it.RequestID, Revision: 1, Decision: "answer", Answer: "blue", ContentHash: hashOf("d"), Body: []byte(`{"d":1}`),
		DecidedBy: "op", DecidedAt: at, MessageID: messageID}
	e.write(t, func(tx agentowl.Tx) error {
		if err := tx.AttentionCreate(e.ctx, it); err != nil {
			return err
		}
		return tx.WorkDecisionCreate(e.ctx, d)
	})
	return d
}

func entryIDs(es []*agentowl.OutboxEntry) []string {
	return mapped(es, func(v *agentowl.OutboxEntry) string { return v.Message.ID })
}

// ---- tests

func testOutboxFind(t *testing.T, e *env) {
	tn := e.tenant(t)
	ep, _, ev := e.thread(t, tn.ID)
	ep2, _, ev2 := e.thread(t, tn.ID)
	w := e.work(t, newWork(ep, ev, 1, e.now))
	// An event to an endpoint without agent work, the handoff of w, a push
	// of a decision on w, a handoff to the second endpoint, and an AAP
	// notification, a second apart, oldest first.
	plain := workMessage(tn.ID, "work.event", "endpoint:"+ep.ID, ev.ID, e.now)
	handoff := ended(workMessage(tn.ID, "work.handoff", "endpoint:"+ep.ID, w.ID, e.now.Add(time.Second)), agentowl.MessageFailed, 3, e.now)
	push := workMessage(tn.ID, "work.decision", "decision:"+ep.ID+"/"+w.ID+"/d1", w.ID, e.now.Add(2*time.Second))
	w2 := e.work(t, newWork(ep2, ev2, 1, e.now))
	other := ended(workMessage(tn.ID, "work.handoff", "endpoint:"+ep2.ID, w2.ID, e.now.Add(3*time.Second)), agentowl.MessageDelivered, 1, e.now)
	aap := newMessage(tn.ID, e.now.Add(4*time.Second))
	e.messages(t, plain, handoff, push, other, aap)
	// Another tenant's handoff of the same kinds is never listed.
	otherEP, _, otherEv := e.thread(t, e.tenant(t).ID)
	ow := e.work(t, newWork(otherEP, otherEv, 1, e.now))
	e.messages(t, workMessage(ow.TenantID, "work.handoff", "endpoint:"+otherEP.ID, ow.ID, e.now))

	work := []string{"work.event", "work.handoff", "work.decision"}
	find := func(p agentowl.OutboxFindParams) []string {
		t.Helper()
		p.TenantID = tn.ID
		return entryIDs(read(t, e, func(tx agentowl.Tx) ([]*agentowl.OutboxEntry, error) { return tx.OutboxFind(e.ctx, p) }))
	}
	equal(t, "work kinds, newest first", find(agentowl.OutboxFindParams{Kinds: work}), []string{other.ID, push.ID, handoff.ID, plain.ID})
	equal(t, "handoffs and pushes", find(agentowl.OutboxFindParams{Kinds: work[1:]}), []string{other.ID, push.ID, handoff.ID})
	equal(t, "no kinds", find(agentowl.OutboxFindParams{}), []string{})
	equal(t, "endpoint", find(agentowl.OutboxFindParams{Kinds: work, EndpointID: ep.ID}), []string{push.ID, handoff.ID, plain.ID})
	equal(t, "event: its plain delivery, its work's handoff and pushes", find(agentowl.OutboxFindParams{Kinds: work, EventID: ev.ID}),
		[]string{push.ID, handoff.ID, plain.ID})
	equal(t, "binding", find(agentowl.OutboxFindParams{Kinds: work, BindingID: ev2.BindingID}), []string{other.ID})
	equal(t, "work", find(agentowl.OutboxFindParams{Kinds: work, WorkID: w.ID}), []string{push.ID, handoff.ID})
	equal(t, "state", find(agentowl.OutboxFindParams{Kinds: work, State: agentowl.MessageFailed}), []string{handoff.ID})
	equal(t, "created at or before", find(agentowl.OutboxFindParams{Kinds: work, CreatedBefore: e.now.Add(time.Second)}),
		[]string{handoff.ID, plain.ID})
	equal(t, "limit", find(agentowl.OutboxFindParams{Kinds: work, Limit: 1}), []string{other.ID})
	equal(t, "AAP kind", find(agentowl.OutboxFindParams{Kinds: []string{aap.Kind}}), []string{aap.ID})

	get := func(id string) *agentowl.OutboxEntry {
		t.Helper()
		return read(t, e, func(tx agentowl.Tx) (*agentowl.OutboxEntry, error) { return tx.OutboxGet(e.ctx, id) })
	}
	equal(t, "handoff entry", get(handoff.ID), &agentowl.OutboxEntry{Message: handoff, WorkID: w.ID, EventID: ev.ID,
		BindingID: ev.BindingID, Channel: "webhook", EndpointID: ep.ID})
	equal(t, "plain entry", get(plain.ID), &agentowl.OutboxEntry{Message: plain, EventID: ev.ID, BindingID: ev.BindingID,
		Channel: "webhook", EndpointID: ep.ID})
	equal(t, "AAP entry", get(aap.ID), &agentowl.OutboxEntry{Message: aap})
	wantErr(t, "OutboxGet unknown", e.readErr(func(tx agentowl.Tx) error {
		_, err := tx.OutboxGet(e.ctx, agentowl.NewID(""))
		return err
	}), agentowl.ErrNotFound)
}

func testMessageRedrive(t *testing.T, e *env) {
	tn := e.tenant(t)
	failed := newMessage(tn.ID, e.now)
	delivered := ended(newMessage(tn.ID, e.now), agentowl.MessageDelivered, 1, e.now)
	pending := msgDue(tn.ID, e.now, e.now.Add(24*time.Hour))
	e.messages(t, failed, delivered, pending)
	// Three attempts fail; the third ends the message.
	for n := 1; n <= 3; n++ {
		at := e.now.Add(time.Duration(n) * time.Minute)
		if c := e.claim(t, "w0", at, at.Add(time.Minute), 10); len(c) != 1 || c[0].Attempts != n {
			t.Fatalf("claim %d = %s", n, show(c))
		}
		p := agentowl.FinishParams{ID: failed.ID, Owner: "w0", Attempt: newAttempt(failed, n, at, 503, "HTTP 503"),
			State: agentowl.MessagePending, NextAttempt: at.Add(time.Minute)}
		if n == 3 {
			p.State, p.RetainUntil = agentowl.MessageFailed, ptr(e.now.Add(7*24*time.Hour))
		}
		e.finish(t, p)
	}
	failed = e.getMessage(t, failed.ID)
	redrive := func(id string, from ...agentowl.MessageState) (*agentowl.OutboxMessage, error) {
		var m *agentowl.OutboxMessage
		err := e.writeErr(func(tx agentowl.Tx) (err error) {
			m, err = tx.MessageRedrive(e.ctx, agentowl.RedriveParams{ID: id, From: from, Now: e.now.Add(2 * time.Hour),
				DeadlineAt: e.now.Add(74 * time.Hour)})
			return err
		})
		return m, err
	}
	both := []agentowl.MessageState{agentowl.MessageFailed, agentowl.MessageCancelled}
	got, err := redrive(failed.ID, both...)
	if err != nil {
		t.Fatal(err)
	}
	want := *failed
	want.State, want.NextAttempt, want.DeadlineAt = agentowl.MessagePending, e.now.Add(2*time.Hour), e.now.Add(74*time.Hour)
	want.EndedAt, want.RetainUntil, want.LastStatus, want.LastError = nil, nil, 0, ""
	want.AttemptBase, want.Redrives = 3, 1
	equal(t, "redriven message", got, &want)
	equal(t, "redriven message read back", e.getMessage(t, failed.ID), &want)

	_, err = redrive(delivered.ID, both...)
	wantErr(t, "redrive of a delivered message", err, agentowl.ErrConflict)
	_, err = redrive(pending.ID, both...)
	wantErr(t, "redrive of a pending message", err, agentowl.ErrConflict)
	_, err = redrive(failed.ID, both...)
	wantErr(t, "a second redrive while the first series runs", err, agentowl.ErrConflict)
	_, err = redrive(agentowl.NewID(""), both...)
	wantErr(t, "redrive of an unknown message", err, agentowl.ErrNotFound)
	_, err = redrive(delivered.ID)
	wantErr(t, "redrive from no state", err, agentowl.ErrConflict)
	equal(t, "the delivered message is untouched", e.getMessage(t, delivered.ID), delivered)

	// The new series' attempts are numbered on from the old ones: the claim
	// makes attempt 4, and its record sits beside the earlier three.
	claimed := e.claim(t, "w1", e.now.Add(2*time.Hour), e.now.Add(2*time.Hour+time.Minute), 10)
	if len(claimed) != 1 || claimed[0].ID != failed.ID || claimed[0].Attempts != 4 || claimed[0].AttemptBase != 3 {
		t.Fatalf("claim after redrive = %s, want %s at attempt 4 of base 3", show(claimed), failed.ID)
	}
	e.finish(t, agentowl.FinishParams{ID: failed.ID, Owner: "w1", Attempt: newAttempt(failed, 4, e.now.Add(2*time.Hour), 200, ""),
		State: agentowl.MessageDelivered, RetainUntil: ptr(e.now.Add(96 * time.Hour))})
	if got := e.getMessage(t, failed.ID); got.State != agentowl.MessageDelivered || got.Redrives != 1 || got.AttemptBase != 3 {
		t.Errorf("after the new series delivered: %s", show(got))
	}
	var ns []int
	for _, a := range e.attempts(t, failed.ID) {
		ns = append(ns, a.N)
	}
	equal(t, "attempts of both series", ns, []int{1, 2, 3, 4})
	_, err = redrive(failed.ID, both...)
	wantErr(t, "redrive after the new series delivered", err, agentowl.ErrConflict)
}

func testOutboxHealth(t *testing.T, e *env) {
	tn := e.tenant(t)
	ep, _, ev := e.thread(t, tn.ID)
	quiet, _, quietEv := e.thread(t, tn.ID)
	w := e.work(t, newWork(ep, ev, 1, e.now))
	qw := e.work(t, newWork(quiet, quietEv, 1, e.now))
	bound := e.now.Add(-5 * time.Minute) // the stuck bound
	handoff := func(created time.Time) *agentowl.OutboxMessage {
		return workMessage(tn.ID, "work.handoff", "endpoint:"+ep.ID, w.ID, created)
	}
	failing := handoff(e.now)
	failing.Attempts, failing.LastStatus, failing.LastError = 2, 500, "HTTP 500"
	failedOpen := ended(handoff(e.now), agentowl.MessageFailed, 5, e.now)
	failedAcked := ended(handoff(e.now), agentowl.MessageFailed, 5, e.now)
	failedReviewed := ended(handoff(e.now), agentowl.MessageFailed, 5, e.now)
	failedNoIncident := ended(handoff(e.now), agentowl.MessageFailed, 5, e.now)
	stuckOld := msgDue(tn.ID, bound.Add(-time.Hour), bound.Add(-time.Hour))
	stuckOld.Kind, stuckOld.Destination, stuckOld.Subject = "work.event", "endpoint:"+ep.ID, ev.ID
	stuckLapsed := withLease(handoff(bound.Add(-time.Minute)), "dead", bound.Add(-time.Second))
	stuckLapsed.NextAttempt = bound.Add(-time.Minute)
	inFlight := withLease(handoff(bound.Add(-time.Minute)), "alive", e.now.Add(time.Minute))
	inFlight.NextAttempt = bound.Add(-time.Minute)
	dueRecently := msgDue(tn.ID, e.now, bound.Add(time.Second))
	dueRecently.Kind, dueRecently.Destination, dueRecently.Subject = "work.handoff", "endpoint:"+ep.ID, w.ID
	aapStuck := msgDue(tn.ID, bound.Add(-2*time.Hour), bound.Add(-2*time.Hour))
	delivered := ended(workMessage(tn.ID, "work.handoff", "endpoint:"+quiet.ID, qw.ID, e.now), agentowl.MessageDelivered, 1, e.now)
	e.messages(t, failing, failedOpen, failedAcked, failedReviewed, failedNoIncident, stuckOld, stuckLapsed, inFlight, dueRecently,
		aapStuck, delivered)
	acked := newIncident(w, failedAcked.ID, e.now)
	acked.Status = agentowl.AttentionAcknowledged
	reviewed := newIncident(w, failedReviewed.ID, e.now)
	reviewed.Status, reviewed.Resolution, reviewed.ResolvedAt = agentowl.AttentionResolved, "reviewed", ptr(e.now)
	e.attention(t, newIncident(w, failedOpen.ID, e.now))
	e.attention(t, acked)
	e.attention(t, reviewed)
	// Another tenant's troubles are not counted.
	otherEP, _, otherEv := e.thread(t, e.tenant(t).ID)
	ow := e.work(t, newWork(otherEP, otherEv, 1, e.now))
	e.messages(t, ended(workMessage(ow.TenantID, "work.handoff", "endpoint:"+otherEP.ID, ow.ID, e.now), agentowl.MessageFailed, 1, e.now))

	got := read(t, e, func(tx agentowl.Tx) ([]*agentowl.EndpointOutboxHealth, error) {
		return tx.OutboxHealth(e.ctx, tn.ID, bound)
	})
	want := []*agentowl.EndpointOutboxHealth{
		{EndpointID: "", Stuck: 1, OldestStuck: ptr(aapStuck.NextAttempt)},
		// inFlight counts: leased now, it has still gone without a recorded
		// attempt since before the bound (a deferral would lease it too).
		{EndpointID: ep.ID, Failing: 1, Failed: 3, Stuck: 3, OldestStuck: ptr(stuckOld.NextAttempt)},
	}
	equal(t, "outbox health", got, want)
	none := read(t, e, func(tx agentowl.Tx) ([]*agentowl.EndpointOutboxHealth, error) {
		return tx.OutboxHealth(e.ctx, e.tenant(t).ID, bound)
	})
	equal(t, "a tenant without messages", nonNil(none), []*agentowl.EndpointOutboxHealth{})
}

func testDecisionsAwaitingReceipt(t *testing.T, e *env) {
	tn := e.tenant(t)
	ep, _, ev := e.thread(t, tn.ID)
	w := e.work(t, newWork(ep, ev, 1, e.now))
	done := e.work(t, newWork(ep, ev, 2, e.now))
	done.Status, done.Sequence, done.EndedAt = agentowl.WorkCompleted, 1, ptr(e.now)
	e.write(t, func(tx agentowl.Tx) error { return tx.WorkUpdate(e.ctx, done) })
	before := e.now.Add(-10 * time.Minute)

	push := ended(workMessage(tn.ID, "work.decision", "decision:"+ep.ID+"/"+w.ID+"/x", w.ID, before), agentowl.MessageFailed, 4, e.now)
	e.messages(t, push)
	failedPush := e.decided(t, w, push.ID, before.Add(-2*time.Minute))
	noPush := e.decided(t, w, "", before.Add(-time.Minute))
	received := e.decided(t, w, "", before.Add(-3*time.Minute))
	e.write(t, func(tx agentowl.Tx) error { return tx.DecisionSetReceipt(e.ctx, w.ID, received.ID, e.now, "recovery") })
	e.decided(t, w, "", before.Add(time.Second))     // too recent
	e.decided(t, done, "", before.Add(-time.Minute)) // its work ended
	otherEP, _, otherEv := e.thread(t, e.tenant(t).ID)
	e.decided(t, e.work(t, newWork(otherEP, otherEv, 1, e.now)), "", before.Add(-time.Hour))

	awaiting := func(limit int) []*agentowl.AwaitingReceipt {
		t.Helper()
		return read(t, e, func(tx agentowl.Tx) ([]*agentowl.AwaitingReceipt, error) {
			return tx.DecisionsAwaitingReceipt(e.ctx, tn.ID, before, limit)
		})
	}
	equal(t, "awaiting receipt, oldest first", awaiting(10), []*agentowl.AwaitingReceipt{
		{Decision: failedPush, EndpointID: ep.ID, PushState: agentowl.MessageFailed},
		{Decision: noPush, EndpointID: ep.ID},
	})
	equal(t, "limit", len(awaiting(1)), 1)
}

func testWorkByCallbacks(t *testing.T, e *env) {
	tn := e.tenant(t)
	ep, _, ev := e.thread(t, tn.ID)
	set := func(w *agentowl.Work, callbacks int, end bool) *agentowl.Work {
		w.Callbacks, w.Status, w.Sequence = callbacks, agentowl.WorkRunning, 1
		if end {
			w.Status, w.EndedAt = agentowl.WorkCompleted, ptr(e.now)
		}
		e.write(t, func(tx agentowl.Tx) error { return tx.WorkUpdate(e.ctx, w) })
		return w
	}
	many := set(e.work(t, newWork(ep, ev, 1, e.now)), 9000, false)
	most := set(e.work(t, newWork(ep, ev, 2, e.now)), 9999, false)
	set(e.work(t, newWork(ep, ev, 3, e.now)), 7999, false)
	set(e.work(t, newWork(ep, ev, 4, e.now)), 10000, true) // ended: it takes no more callbacks
	otherEP, _, otherEv := e.thread(t, e.tenant(t).ID)
	set(e.work(t, newWork(otherEP, otherEv, 1, e.now)), 9999, false)

	byCallbacks := func(limit int) []string {
		t.Helper()
		return workIDs(read(t, e, func(tx agentowl.Tx) ([]*agentowl.Work, error) { return tx.WorkByCallbacks(e.ctx, tn.ID, 8000, limit) }))
	}
	equal(t, "open work at or over the bound, most first", byCallbacks(10), []string{most.ID, many.ID})
	equal(t, "limit", byCallbacks(1), []string{most.ID})
}

func testAttentionByMessage(t *testing.T, e *env) {
	tn := e.tenant(t)
	ep, _, ev := e.thread(t, tn.ID)
	w := e.work(t, newWork(ep, ev, 1, e.now))
	msg := ended(workMessage(tn.ID, "work.handoff", "endpoint:"+ep.ID, w.ID, e.now), agentowl.MessageFailed, 2, e.now)
	e.messages(t, msg)
	first := e.attention(t, newIncident(w, msg.ID, e.now))
	byMessage := func() (*agentowl.AttentionItem, error) {
		var it *agentowl.AttentionItem
		err := e.readErr(func(tx agentowl.Tx) (err error) {
			it, err = tx.AttentionByMessage(e.ctx, msg.ID)
			return err
		})
		return it, err
	}
	got, err := byMessage()
	if err != nil {
		t.Fatal(err)
	}
	equal(t, "incident of the message", got, first)
	wantErr(t, "a second incident of the message", e.writeErr(func(tx agentowl.Tx) error {
		return tx.AttentionCreate(e.ctx, newIncident(w, msg.ID, e.now))
	}), agentowl.ErrConflict)

	e.write(t, func(tx agentowl.Tx) error { return tx.AttentionDetachMessage(e.ctx, first.ID) })
	_, err = byMessage()
	wantErr(t, "incident after detaching", err, agentowl.ErrNotFound)
	kept := read(t, e, func(tx agentowl.Tx) (*agentowl.AttentionItem, error) { return tx.AttentionGet(e.ctx, first.ID) })
	first.MessageID = ""
	equal(t, "the detached incident keeps the rest", kept, first)
	second := e.attention(t, newIncident(w, msg.ID, e.now.Add(time.Hour)))
	if got, err := byMessage(); err != nil || got.ID != second.ID {
		t.Errorf("after a new incident: %v, %v; want %s", got, err, second.ID)
	}
	wantErr(t, "detach an unknown item", e.writeErr(func(tx agentowl.Tx) error {
		return tx.AttentionDetachMessage(e.ctx, "att_missing")
	}), agentowl.ErrNotFound)
}

func testCounterGet(t *testing.T, e *env) {
	window := e.now.Truncate(time.Minute)
	get := func(key string, at time.Time) int64 {
		t.Helper()
		return read(t, e, func(tx agentowl.Tx) (int64, error) { return tx.CounterGet(e.ctx, key, at) })
	}
	equal(t, "no counter", get("k", window), int64(0))
	e.write(t, func(tx agentowl.Tx) error {
		_, err := tx.CounterAdd(e.ctx, "k", window, 7)
		return err
	})
	equal(t, "counted", get("k", window), int64(7))
	equal(t, "another window", get("k", window.Add(time.Minute)), int64(0))
	equal(t, "another key", get("k2", window), int64(0))
}
