package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentowl/agentowl"
)

// outboxTests are the conformance subtests of the delivery engine's outbox
// (agentowl.OutboxStore) and its part in Purge; Exercise runs them with the others,
// each against a fresh store, since claims and stats see every message.
var outboxTests = []suiteCase[*env]{
	{"MessageRoundTrip", testMessageRoundTrip},
	{"MessagePayloadRef", testMessagePayloadRef},
	{"MessageClaim", testMessageClaim},
	{"MessageClaimConcurrent", testMessageClaimConcurrent},
	{"MessageFinish", testMessageFinish},
	{"MessageFinishAfterLeaseLost", testMessageFinishAfterLeaseLost},
	{"MessageFinishAll", testMessageFinishAll},
	{"MessageDefer", testMessageDefer},
	{"MessageCancelDestination", testMessageCancelDestination},
	{"MessageList", testMessageList},
	{"MessageStats", testMessageStats},
	{"MessageUndefer", testMessageUndefer},
	{"MessageHold", testMessageHold},
	{"MessagePurge", testMessagePurge},
	{"MessagePurgeKeepsRequest", testMessagePurgeKeepsRequest},
	{"SlotLease", testSlotLease},
	{"SlotLeaseConcurrent", testSlotLeaseConcurrent},
	{"EngineReports", testEngineReports},
}

// ---- outbox factories and helpers

// msgBody is a body no text round trip would survive unchanged: a NUL, bytes
// that are not UTF-8, insignificant JSON whitespace and a trailing CRLF.
var msgBody = []byte("{\"id\": \"x\",  \"n\":4900.0,\"raw\":\"\x00\xff\xfe\"}\r\n")

// newMessage returns a pending message, due at created, with no lease and no
// attempt yet.
func newMessage(tenantID string, created time.Time) *agentowl.OutboxMessage {
	return &agentowl.OutboxMessage{
		ID: agentowl.NewID(""), TenantID: tenantID, Kind: "aap.request_resolved", Destination: "instance:" + agentowl.NewID(""),
		Subject: agentowl.NewID(""), Body: slices.Clone(msgBody), CreatedAt: created, DeadlineAt: created.Add(24 * time.Hour),
		State: agentowl.MessagePending, NextAttempt: created,
	}
}

// msgDue returns a pending message created at created and due at due.
func msgDue(tenantID string, created, due time.Time) *agentowl.OutboxMessage {
	m := newMessage(tenantID, created)
	m.NextAttempt = due
	return m
}

// msgEnded returns a message in a terminal state with its retention.
func msgEnded(tenantID string, state agentowl.MessageState, ended, retainUntil time.Time) *agentowl.OutboxMessage {
	m := newMessage(tenantID, ended.Add(-time.Hour))
	m.State, m.Attempts, m.EndedAt, m.RetainUntil = state, 1, ptr(ended), ptr(retainUntil)
	return m
}

// withLease returns m as a claim by owner until until leaves it.
func withLease(m *agentowl.OutboxMessage, owner string, until time.Time) *agentowl.OutboxMessage {
	c := *m
	c.Attempts++
	c.LeaseOwner, c.LeaseUntil = owner, ptr(until)
	return &c
}

// messages persists ms in one transaction.
func (e *env) messages(t *testing.T, ms ...*agentowl.OutboxMessage) {
	t.Helper()
	e.write(t, func(tx agentowl.Tx) error {
		for _, m := range ms {
			if err := tx.MessageCreate(e.ctx, m); err != nil {
				return err
			}
		}
		return nil
	})
}

func (e *env) getMessage(t *testing.T, id string) *agentowl.OutboxMessage {
	t.Helper()
	return read(t, e, func(tx agentowl.Tx) (*agentowl.OutboxMessage, error) { return tx.MessageGet(e.ctx, id) })
}

// claim runs one MessageClaim in its own transaction.
func (e *env) claim(t *testing.T, owner string, now, leaseUntil time.Time, limit int) []*agentowl.OutboxMessage {
	t.Helper()
	var got []*agentowl.OutboxMessage
	e.write(t, func(tx agentowl.Tx) error {
		var err error
		got, err = tx.MessageClaim(e.ctx, agentowl.ClaimParams{Now: now, LeaseUntil: leaseUntil, Owner: owner, Limit: limit})
		return err
	})
	return nonNil(got)
}

func (e *env) finishErr(p agentowl.FinishParams) error {
	return e.writeErr(func(tx agentowl.Tx) error { return tx.MessageFinish(e.ctx, p) })
}

func (e *env) finish(t *testing.T, p agentowl.FinishParams) {
	t.Helper()
	e.write(t, func(tx agentowl.Tx) error { return tx.MessageFinish(e.ctx, p) })
}

func (e *env) attempts(t *testing.T, id string) []*agentowl.Attempt {
	t.Helper()
	return nonNil(read(t, e, func(tx agentowl.Tx) ([]*agentowl.Attempt, error) { return tx.AttemptList(e.ctx, id) }))
}

// purge runs the AAP's retention at now, every class in the order
// internal/maintenance runs them (deliveries before the requests they are
// about), and reports how many rows went.
func (e *env) purge(t *testing.T, now time.Time) int64 {
	t.Helper()
	var n int64
	for _, c := range []struct {
		class  agentowl.PurgeClass
		before time.Time
	}{
		{agentowl.PurgeDeliveries, now}, {agentowl.PurgeApprovalRequests, now}, {agentowl.PurgeIdempotencyKeys, now},
		{agentowl.PurgeRateCounters, now.Add(-24 * time.Hour)}, {agentowl.PurgeDeliverySlots, now.Add(-24 * time.Hour)},
		{agentowl.PurgeInstances, now.Add(-agentowl.RetentionAfterDecision)},
	} {
		e.write(t, func(tx agentowl.Tx) error {
			got, err := tx.PurgeBatch(e.ctx, agentowl.PurgeParams{Class: c.class, Before: c.before, Limit: 10_000})
			n += got.Deleted
			return err
		})
	}
	return n
}

// messageGone reports whether MessageGet finds no message id, failing the
// test on any other error.
func (e *env) messageGone(t *testing.T, id string) bool {
	t.Helper()
	err := e.readErr(func(tx agentowl.Tx) error { _, err := tx.MessageGet(e.ctx, id); return err })
	if err != nil && !errors.Is(err, agentowl.ErrNotFound) {
		t.Fatalf("get message %s: %v", id, err)
	}
	return err != nil
}

// newAttempt returns the record of attempt n of m, started at start.
func newAttempt(m *agentowl.OutboxMessage, n int, start time.Time, status int, errText string) agentowl.Attempt {
	return agentowl.Attempt{
		EventID: m.ID, N: n, URL: "https://hooks.example.com/aap?m=" + m.ID, StartedAt: start,
		EndedAt: start.Add(1500 * time.Millisecond), StatusCode: status, Error: errText,
	}
}

// equalClaim checks a claim's result against want, oldest due first. The
// order is reported without stopping the test, so that one ordering defect
// does not hide what the rest of the test would find.
func equalClaim(t *testing.T, what string, got, want []*agentowl.OutboxMessage) {
	t.Helper()
	if g, w := msgIDs(got), msgIDs(want); !slices.Equal(g, w) {
		t.Errorf("%s: claimed in order %v, want oldest due first %v", what, g, w)
	}
	byID := func(ms []*agentowl.OutboxMessage) []*agentowl.OutboxMessage {
		ms = slices.Clone(ms)
		slices.SortFunc(ms, func(a, b *agentowl.OutboxMessage) int { return strings.Compare(a.ID, b.ID) })
		return ms
	}
	equal(t, what, byID(got), byID(want))
}

func msgIDs(ms []*agentowl.OutboxMessage) []string {
	return mapped(ms, func(m *agentowl.OutboxMessage) string { return m.ID })
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// ---- outbox tests

func testMessageRoundTrip(t *testing.T, e *env) {
	ten := e.tenant(t)
	bare := newMessage(ten.ID, e.now)
	full := newMessage(ten.ID, e.now.Add(time.Second))
	full.Kind, full.Body = "aap.webhook_verification", []byte{0x00, 0x01, 0xff, 0x7f, ' ', '\n', 0x00}
	full.State, full.Attempts, full.NextAttempt = agentowl.MessageFailed, 7, e.now.Add(3*time.Minute)
	full.LeaseOwner, full.LeaseUntil = "worker-1", ptr(e.now.Add(4*time.Minute))
	full.LastStatus, full.LastError = 503, "upstream said: \"busy\"\nretry later"
	full.EndedAt, full.RetainUntil = ptr(e.now.Add(5*time.Minute)), ptr(e.now.Add(agentowl.RetentionAfterDecision))
	e.messages(t, bare, full)

	equal(t, "pending message without optional fields", e.getMessage(t, bare.ID), bare)
	equal(t, "message with every field set", e.getMessage(t, full.ID), full)
	if got := e.getMessage(t, full.ID).Body; string(got) != string(full.Body) {
		t.Fatalf("body bytes: got %x, want %x", got, full.Body)
	}

	wantErr(t, "get unknown", e.readErr(func(tx agentowl.Tx) error {
		_, err := tx.MessageGet(e.ctx, agentowl.NewID(""))
		return err
	}), agentowl.ErrNotFound)
	dup := newMessage(ten.ID, e.now)
	dup.ID = bare.ID
	wantErr(t, "create with a taken ID", e.writeErr(func(tx agentowl.Tx) error { return tx.MessageCreate(e.ctx, dup) }), agentowl.ErrConflict)
	equal(t, "message after rejected duplicate", e.getMessage(t, bare.ID), bare)
}

// testMessagePayloadRef: a message whose body refers to its event's
// payload (agentowl.PayloadRef) is stored without it and read back byte for
// byte, on every read (get, claim, list, redrive, a failed message's
// outbox entry); its event outlives it in the events' retention; a
// rewrite stores the new body whole; a reference outside the body writes
// nothing.
func testMessagePayloadRef(t *testing.T, e *env) {
	tn := e.tenant(t)
	_, _, ev := e.thread(t, tn.ID)
	mk := func(at time.Time) (*agentowl.OutboxMessage, []byte) {
		m := newMessage(tn.ID, at)
		prefix, suffix := []byte(`{"event":{"payload":`), []byte("},\"n\":\"\x00\xff\"}")
		m.Body = append(append(slices.Clone(prefix), ev.Payload...), suffix...)
		m.Payload = &agentowl.PayloadRef{EventID: ev.ID, At: len(prefix), Len: len(ev.Payload)}
		return m, slices.Clone(m.Body)
	}
	m, whole := mk(e.now)
	rewritten, _ := mk(e.now.Add(time.Second))
	e.messages(t, m, rewritten)
	want := *m
	want.Payload = nil // reads leave it nil
	equal(t, "message read back", e.getMessage(t, m.ID), &want)
	sameBody := func(what string, got []byte) {
		t.Helper()
		if !bytes.Equal(got, whole) {
			t.Fatalf("%s: body %q, want %q", what, got, whole)
		}
	}
	sameBody("get", e.getMessage(t, m.ID).Body)
	for _, l := range read(t, e, func(tx agentowl.Tx) ([]*agentowl.OutboxMessage, error) {
		return tx.MessageList(e.ctx, agentowl.MessageListParams{TenantID: tn.ID, Limit: 10})
	}) {
		if l.ID == m.ID {
			sameBody("list", l.Body)
		}
	}

	// A rewrite (a conversation linked before the handoff) is stored whole.
	e.write(t, func(tx agentowl.Tx) error { return tx.MessageRewrite(e.ctx, rewritten.ID, []byte(`{"v":2}`)) })
	if got := e.getMessage(t, rewritten.ID).Body; string(got) != `{"v":2}` {
		t.Fatalf("rewritten body: %q", got)
	}

	at := e.now.Add(time.Second)
	claimed := e.claim(t, "w1", at, at.Add(time.Minute), 10)
	equal(t, "claimed", len(claimed), 2)
	for _, c := range claimed {
		if c.ID == m.ID {
			sameBody("claim", c.Body)
		}
	}
	keep := ptr(at.Add(time.Hour))
	e.finish(t, agentowl.FinishParams{ID: m.ID, Owner: "w1", Attempt: newAttempt(m, 1, at, 500, ""), State: agentowl.MessageFailed, RetainUntil: keep})
	e.finish(t, agentowl.FinishParams{ID: rewritten.ID, Owner: "w1", Attempt: newAttempt(rewritten, 1, at, 204, ""),
		State: agentowl.MessageDelivered, RetainUntil: keep})
	sameBody("outbox entry", read(t, e, func(tx agentowl.Tx) (*agentowl.OutboxEntry, error) { return tx.OutboxGet(e.ctx, m.ID) }).Message.Body)

	// The failed message, kept for redrive, keeps its event.
	e.purgeEvents(t, e.now.Add(48*time.Hour))
	if e.eventGone(t, ev.ID) {
		t.Fatal("the events' retention deleted an event a failed message's body refers to")
	}
	var redriven *agentowl.OutboxMessage
	e.write(t, func(tx agentowl.Tx) (err error) {
		redriven, err = tx.MessageRedrive(e.ctx, agentowl.RedriveParams{ID: m.ID, From: []agentowl.MessageState{agentowl.MessageFailed},
			Now: at.Add(time.Minute), DeadlineAt: at.Add(time.Hour)})
		return err
	})
	sameBody("redrive", redriven.Body)
	at = at.Add(2 * time.Minute)
	again := e.claim(t, "w2", at, at.Add(time.Minute), 10)
	equal(t, "claimed after the redrive", msgIDs(again), []string{m.ID})
	sameBody("claim after the redrive", again[0].Body)
	e.finish(t, agentowl.FinishParams{ID: m.ID, Owner: "w2", Attempt: newAttempt(m, 2, at, 500, ""), State: agentowl.MessageFailed, RetainUntil: keep})

	// Once no message refers to it, the event may go.
	e.purge(t, e.now.Add(48*time.Hour))
	if !e.messageGone(t, m.ID) || !e.messageGone(t, rewritten.ID) {
		t.Fatal("the messages past their retention were kept")
	}
	e.purgeEvents(t, e.now.Add(48*time.Hour))
	if !e.eventGone(t, ev.ID) {
		t.Fatal("an event no message refers to any more was kept")
	}

	bad, _ := mk(e.now)
	bad.Payload.Len = len(bad.Body)
	if err := e.writeErr(func(tx agentowl.Tx) error { return tx.MessageCreate(e.ctx, bad) }); err == nil {
		t.Fatal("a payload reference outside the body was accepted")
	}
	if !e.messageGone(t, bad.ID) {
		t.Fatal("a message with a payload reference outside its body was stored")
	}
}

func testMessageClaim(t *testing.T, e *env) {
	ten := e.tenant(t)
	at := func(s int) time.Time { return e.now.Add(time.Duration(s) * time.Second) }
	// Created in an order unlike their due order: the claim goes by due time.
	c := msgDue(ten.ID, at(-30), at(-1))
	a := msgDue(ten.ID, at(-10), at(-3))
	d := msgDue(ten.ID, at(-40), at(0)) // due exactly now
	b := msgDue(ten.ID, at(-20), at(-2))
	// Leased by a worker that crashed: its lease ran out a second ago.
	expired := withLease(msgDue(ten.ID, at(-50), at(-4)), "crashed", at(-1))
	// Leased by a live worker: not claimable until its lease ends.
	held := withLease(msgDue(ten.ID, at(-60), at(-5)), "busy", at(60))
	future := msgDue(ten.ID, at(-5), at(30)) // due once the first leases have ended
	delivered := msgEnded(ten.ID, agentowl.MessageDelivered, at(-6), at(3600))
	delivered.NextAttempt = at(-100)
	failed := msgEnded(ten.ID, agentowl.MessageFailed, at(-6), at(3600))
	failed.NextAttempt = at(-100)
	cancelled := msgEnded(ten.ID, agentowl.MessageCancelled, at(-6), at(3600))
	cancelled.NextAttempt = at(-100)
	e.messages(t, c, a, d, b, expired, held, future, delivered, failed, cancelled)

	lease1 := at(30)
	got := e.claim(t, "w1", e.now, lease1, 2)
	wantExpired, wantA := withLease(expired, "w1", lease1), withLease(a, "w1", lease1)
	equalClaim(t, "first claim: the two oldest due, lease taken, attempts counted", got, []*agentowl.OutboxMessage{wantExpired, wantA})
	equal(t, "claimed message as stored", e.getMessage(t, a.ID), wantA)
	equal(t, "reclaimed message as stored", e.getMessage(t, expired.ID), wantExpired)

	got = e.claim(t, "w2", e.now, lease1, 10)
	wantB, wantC, wantD := withLease(b, "w2", lease1), withLease(c, "w2", lease1), withLease(d, "w2", lease1)
	equalClaim(t, "second claim: the rest of the due ones, oldest first", got, []*agentowl.OutboxMessage{wantB, wantC, wantD})
	equal(t, "claim at the same time again: everything due is leased", msgIDs(e.claim(t, "w3", e.now, lease1, 10)), []string{})
	equal(t, "claim before the leases end", msgIDs(e.claim(t, "w3", at(29), at(59), 10)), []string{})

	// The workers "crash": once their leases end the messages are due again,
	// oldest first, each with one more attempt; the live lease still holds.
	lease2 := at(90)
	got = e.claim(t, "w4", at(31), lease2, 10)
	equalClaim(t, "claim after the leases ended", got, []*agentowl.OutboxMessage{
		withLease(wantExpired, "w4", lease2), withLease(wantA, "w4", lease2), withLease(wantB, "w4", lease2),
		withLease(wantC, "w4", lease2), withLease(wantD, "w4", lease2), withLease(future, "w4", lease2),
	})
	if m := e.getMessage(t, expired.ID); m.Attempts != 3 || m.LeaseOwner != "w4" {
		t.Fatalf("message claimed three times: attempts %d, owner %q; want 3, w4", m.Attempts, m.LeaseOwner)
	}
	equal(t, "live lease, terminal messages untouched", []*agentowl.OutboxMessage{
		e.getMessage(t, held.ID), e.getMessage(t, delivered.ID), e.getMessage(t, failed.ID), e.getMessage(t, cancelled.ID),
	}, []*agentowl.OutboxMessage{held, delivered, failed, cancelled})

	got = e.claim(t, "w5", at(61), at(120), 10)
	equalClaim(t, "claim after the live lease ended", got, []*agentowl.OutboxMessage{withLease(held, "w5", at(120))})
}

func testMessageClaimConcurrent(t *testing.T, e *env) {
	ten := e.tenant(t)
	const messages, workers, limit = 50, 8, 3
	all := make([]*agentowl.OutboxMessage, messages)
	for i := range all {
		all[i] = msgDue(ten.ID, e.now.Add(-time.Hour), e.now.Add(-time.Duration(i)*time.Second))
	}
	e.messages(t, all...)

	// claimAll has every worker claim in a loop until a claim comes back
	// empty, and returns which worker got each message.
	claimAll := func(round string, now, leaseUntil time.Time) map[string]string {
		t.Helper()
		claimed := make([][]string, workers)
		errs := atOnce(workers, func(w int) error {
			owner := fmt.Sprintf("%s-w%d", round, w)
			for {
				var got []*agentowl.OutboxMessage
				err := e.s.Write(e.ctx, func(tx agentowl.Tx) error {
					var err error
					got, err = tx.MessageClaim(e.ctx, agentowl.ClaimParams{Now: now, LeaseUntil: leaseUntil, Owner: owner, Limit: limit})
					return err
				})
				if err != nil {
					return err
				}
				if len(got) == 0 {
					return nil
				}
				if len(got) > limit {
					return fmt.Errorf("claim returned %d messages, limit %d", len(got), limit)
				}
				// More claims than messages means a lease was ignored;
				// stop rather than loop for ever.
				if len(claimed[w])+len(got) > messages {
					return fmt.Errorf("%s claimed %d messages of %d", owner, len(claimed[w])+len(got), messages)
				}
				for _, m := range got {
					if m.LeaseOwner != owner {
						return fmt.Errorf("claimed message %s has lease owner %q", m.ID, m.LeaseOwner)
					}
					claimed[w] = append(claimed[w], m.ID)
				}
			}
		})
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("%s: %v", round, err)
		}
		owners := map[string]string{}
		for w, ids := range claimed {
			owner := fmt.Sprintf("%s-w%d", round, w)
			for _, id := range ids {
				if prev, ok := owners[id]; ok {
					t.Fatalf("%s: message %s claimed by %s and again by %s while leased", round, id, prev, owner)
				}
				owners[id] = owner
			}
		}
		if len(owners) != messages {
			t.Fatalf("%s: %d distinct messages claimed, want all %d", round, len(owners), messages)
		}
		return owners
	}
	check := func(round string, owners map[string]string, attempts int) {
		t.Helper()
		for _, m := range all {
			got := e.getMessage(t, m.ID)
			if got.LeaseOwner != owners[m.ID] || got.Attempts != attempts {
				t.Fatalf("%s: message %s stored with owner %q and %d attempts; want %q and %d",
					round, m.ID, got.LeaseOwner, got.Attempts, owners[m.ID], attempts)
			}
		}
	}

	lease := e.now.Add(time.Minute)
	check("first", claimAll("first", e.now, lease), 1)
	equal(t, "claim while every lease holds", msgIDs(e.claim(t, "late", e.now.Add(59*time.Second), lease, messages)), []string{})
	// Every worker crashed: all 50 are due again and go out once each.
	check("recovery", claimAll("recovery", lease.Add(time.Second), lease.Add(time.Hour)), 2)
}

func testMessageFinish(t *testing.T, e *env) {
	ten := e.tenant(t)
	m := msgDue(ten.ID, e.now.Add(-time.Minute), e.now)
	e.messages(t, m)
	lease := e.now.Add(30 * time.Second)
	e.claim(t, "w1", e.now, lease, 10)
	leased := withLease(m, "w1", lease)

	a1 := newAttempt(m, 1, e.now.Add(time.Second), 503, "503 Service Unavailable")
	retry := e.now.Add(time.Minute)
	rejected := func(what string, p agentowl.FinishParams) {
		t.Helper()
		wantErr(t, what, e.finishErr(p), agentowl.ErrConflict)
	}
	rejected("finish by another owner", agentowl.FinishParams{ID: m.ID, Owner: "w2", Attempt: a1, State: agentowl.MessagePending, NextAttempt: retry})
	stale := a1
	stale.N = 0
	rejected("finish of an earlier attempt", agentowl.FinishParams{ID: m.ID, Owner: "w1", Attempt: stale, State: agentowl.MessagePending, NextAttempt: retry})
	ahead := a1
	ahead.N = 2
	rejected("finish of a later attempt", agentowl.FinishParams{ID: m.ID, Owner: "w1", Attempt: ahead, State: agentowl.MessageDelivered, RetainUntil: ptr(retry)})
	equal(t, "no attempt recorded by rejected finishes", e.attempts(t, m.ID), []*agentowl.Attempt{})
	equal(t, "message after rejected finishes", e.getMessage(t, m.ID), leased)

	// A failed attempt: back to pending, due at the retry time, lease released.
	e.finish(t, agentowl.FinishParams{ID: m.ID, Owner: "w1", Attempt: a1, State: agentowl.MessagePending, NextAttempt: retry})
	want := *leased
	want.NextAttempt, want.LeaseOwner, want.LeaseUntil, want.LastStatus, want.LastError = retry, "", nil, 503, a1.Error
	equal(t, "message after a retryable failure", e.getMessage(t, m.ID), &want)
	equal(t, "attempts after the first", e.attempts(t, m.ID), []*agentowl.Attempt{&a1})
	rejected("the same finish again", agentowl.FinishParams{ID: m.ID, Owner: "w1", Attempt: a1, State: agentowl.MessagePending, NextAttempt: retry})
	equal(t, "claim before the retry time", msgIDs(e.claim(t, "w2", retry.Add(-time.Microsecond), retry.Add(time.Minute), 10)), []string{})

	lease2 := retry.Add(30 * time.Second)
	equal(t, "claim at the retry time", msgIDs(e.claim(t, "w2", retry, lease2, 10)), []string{m.ID})
	a2 := newAttempt(m, 2, retry.Add(time.Second), 200, "")
	rejected("finish by the previous owner", agentowl.FinishParams{ID: m.ID, Owner: "w1", Attempt: a2, State: agentowl.MessageDelivered, RetainUntil: ptr(lease2)})
	rejected("finish with the previous attempt number", agentowl.FinishParams{ID: m.ID, Owner: "w2", Attempt: a1, State: agentowl.MessageDelivered, RetainUntil: ptr(lease2)})
	equal(t, "attempts after rejected finishes", e.attempts(t, m.ID), []*agentowl.Attempt{&a1})

	retain := a2.EndedAt.Add(agentowl.RetentionAfterDecision)
	e.finish(t, agentowl.FinishParams{ID: m.ID, Owner: "w2", Attempt: a2, State: agentowl.MessageDelivered, RetainUntil: &retain})
	got := e.getMessage(t, m.ID)
	want.State, want.Attempts, want.LastStatus, want.LastError = agentowl.MessageDelivered, 2, 200, ""
	want.EndedAt, want.RetainUntil = &a2.EndedAt, &retain
	want.NextAttempt = got.NextAttempt // unspecified once the message has ended
	equal(t, "delivered message", got, &want)
	equal(t, "attempts after delivery, in order", e.attempts(t, m.ID), []*agentowl.Attempt{&a1, &a2})
	equal(t, "claim after delivery", msgIDs(e.claim(t, "w3", retain, retain.Add(time.Minute), 10)), []string{})
	rejected("finish after delivery", agentowl.FinishParams{ID: m.ID, Owner: "w2", Attempt: a2, State: agentowl.MessagePending, NextAttempt: retain})
	equal(t, "attempts after a finish of a delivered message", e.attempts(t, m.ID), []*agentowl.Attempt{&a1, &a2})

	// The other terminal outcomes, each after one attempt.
	for _, c := range []struct {
		state  agentowl.MessageState
		status int
		err    string
	}{
		{agentowl.MessageFailed, 0, "dial tcp 203.0.113.7:443: i/o timeout"},
		{agentowl.MessageCancelled, 410, "410 Gone"},
	} {
		m := msgDue(ten.ID, e.now, e.now)
		e.messages(t, m)
		at := retain.Add(time.Hour)
		equal(t, string(c.state)+": claim", msgIDs(e.claim(t, "w4", at, at.Add(time.Minute), 10)), []string{m.ID})
		a := newAttempt(m, 1, at, c.status, c.err)
		keep := a.EndedAt.Add(time.Hour)
		e.finish(t, agentowl.FinishParams{ID: m.ID, Owner: "w4", Attempt: a, State: c.state, RetainUntil: &keep})
		got := e.getMessage(t, m.ID)
		want := *m
		want.State, want.Attempts, want.LastStatus, want.LastError, want.EndedAt, want.RetainUntil = c.state, 1, c.status, c.err, &a.EndedAt, &keep
		want.NextAttempt = got.NextAttempt
		equal(t, string(c.state)+": message", got, &want)
		equal(t, string(c.state)+": attempts", e.attempts(t, m.ID), []*agentowl.Attempt{&a})
	}
}

// A worker whose lease ran out while it was still sending must not record its
// outcome over the attempt of the worker that reclaimed the message.
func testMessageFinishAfterLeaseLost(t *testing.T, e *env) {
	ten := e.tenant(t)
	m := msgDue(ten.ID, e.now, e.now)
	e.messages(t, m)
	lease1 := e.now.Add(30 * time.Second)
	e.claim(t, "slow", e.now, lease1, 1)
	lease2 := lease1.Add(time.Minute)
	equal(t, "reclaim after the lease ended", msgIDs(e.claim(t, "fresh", lease1.Add(time.Second), lease2, 1)), []string{m.ID})

	late := newAttempt(m, 1, e.now, 200, "")
	wantErr(t, "finish by the worker that lost the lease", e.finishErr(agentowl.FinishParams{
		ID: m.ID, Owner: "slow", Attempt: late, State: agentowl.MessageDelivered, RetainUntil: ptr(lease2),
	}), agentowl.ErrConflict)
	equal(t, "attempts after the lost lease's finish", e.attempts(t, m.ID), []*agentowl.Attempt{})
	equal(t, "message after the lost lease's finish", e.getMessage(t, m.ID), withLease(withLease(m, "slow", lease1), "fresh", lease2))

	a2 := newAttempt(m, 2, lease1.Add(time.Second), 500, "500 Internal Server Error")
	e.finish(t, agentowl.FinishParams{ID: m.ID, Owner: "fresh", Attempt: a2, State: agentowl.MessagePending, NextAttempt: lease2})
	equal(t, "attempts", e.attempts(t, m.ID), []*agentowl.Attempt{&a2})
}

// testMessageFinishAll records a batch of outcomes together; the one whose
// lease was lost is reported and leaves no trace, the others are recorded
// exactly as one at a time would record them.
func testMessageFinishAll(t *testing.T, e *env) {
	ten := e.tenant(t)
	ok1, stale, ok2 := msgDue(ten.ID, e.now, e.now), msgDue(ten.ID, e.now, e.now), msgDue(ten.ID, e.now, e.now)
	e.messages(t, ok1, stale, ok2)
	lease := e.now.Add(30 * time.Second)
	equal(t, "claimed", len(e.claim(t, "w", e.now, lease, 3)), 3)
	// stale's lease lapses and another worker takes it.
	equal(t, "reclaimed", len(e.claim(t, "other", lease.Add(time.Second), lease.Add(time.Minute), 3)), 3)
	// "other" records attempt 2 of ok1 and ok2 and keeps stale.
	e.write(t, func(tx agentowl.Tx) error {
		_, err := tx.MessageFinishAll(e.ctx, []agentowl.FinishParams{
			{ID: ok1.ID, Owner: "other", Attempt: newAttempt(ok1, 2, lease, 0, ""), State: agentowl.MessagePending, NextAttempt: lease},
			{ID: ok2.ID, Owner: "other", Attempt: newAttempt(ok2, 2, lease, 0, ""), State: agentowl.MessagePending, NextAttempt: lease},
		})
		return err
	})
	delivered := newAttempt(ok1, 3, lease.Add(2*time.Second), 204, "")
	failed := newAttempt(ok2, 3, lease.Add(2*time.Second), 0, "connection reset")
	retain := lease.Add(24 * time.Hour)
	equal(t, "claimed again", len(e.claim(t, "w2", lease.Add(2*time.Second), lease.Add(time.Hour), 2)), 2)
	var lost []bool
	e.write(t, func(tx agentowl.Tx) (err error) {
		lost, err = tx.MessageFinishAll(e.ctx, []agentowl.FinishParams{
			{ID: ok1.ID, Owner: "w2", Attempt: delivered, State: agentowl.MessageDelivered, RetainUntil: &retain},
			{ID: stale.ID, Owner: "w", Attempt: newAttempt(stale, 1, e.now, 204, ""), State: agentowl.MessageDelivered, RetainUntil: &retain},
			{ID: ok2.ID, Owner: "w2", Attempt: failed, State: agentowl.MessagePending, NextAttempt: lease.Add(time.Minute)},
		})
		return err
	})
	equal(t, "lost", lost, []bool{false, true, false})
	got1, gotStale, got2 := e.getMessage(t, ok1.ID), e.getMessage(t, stale.ID), e.getMessage(t, ok2.ID)
	if got1.State != agentowl.MessageDelivered || got1.EndedAt == nil || !got1.EndedAt.Equal(delivered.EndedAt) ||
		got1.RetainUntil == nil || !got1.RetainUntil.Equal(retain) || got1.LastStatus != 204 || got1.LeaseOwner != "" {
		t.Errorf("delivered message: %+v", got1)
	}
	if got2.State != agentowl.MessagePending || !got2.NextAttempt.Equal(lease.Add(time.Minute)) || got2.EndedAt != nil ||
		got2.LastError != "connection reset" || got2.LastStatus != 0 || got2.LeaseOwner != "" {
		t.Errorf("retried message: %+v", got2)
	}
	if gotStale.LeaseOwner != "other" || gotStale.State != agentowl.MessagePending {
		t.Errorf("the lost lease's message changed: %+v", gotStale)
	}
	equal(t, "attempts of the delivered message", len(e.attempts(t, ok1.ID)), 2)
	equal(t, "its last attempt", e.attempts(t, ok1.ID)[1], &delivered)
	equal(t, "attempts of the retried message", e.attempts(t, ok2.ID)[1], &failed)
	equal(t, "attempts of the lost lease's message", e.attempts(t, stale.ID), []*agentowl.Attempt{})

	// A late outcome of attempt 1 and the outcome of attempt 2 of one
	// message, by the same owner, in one batch: only attempt 2 counts.
	again := msgDue(ten.ID, e.now, e.now)
	e.messages(t, again)
	e.claim(t, "w3", e.now, lease, 1)
	e.claim(t, "w3", lease.Add(time.Second), lease.Add(time.Hour), 1)
	second := newAttempt(again, 2, lease.Add(time.Second), 204, "")
	e.write(t, func(tx agentowl.Tx) (err error) {
		lost, err = tx.MessageFinishAll(e.ctx, []agentowl.FinishParams{
			{ID: again.ID, Owner: "w3", Attempt: newAttempt(again, 1, e.now, 500, ""), State: agentowl.MessagePending, NextAttempt: lease},
			{ID: again.ID, Owner: "w3", Attempt: second, State: agentowl.MessageDelivered, RetainUntil: &retain},
		})
		return err
	})
	equal(t, "lost, same message twice", lost, []bool{true, false})
	equal(t, "attempts of the message finished twice in one batch", e.attempts(t, again.ID), []*agentowl.Attempt{&second})
}

func testMessageDefer(t *testing.T, e *env) {
	ten := e.tenant(t)
	m := msgDue(ten.ID, e.now.Add(-time.Minute), e.now)
	e.messages(t, m)
	lease := e.now.Add(30 * time.Second)
	e.claim(t, "w1", e.now, lease, 1)
	next := e.now.Add(10 * time.Second)
	deferErr := func(owner string, attempt int) error {
		return e.writeErr(func(tx agentowl.Tx) error { return tx.MessageDefer(e.ctx, m.ID, owner, attempt, next) })
	}
	wantErr(t, "defer by another owner", deferErr("w2", 1), agentowl.ErrConflict)
	wantErr(t, "defer of another attempt", deferErr("w1", 2), agentowl.ErrConflict)
	equal(t, "message after rejected defers", e.getMessage(t, m.ID), withLease(m, "w1", lease))

	if err := deferErr("w1", 1); err != nil {
		t.Fatalf("defer: %v", err)
	}
	want := *m
	want.NextAttempt = next
	equal(t, "deferred message: lease released, attempt not counted", e.getMessage(t, m.ID), &want)
	equal(t, "no attempt recorded", e.attempts(t, m.ID), []*agentowl.Attempt{})
	wantErr(t, "defer again", deferErr("w1", 1), agentowl.ErrConflict)
	equal(t, "claim before the deferred time", msgIDs(e.claim(t, "w2", next.Add(-time.Microsecond), lease, 1)), []string{})
	equalClaim(t, "claim at the deferred time", e.claim(t, "w2", next, lease, 1), []*agentowl.OutboxMessage{withLease(&want, "w2", lease)})
}

func testMessageCancelDestination(t *testing.T, e *env) {
	ten := e.tenant(t)
	dest, otherDest := "instance:"+agentowl.NewID(""), "instance:"+agentowl.NewID("")
	to := func(m *agentowl.OutboxMessage, d string) *agentowl.OutboxMessage { m.Destination = d; return m }
	idle := to(msgDue(ten.ID, e.now.Add(-time.Hour), e.now.Add(time.Hour)), dest)
	dueIdle := to(msgDue(ten.ID, e.now.Add(-time.Hour), e.now.Add(-time.Minute)), dest)
	crashed := to(withLease(msgDue(ten.ID, e.now.Add(-time.Hour), e.now.Add(-time.Minute)), "crashed", e.now.Add(-time.Second)), dest)
	inFlightUntil := e.now.Add(30 * time.Second)
	inFlight := to(withLease(msgDue(ten.ID, e.now.Add(-time.Hour), e.now.Add(-time.Minute)), "busy", inFlightUntil), dest)
	delivered := to(msgEnded(ten.ID, agentowl.MessageDelivered, e.now.Add(-time.Minute), e.now.Add(time.Hour)), dest)
	elsewhere := to(msgDue(ten.ID, e.now.Add(-time.Hour), e.now.Add(-time.Minute)), otherDest)
	e.messages(t, idle, dueIdle, crashed, inFlight, delivered, elsewhere)

	grace := 2 * time.Hour
	var cancelled []string
	e.write(t, func(tx agentowl.Tx) error {
		var err error
		cancelled, err = tx.MessageCancelDestination(e.ctx, dest, e.now, grace)
		return err
	})
	equal(t, "cancelled IDs", sorted(cancelled), sorted([]string{idle.ID, dueIdle.ID, crashed.ID, inFlight.ID}))

	for _, c := range []struct {
		what  string
		m     *agentowl.OutboxMessage
		ended time.Time
	}{
		{"idle, not yet due", idle, e.now},
		{"idle, due", dueIdle, e.now},
		{"lease expired", crashed, e.now},
		{"in flight", inFlight, inFlightUntil},
	} {
		got := e.getMessage(t, c.m.ID)
		want := *c.m
		want.State, want.EndedAt, want.RetainUntil = agentowl.MessageCancelled, ptr(c.ended), ptr(c.ended.Add(grace))
		// What a cancelled message keeps of its lease is not specified.
		want.LeaseOwner, want.LeaseUntil = got.LeaseOwner, got.LeaseUntil
		want.NextAttempt = got.NextAttempt
		equal(t, "cancelled message, "+c.what, got, &want)
	}
	equal(t, "delivered message to the destination", e.getMessage(t, delivered.ID), delivered)
	equal(t, "pending message to another destination", e.getMessage(t, elsewhere.ID), elsewhere)

	// The in-flight worker's outcome cannot bring the message back.
	a := newAttempt(inFlight, inFlight.Attempts, e.now, 200, "")
	if err := e.finishErr(agentowl.FinishParams{ID: inFlight.ID, Owner: "busy", Attempt: a, State: agentowl.MessagePending, NextAttempt: e.now.Add(time.Hour)}); err != nil && !errors.Is(err, agentowl.ErrConflict) {
		t.Fatalf("finish of a cancelled in-flight message: %v, want nil or ErrConflict", err)
	}
	if got := e.getMessage(t, inFlight.ID); got.State != agentowl.MessageCancelled || got.EndedAt == nil || !got.EndedAt.Equal(inFlightUntil) {
		t.Fatalf("cancelled in-flight message after its worker finished: %s", show(got))
	}

	later := e.now.Add(3 * time.Hour)
	equal(t, "claim after cancelling", msgIDs(e.claim(t, "w1", later, later.Add(time.Minute), 10)), []string{elsewhere.ID})
	e.write(t, func(tx agentowl.Tx) error {
		var err error
		cancelled, err = tx.MessageCancelDestination(e.ctx, dest, later, grace)
		return err
	})
	equal(t, "cancelling again", nonNil(cancelled), []string{})
}

func testMessageList(t *testing.T, e *env) {
	ten, other := e.tenant(t), e.tenant(t)
	at := func(s int) time.Time { return e.now.Add(time.Duration(s) * time.Second) }
	destA, destB, subj := "instance:"+agentowl.NewID(""), "instance:"+agentowl.NewID(""), agentowl.NewID("")
	mk := func(tenantID string, s int, dest, subject string) *agentowl.OutboxMessage {
		m := newMessage(tenantID, at(s))
		m.Destination = dest
		if subject != "" {
			m.Subject = subject
		}
		return m
	}
	m1, m2, m3 := mk(ten.ID, 1, destA, subj), mk(ten.ID, 2, destB, ""), mk(ten.ID, 3, destA, "")
	m4 := mk(ten.ID, 4, destA, subj)
	m4.State, m4.Attempts, m4.EndedAt, m4.RetainUntil = agentowl.MessageDelivered, 1, ptr(at(10)), ptr(at(100))
	m5 := mk(ten.ID, 5, destB, subj)
	m5.State, m5.Attempts, m5.EndedAt, m5.RetainUntil = agentowl.MessageFailed, 9, ptr(at(11)), ptr(at(100))
	u1 := mk(other.ID, 6, destA, subj)
	e.messages(t, m3, m1, u1, m5, m2, m4)

	list := func(p agentowl.MessageListParams) []string {
		t.Helper()
		return msgIDs(read(t, e, func(tx agentowl.Tx) ([]*agentowl.OutboxMessage, error) { return tx.MessageList(e.ctx, p) }))
	}
	for _, c := range []struct {
		what string
		p    agentowl.MessageListParams
		want []*agentowl.OutboxMessage
	}{
		{"tenant, newest first", agentowl.MessageListParams{TenantID: ten.ID, Limit: 10}, []*agentowl.OutboxMessage{m5, m4, m3, m2, m1}},
		{"limit", agentowl.MessageListParams{TenantID: ten.ID, Limit: 2}, []*agentowl.OutboxMessage{m5, m4}},
		{"subject", agentowl.MessageListParams{TenantID: ten.ID, Subject: subj, Limit: 10}, []*agentowl.OutboxMessage{m5, m4, m1}},
		{"destination", agentowl.MessageListParams{TenantID: ten.ID, Prefix: destA, Limit: 10}, []*agentowl.OutboxMessage{m4, m3, m1}},
		{"state pending", agentowl.MessageListParams{TenantID: ten.ID, State: agentowl.MessagePending, Limit: 10}, []*agentowl.OutboxMessage{m3, m2, m1}},
		{"state failed", agentowl.MessageListParams{TenantID: ten.ID, State: agentowl.MessageFailed, Limit: 10}, []*agentowl.OutboxMessage{m5}},
		{"every filter", agentowl.MessageListParams{TenantID: ten.ID, Subject: subj, Prefix: destA, State: agentowl.MessagePending, Limit: 10}, []*agentowl.OutboxMessage{m1}},
		{"every filter and limit", agentowl.MessageListParams{TenantID: ten.ID, Subject: subj, Prefix: destA, Limit: 1}, []*agentowl.OutboxMessage{m4}},
		{"other tenant", agentowl.MessageListParams{TenantID: other.ID, Limit: 10}, []*agentowl.OutboxMessage{u1}},
		{"no match", agentowl.MessageListParams{TenantID: ten.ID, Subject: agentowl.NewID(""), Limit: 10}, []*agentowl.OutboxMessage{}},
		{"unknown tenant", agentowl.MessageListParams{TenantID: agentowl.NewID(""), Limit: 10}, []*agentowl.OutboxMessage{}},
	} {
		equal(t, c.what, list(c.p), msgIDs(c.want))
	}
	equal(t, "listed messages are complete", read(t, e, func(tx agentowl.Tx) ([]*agentowl.OutboxMessage, error) {
		return tx.MessageList(e.ctx, agentowl.MessageListParams{TenantID: ten.ID, Prefix: destB, Limit: 10})
	}), []*agentowl.OutboxMessage{m5, m2})
}

func testMessageStats(t *testing.T, e *env) {
	ten, other := e.tenant(t), e.tenant(t)
	at := func(s int) time.Time { return e.now.Add(time.Duration(s) * time.Second) }
	// stats reads the outbox at now (e.now unless said) as "surface pending
	// oldest-created oldest-due" lines.
	stats := func(what string, now time.Time, want ...string) {
		t.Helper()
		qs := read(t, e, func(tx agentowl.Tx) ([]*agentowl.QueueStats, error) { return tx.MessageStats(e.ctx, now) })
		got := []string{}
		for _, q := range qs {
			due := "-"
			if q.OldestDue != nil {
				due = strconv.Itoa(int(q.OldestDue.Sub(e.now) / time.Second))
			}
			got = append(got, fmt.Sprintf("%s %d %d %s", q.Surface, q.Pending, int(q.OldestCreated.Sub(e.now)/time.Second), due))
		}
		equal(t, what, got, nonNil(want))
	}
	stats("empty outbox", e.now)

	oldestEnded := msgEnded(ten.ID, agentowl.MessageDelivered, at(-1), at(100))
	oldestEnded.CreatedAt = at(-100)
	p1, p2 := msgDue(ten.ID, at(-30), at(0)), msgDue(ten.ID, at(-10), at(5))
	leased := withLease(msgDue(ten.ID, at(-20), at(0)), "w", at(60))
	push := msgDue(ten.ID, at(-5), at(-5))
	push.Destination = "decision:" + agentowl.NewID("")
	e.messages(t, oldestEnded, p2, leased, p1, push)
	stats("pending and leased messages by surface, not ended ones", e.now, "decision 1 -5 -5", "instance 3 -30 0")
	stats("a message due later is not due yet", at(10), "decision 1 -5 -5", "instance 3 -30 0")

	u := msgDue(other.ID, at(-50), at(-40))
	u.Destination = "endpoint:" + agentowl.NewID("")
	e.messages(t, u)
	stats("every tenant's", e.now, "decision 1 -5 -5", "endpoint 1 -50 -40", "instance 3 -30 0")

	// A deferral (a limit held the attempt back) keeps the time the
	// message became due, not the next attempt time the deferral sets
	// (one before the others, so that u is claimed again next); a recorded
	// attempt moves it to the retry.
	equal(t, "claim", msgIDs(e.claim(t, "w1", at(1), at(30), 1)), []string{u.ID})
	e.write(t, func(tx agentowl.Tx) error { return tx.MessageDefer(e.ctx, u.ID, "w1", 1, at(-45)) })
	stats("deferred: still due since it first was", at(1), "decision 1 -5 -5", "endpoint 1 -50 -40", "instance 3 -30 0")
	equal(t, "claim", msgIDs(e.claim(t, "w1", at(2), at(30), 1)), []string{u.ID})
	e.finish(t, agentowl.FinishParams{ID: u.ID, Owner: "w1", Attempt: newAttempt(u, 1, at(2), 503, ""), State: agentowl.MessagePending, NextAttempt: at(8)})
	stats("retried: due at the retry", at(2), "decision 1 -5 -5", "endpoint 1 -50 -", "instance 3 -30 0")
	stats("retried: due at the retry", at(9), "decision 1 -5 -5", "endpoint 1 -50 8", "instance 3 -30 0")

	e.write(t, func(tx agentowl.Tx) error {
		_, err := tx.MessageCancelDestination(e.ctx, u.Destination, e.now, time.Hour)
		return err
	})
	stats("after the endpoint's was cancelled", e.now, "decision 1 -5 -5", "instance 3 -30 0")
	equal(t, "claim", msgIDs(e.claim(t, "w1", at(1), at(30), 1)), []string{push.ID})
	e.finish(t, agentowl.FinishParams{ID: push.ID, Owner: "w1", Attempt: newAttempt(push, 1, at(1), 204, ""), State: agentowl.MessageDelivered, RetainUntil: ptr(at(100))})
	equal(t, "claim", msgIDs(e.claim(t, "w1", at(1), at(30), 1)), []string{p1.ID})
	e.finish(t, agentowl.FinishParams{ID: p1.ID, Owner: "w1", Attempt: newAttempt(p1, 1, at(1), 204, ""), State: agentowl.MessageDelivered, RetainUntil: ptr(at(100))})
	stats("after the oldest were delivered", e.now, "instance 2 -20 0")
}

// Deferred messages (put back to a later time, not leased) are made due
// again, by ID or all of them; retries, leased and due messages are left.
func testMessageUndefer(t *testing.T, e *env) {
	ten := e.tenant(t)
	at := func(s int) time.Time { return e.now.Add(time.Duration(s) * time.Second) }
	deferTo := func(m *agentowl.OutboxMessage, next time.Time) {
		t.Helper()
		equal(t, "claim", msgIDs(e.claim(t, "w", at(0), at(30), 1)), []string{m.ID})
		e.write(t, func(tx agentowl.Tx) error { return tx.MessageDefer(e.ctx, m.ID, "w", 1, next) })
	}
	d1, d2, retry, leased := msgDue(ten.ID, at(-10), at(-10)), msgDue(ten.ID, at(-9), at(-9)), msgDue(ten.ID, at(-8), at(-8)), msgDue(ten.ID, at(-7), at(-7))
	e.messages(t, d1)
	deferTo(d1, at(60))
	e.messages(t, d2)
	deferTo(d2, at(90))
	e.messages(t, retry)
	equal(t, "claim", msgIDs(e.claim(t, "w", at(0), at(30), 1)), []string{retry.ID})
	e.finish(t, agentowl.FinishParams{ID: retry.ID, Owner: "w", Attempt: newAttempt(retry, 1, at(0), 503, ""), State: agentowl.MessagePending, NextAttempt: at(120)})
	e.messages(t, withLease(leased, "other", at(30)))
	undefer := func(ids []string, limit int) int {
		t.Helper()
		var n int
		e.write(t, func(tx agentowl.Tx) (err error) {
			n, err = tx.MessageUndefer(e.ctx, ids, e.now, limit)
			return err
		})
		return n
	}
	equal(t, "by ID: only deferred ones", undefer([]string{d2.ID, retry.ID, leased.ID, "nope"}, 10), 1)
	equal(t, "d2 due now", e.getMessage(t, d2.ID).NextAttempt, e.now)
	equal(t, "the retry keeps its time", e.getMessage(t, retry.ID).NextAttempt, at(120))
	equal(t, "all deferred", undefer(nil, 10), 1)
	equal(t, "d1 due now", e.getMessage(t, d1.ID).NextAttempt, e.now)
	equal(t, "nothing left", undefer(nil, 10), 0)
	equal(t, "the leased one keeps its lease", e.getMessage(t, leased.ID).LeaseOwner, "other")
}

// testMessageHold: a paused destination's messages are held (no claim
// takes them, they are neither deferred nor due), a claimed one is given
// back held, and release makes them due in the order they were created.
func testMessageHold(t *testing.T, e *env) {
	ten := e.tenant(t)
	at := func(s int) time.Time { return e.now.Add(time.Duration(s) * time.Second) }
	const dest = "endpoint:ep_paused"
	mk := func(created time.Time) *agentowl.OutboxMessage {
		m := msgDue(ten.ID, created, created)
		m.Destination = dest
		return m
	}
	m1, m2, m3, other := mk(at(-30)), mk(at(-20)), mk(at(-10)), msgDue(ten.ID, at(-5), at(-5))
	leased := withLease(mk(at(-40)), "w", at(30))
	e.messages(t, m1, m2, m3, other, leased)
	var n int
	e.write(t, func(tx agentowl.Tx) (err error) { n, err = tx.MessageHoldDestination(e.ctx, dest); return err })
	equal(t, "held: the destination's unleased pending messages", n, 3)
	equal(t, "a held message waits", e.getMessage(t, m1.ID).NextAttempt, agentowl.OutboxHeld)
	equal(t, "a claim takes only the other destination", msgIDs(e.claim(t, "w2", at(0), at(30), 10)), []string{other.ID})
	e.write(t, func(tx agentowl.Tx) error { return tx.MessageHold(e.ctx, leased.ID, "w", leased.Attempts) })
	got := e.getMessage(t, leased.ID)
	equal(t, "the leased one given back held, uncounted", []any{got.NextAttempt, got.LeaseOwner, got.Attempts}, []any{agentowl.OutboxHeld, "", 0})
	if err := e.writeErr(func(tx agentowl.Tx) error { return tx.MessageHold(e.ctx, m1.ID, "w", 1) }); !errors.Is(err, agentowl.ErrConflict) {
		t.Errorf("MessageHold without the lease: %v, want ErrConflict", err)
	}
	stats := read(t, e, func(tx agentowl.Tx) ([]*agentowl.QueueStats, error) { return tx.MessageStats(e.ctx, at(0)) })
	for _, s := range stats {
		if s.Surface == "endpoint" && s.OldestDue != nil {
			t.Errorf("held messages count as due since %v", *s.OldestDue)
		}
	}
	var undeferred int
	e.write(t, func(tx agentowl.Tx) (err error) {
		undeferred, err = tx.MessageUndefer(e.ctx, nil, at(0), 100)
		return err
	})
	equal(t, "held messages are not deferrals", undeferred, 0)
	e.write(t, func(tx agentowl.Tx) (err error) {
		n, err = tx.MessageReleaseDestination(e.ctx, dest, at(1))
		return err
	})
	equal(t, "released", n, 4)
	equal(t, "released in creation order", msgIDs(e.claim(t, "w3", at(2), at(30), 10)), []string{leased.ID, m1.ID, m2.ID, m3.ID})
}

func testEngineReports(t *testing.T, e *env) {
	at := func(s int) time.Time { return e.now.Add(time.Duration(s) * time.Second) }
	list := func() []*agentowl.EngineReport {
		return nonNil(read(t, e, func(tx agentowl.Tx) ([]*agentowl.EngineReport, error) { return tx.EngineList(e.ctx) }))
	}
	report := func(r agentowl.EngineReport, forgetBefore time.Time) {
		t.Helper()
		e.write(t, func(tx agentowl.Tx) error { return tx.EngineReport(e.ctx, &r, forgetBefore) })
	}
	equal(t, "none", list(), []*agentowl.EngineReport{})
	a := agentowl.EngineReport{Owner: "a", StartedAt: at(-100), SeenAt: at(-50), Attempts: 3, SlotsBusy: 4, SlotsIdle: 1, SlotsStale: 1, SlotsReclaimed: 1 << 40}
	b := agentowl.EngineReport{Owner: "b", StartedAt: at(-10), SeenAt: at(-5)}
	report(a, at(-1000))
	report(b, at(-1000))
	equal(t, "both", list(), []*agentowl.EngineReport{&a, &b})
	a.SeenAt, a.Attempts, a.SlotsStale = at(0), 0, 0
	report(a, at(-1000))
	equal(t, "a's report replaced", list(), []*agentowl.EngineReport{&a, &b})
	report(a, at(-5))
	equal(t, "a report seen at the bound is kept", list(), []*agentowl.EngineReport{&a, &b})
	report(a, at(-4))
	equal(t, "b forgotten: not renewed since before the bound", list(), []*agentowl.EngineReport{&a})
	e.write(t, func(tx agentowl.Tx) error { return tx.EngineGone(e.ctx, "a") })
	equal(t, "a gone", list(), []*agentowl.EngineReport{})
}

func testMessagePurge(t *testing.T, e *env) {
	ten := e.tenant(t)
	at := func(s int) time.Time { return e.now.Add(time.Duration(s) * time.Second) }

	// Ended after recorded attempts: claim and finish them first, alone.
	withAttempts := func(state agentowl.MessageState, retainUntil time.Time) *agentowl.OutboxMessage {
		t.Helper()
		m := msgDue(ten.ID, at(-7200), at(-7200))
		e.messages(t, m)
		equal(t, "claim", msgIDs(e.claim(t, "w", at(-7200), at(-7100), 1)), []string{m.ID})
		e.finish(t, agentowl.FinishParams{ID: m.ID, Owner: "w", Attempt: newAttempt(m, 1, at(-7200), 0, "refused"), State: agentowl.MessagePending, NextAttempt: at(-7000)})
		equal(t, "claim", msgIDs(e.claim(t, "w", at(-7000), at(-6900), 1)), []string{m.ID})
		e.finish(t, agentowl.FinishParams{ID: m.ID, Owner: "w", Attempt: newAttempt(m, 2, at(-7000), 200, ""), State: state, RetainUntil: &retainUntil})
		if n := len(e.attempts(t, m.ID)); n != 2 {
			t.Fatalf("set-up: %d attempts recorded, want 2", n)
		}
		return m
	}
	deliveredPast := withAttempts(agentowl.MessageDelivered, at(-1))
	failedKept := withAttempts(agentowl.MessageFailed, at(3600))

	// A pending message with recorded attempts, overdue, with a past
	// retain_until: pending rows are never purged.
	pendingRetried := msgDue(ten.ID, at(-7200), at(-7200))
	e.messages(t, pendingRetried)
	equal(t, "claim", msgIDs(e.claim(t, "w", at(-7200), at(-7100), 1)), []string{pendingRetried.ID})
	e.finish(t, agentowl.FinishParams{ID: pendingRetried.ID, Owner: "w", Attempt: newAttempt(pendingRetried, 1, at(-7200), 503, ""),
		State: agentowl.MessagePending, NextAttempt: at(-7000), RetainUntil: ptr(at(-7000))})

	failedAtNow := msgEnded(ten.ID, agentowl.MessageFailed, at(-7200), e.now)
	cancelledPast := msgEnded(ten.ID, agentowl.MessageCancelled, at(-7200), at(-7199))
	cancelledKept := msgEnded(ten.ID, agentowl.MessageCancelled, at(-7200), at(1))
	pendingOld := msgDue(ten.ID, at(-30*86400), at(-30*86400))
	pendingOld.DeadlineAt = at(-29 * 86400)
	leased := withLease(msgDue(ten.ID, at(-7200), at(-7200)), "w", at(-7100))
	e.messages(t, failedAtNow, cancelledPast, cancelledKept, pendingOld, leased)

	if n := e.purge(t, e.now); n < 3 {
		t.Fatalf("Purge reported %d rows, want at least the 3 ended messages past retention", n)
	}
	for _, c := range []struct {
		what string
		m    *agentowl.OutboxMessage
		gone bool
	}{
		{"delivered, retained until the past", deliveredPast, true},
		{"failed, retained until now", failedAtNow, true},
		{"cancelled, retained until the past", cancelledPast, true},
		{"failed, retained until later", failedKept, false},
		{"cancelled, retained until later", cancelledKept, false},
		{"pending after attempts, retain_until in the past", pendingRetried, false},
		{"pending, long overdue", pendingOld, false},
		{"pending, lease expired", leased, false},
	} {
		if gone := e.messageGone(t, c.m.ID); gone != c.gone {
			t.Fatalf("message %s: gone = %v, want %v", c.what, gone, c.gone)
		}
	}
	equal(t, "attempts of a purged message", e.attempts(t, deliveredPast.ID), []*agentowl.Attempt{})
	if n := len(e.attempts(t, failedKept.ID)); n != 2 {
		t.Fatalf("attempts of a retained message: %d, want 2", n)
	}
	if n := len(e.attempts(t, pendingRetried.ID)); n != 1 {
		t.Fatalf("attempts of a pending message: %d, want 1", n)
	}
	if n := e.purge(t, e.now); n != 0 {
		t.Fatalf("second Purge at the same time reported %d rows, want 0", n)
	}

	e.purge(t, at(3600))
	for _, m := range []*agentowl.OutboxMessage{failedKept, cancelledKept} {
		if !e.messageGone(t, m.ID) {
			t.Fatalf("message %s still there after its retention", m.ID)
		}
	}
	for _, m := range []*agentowl.OutboxMessage{pendingRetried, pendingOld, leased} {
		if e.messageGone(t, m.ID) {
			t.Fatalf("pending message %s purged", m.ID)
		}
	}
}

// A resolved request outlives its retention while a notification about it
// (subject = request ID) is still in the outbox, so the notification's body
// and the request it names stay consistent; it goes once the row has.
func testMessagePurgeKeepsRequest(t *testing.T, e *env) {
	ten := e.tenant(t)
	in := e.instance(t, ten.ID, e.now.Add(-time.Hour))
	notified, plain := e.request(t, in, e.now.Add(-time.Hour)), e.request(t, in, e.now.Add(-time.Hour))
	e.resolve(t, notified, denied(e.now.Add(-time.Hour)), e.now.Add(-time.Second))
	e.resolve(t, plain, denied(e.now.Add(-time.Hour)), e.now.Add(-time.Second))
	m := msgDue(ten.ID, e.now.Add(-time.Hour), e.now.Add(time.Minute))
	m.Subject = notified.ID
	e.messages(t, m)

	requestThere := func(r *agentowl.ApprovalRequest) bool {
		t.Helper()
		err := e.readErr(func(tx agentowl.Tx) error { _, err := tx.RequestGet(e.ctx, r.ID); return err })
		if err != nil && !errors.Is(err, agentowl.ErrNotFound) {
			t.Fatalf("get request: %v", err)
		}
		return err == nil
	}

	e.purge(t, e.now)
	if !requestThere(notified) {
		t.Fatal("request purged while its notification is pending")
	}
	if requestThere(plain) {
		t.Fatal("request without a notification kept past its retention")
	}

	lease := e.now.Add(2 * time.Minute)
	equal(t, "claim", msgIDs(e.claim(t, "w", e.now.Add(time.Minute), lease, 1)), []string{m.ID})
	retain := e.now.Add(time.Hour)
	e.finish(t, agentowl.FinishParams{ID: m.ID, Owner: "w", Attempt: newAttempt(m, 1, e.now.Add(time.Minute), 200, ""),
		State: agentowl.MessageDelivered, RetainUntil: &retain})
	e.purge(t, e.now.Add(time.Minute))
	if !requestThere(notified) {
		t.Fatal("request purged while its delivered notification is retained")
	}
	if e.messageGone(t, m.ID) {
		t.Fatal("delivered notification purged before its retention")
	}

	e.purge(t, retain)
	e.purge(t, retain)
	if !e.messageGone(t, m.ID) {
		t.Fatal("delivered notification kept past its retention")
	}
	if requestThere(notified) {
		t.Fatal("request kept after its notification was purged")
	}
}
