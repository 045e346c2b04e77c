package storetest

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentowl/agentowl"
)

// conversationTests are the conformance subtests of the operator views of
// conversations (agentowl.ConversationStore).
var conversationTests = []suiteCase[*env]{
	{"ConversationList", testConversationList},
	{"EventList", testEventList},
	{"EventMove", testEventMove},
	{"WorkCountOpen", testWorkCountOpen},
	{"MessageRewrite", testMessageRewrite},
	{"ConversationEndIdle", testConversationEndIdle},
}

// Open conversations of a channel idle past the window end as of the moment
// it closed; those of other channels, ended ones and recent ones stay.
func testConversationEndIdle(t *testing.T, e *env) {
	ten := e.tenant(t)
	ep := e.endpoint(t, ten.ID)
	sms, hook := newBinding(ep, e.now), newBinding(ep, e.now)
	sms.Channel, sms.ProviderSecret = "sms", []byte("sealed")
	e.write(t, func(tx agentowl.Tx) error {
		if err := tx.BindingCreate(e.ctx, sms); err != nil {
			return err
		}
		return tx.BindingCreate(e.ctx, hook)
	})
	const window = 24 * time.Hour
	conv := func(b *agentowl.Binding, key string, last time.Time) *agentowl.Conversation {
		c := newConversation(b, key, last.Add(-time.Hour))
		c.LastEventAt = last
		return c
	}
	idle, recent := conv(sms, "+15550001", e.now.Add(-window-time.Minute)), conv(sms, "+15550002", e.now.Add(-window+time.Minute))
	atBound := conv(sms, "+15550003", e.now.Add(-window))
	webhookIdle := conv(hook, "k", e.now.Add(-48*time.Hour))
	ended := conv(sms, "+15550004", e.now.Add(-72*time.Hour))
	ended.Status, ended.EndedAt = agentowl.ConversationEnded, ptr(e.now.Add(-71*time.Hour))
	e.write(t, func(tx agentowl.Tx) error {
		for _, c := range []*agentowl.Conversation{idle, recent, atBound, webhookIdle, ended} {
			if err := tx.ConversationCreate(e.ctx, c); err != nil {
				return err
			}
		}
		return nil
	})
	endIdle := func(limit int) int {
		t.Helper()
		var n int
		e.write(t, func(tx agentowl.Tx) (err error) {
			n, err = tx.ConversationEndIdle(e.ctx, "sms", e.now, window, limit)
			return err
		})
		return n
	}
	equal(t, "a batch of one", endIdle(1), 1)
	equal(t, "the rest", endIdle(10), 1)
	equal(t, "nothing left", endIdle(10), 0)
	get := func(c *agentowl.Conversation) *agentowl.Conversation {
		return read(t, e, func(tx agentowl.Tx) (*agentowl.Conversation, error) { return tx.ConversationGet(e.ctx, c.ID) })
	}
	for _, c := range []*agentowl.Conversation{idle, atBound} {
		got := get(c)
		equal(t, "idle past the window: ended", got.Status, agentowl.ConversationEnded)
		equal(t, "ended as its window closed", *got.EndedAt, c.LastEventAt.Add(window))
	}
	equal(t, "within the window", get(recent).Status, agentowl.ConversationOpen)
	equal(t, "another channel", get(webhookIdle).Status, agentowl.ConversationOpen)
	equal(t, "ended before", *get(ended).EndedAt, *ended.EndedAt)
}

func convIDs(cs []*agentowl.Conversation) []string {
	return mapped(cs, func(c *agentowl.Conversation) string { return c.ID })
}

func eventIDs(evs []*agentowl.Event) []string {
	return mapped(evs, func(ev *agentowl.Event) string { return ev.ID })
}

// testConversationList checks the filters and the order (latest activity
// first, ties by ID descending), and that paging by keyset visits every
// conversation once whatever the page size.
func testConversationList(t *testing.T, e *env) {
	tn, other := e.tenant(t), e.tenant(t)
	ep := e.endpoint(t, tn.ID)
	hook := e.binding(t, ep)
	sms := newBinding(ep, e.now)
	sms.Channel, sms.ProviderSecret = "sms", []byte("sealed")
	e.write(t, func(tx agentowl.Tx) error { return tx.BindingCreate(e.ctx, sms) })
	var all []*agentowl.Conversation
	for i, b := range []*agentowl.Binding{hook, sms, hook, sms, hook, hook, sms} {
		// Three pairs share a last event time: ties are ordered by ID.
		c := newConversation(b, "", e.now.Add(time.Duration(i/2)*time.Minute))
		if i == 3 {
			c.Status, c.EndedAt = agentowl.ConversationEnded, ptr(c.LastEventAt.Add(time.Hour))
		}
		all = append(all, c)
	}
	foreign := newConversation(e.binding(t, e.endpoint(t, other.ID)), "", e.now.Add(time.Hour))
	e.write(t, func(tx agentowl.Tx) error {
		for _, c := range append(slices.Clone(all), foreign) {
			if err := tx.ConversationCreate(e.ctx, c); err != nil {
				return err
			}
		}
		return nil
	})
	want := slices.Clone(all)
	slices.SortFunc(want, func(a, b *agentowl.Conversation) int {
		if c := b.LastEventAt.Compare(a.LastEventAt); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
	list := func(p agentowl.ConversationListParams) []*agentowl.Conversation {
		t.Helper()
		p.TenantID = tn.ID
		return read(t, e, func(tx agentowl.Tx) ([]*agentowl.Conversation, error) { return tx.ConversationList(e.ctx, p) })
	}
	got := list(agentowl.ConversationListParams{})
	equal(t, "all of the tenant's conversations, latest first", convIDs(got), convIDs(want))
	equal(t, "a listed conversation", got[slices.IndexFunc(got, func(c *agentowl.Conversation) bool { return c.ID == all[3].ID })], all[3])

	keep := func(f func(c *agentowl.Conversation) bool) []string {
		var out []*agentowl.Conversation
		for _, c := range want {
			if f(c) {
				out = append(out, c)
			}
		}
		return convIDs(out)
	}
	equal(t, "by channel", convIDs(list(agentowl.ConversationListParams{Channel: "sms"})),
		keep(func(c *agentowl.Conversation) bool { return c.Channel == "sms" }))
	equal(t, "by binding", convIDs(list(agentowl.ConversationListParams{BindingID: hook.ID})),
		keep(func(c *agentowl.Conversation) bool { return c.BindingID == hook.ID }))
	equal(t, "by status", convIDs(list(agentowl.ConversationListParams{Status: agentowl.ConversationEnded})), []string{all[3].ID})
	equal(t, "by channel and binding that disagree", convIDs(list(agentowl.ConversationListParams{Channel: "sms", BindingID: hook.ID})),
		[]string{})

	for _, size := range []int{1, 2, 3, 7} {
		var seen []string
		var after *agentowl.Cursor
		for range 10 {
			page := list(agentowl.ConversationListParams{After: after, Limit: size})
			seen = append(seen, convIDs(page)...)
			if len(page) < size {
				break
			}
			last := page[len(page)-1]
			after = &agentowl.Cursor{At: last.LastEventAt, ID: last.ID}
		}
		equal(t, fmt.Sprintf("pages of %d", size), seen, convIDs(want))
	}
}

// testEventList checks a conversation's events in order (oldest first, ties
// by ID), paging and counting, and that other conversations' events stay
// out.
// conversationEvents persists a conversation with n events, two to a
// second (so that times tie), beside another conversation with one event
// of its own, and returns the first and its events as written.
func (e *env) conversationEvents(t *testing.T, n int) (*agentowl.Conversation, []*agentowl.Event) {
	t.Helper()
	b := e.binding(t, e.endpoint(t, e.tenant(t).ID))
	c, other := newConversation(b, "", e.now), newConversation(b, "", e.now)
	var evs []*agentowl.Event
	for i := range n {
		evs = append(evs, newEvent(c, e.now.Add(time.Duration(i/2)*time.Second)))
	}
	e.write(t, func(tx agentowl.Tx) error {
		for _, v := range []*agentowl.Conversation{c, other} {
			if err := tx.ConversationCreate(e.ctx, v); err != nil {
				return err
			}
		}
		for _, ev := range append(slices.Clone(evs), newEvent(other, e.now)) {
			if err := tx.EventCreate(e.ctx, ev); err != nil {
				return err
			}
		}
		return nil
	})
	return c, evs
}

func testEventList(t *testing.T, e *env) {
	c, evs := e.conversationEvents(t, 5)
	slices.SortFunc(evs, func(a, b *agentowl.Event) int {
		if c := a.ReceivedAt.Compare(b.ReceivedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	list := func(after *agentowl.Cursor, limit int) []*agentowl.Event {
		t.Helper()
		return read(t, e, func(tx agentowl.Tx) ([]*agentowl.Event, error) {
			return tx.EventList(e.ctx, agentowl.EventListParams{ConversationID: c.ID, After: after, Limit: limit})
		})
	}
	got := list(nil, 0)
	equal(t, "events, oldest first", eventIDs(got), eventIDs(evs))
	equal(t, "a listed event", got[0], evs[0])
	var seen []string
	var after *agentowl.Cursor
	for range 10 {
		page := list(after, 2)
		seen = append(seen, eventIDs(page)...)
		if len(page) < 2 {
			break
		}
		after = &agentowl.Cursor{At: page[1].ReceivedAt, ID: page[1].ID}
	}
	equal(t, "events by pages of 2", seen, eventIDs(evs))
	n := read(t, e, func(tx agentowl.Tx) (int, error) { return tx.EventCountByConversation(e.ctx, c.ID) })
	equal(t, "event count", n, 5)
	n = read(t, e, func(tx agentowl.Tx) (int, error) { return tx.EventCountByConversation(e.ctx, "conv_missing") })
	equal(t, "event count of no conversation", n, 0)
}

// testEventMove moves an event and its work to another conversation.
func testEventMove(t *testing.T, e *env) {
	tn := e.tenant(t)
	ep, from, ev := e.thread(t, tn.ID)
	w1, w2 := e.work(t, newWork(ep, ev, 1, e.now)), e.work(t, newWork(ep, ev, 2, e.now))
	_, _, bystander := e.thread(t, tn.ID)
	bw := e.work(t, newWork(ep, bystander, 1, e.now))
	to := newConversation(read(t, e, func(tx agentowl.Tx) (*agentowl.Binding, error) { return tx.BindingGet(e.ctx, ev.BindingID) }), "", e.now)
	e.write(t, func(tx agentowl.Tx) error {
		if err := tx.EmailMessageCreate(e.ctx, &agentowl.EmailMessage{TenantID: tn.ID, BindingID: ev.BindingID, MessageID: "m1@example.org",
			ConversationID: from.ID, EventID: ev.ID}); err != nil {
			return err
		}
		if err := tx.ConversationCreate(e.ctx, to); err != nil {
			return err
		}
		if err := tx.EventMove(e.ctx, ev.ID, to.ID, true); err != nil {
			return err
		}
		return tx.WorkMoveByEvent(e.ctx, ev.ID, to.ID)
	})
	ev.ConversationID, ev.FollowUp = to.ID, true
	equal(t, "moved event", read(t, e, func(tx agentowl.Tx) (*agentowl.Event, error) { return tx.EventGet(e.ctx, ev.ID) }), ev)
	for _, w := range []*agentowl.Work{w1, w2} {
		w.ConversationID = to.ID
		equal(t, "moved work", e.getWork(t, w.ID), w)
	}
	equal(t, "another event's work", e.getWork(t, bw.ID), bw)
	convs := read(t, e, func(tx agentowl.Tx) ([]string, error) {
		return tx.EmailConversations(e.ctx, tn.ID, ev.BindingID, []string{"m1@example.org"})
	})
	equal(t, "the moved email's Message-ID", convs, []string{to.ID})
	n := read(t, e, func(tx agentowl.Tx) (int, error) { return tx.EventCountByConversation(e.ctx, from.ID) })
	equal(t, "events left in the first conversation", n, 0)
	wantErr(t, "moving an unknown event", e.writeErr(func(tx agentowl.Tx) error {
		return tx.EventMove(e.ctx, "evt_missing", to.ID, false)
	}), agentowl.ErrNotFound)
	if err := e.writeErr(func(tx agentowl.Tx) error { return tx.EventMove(e.ctx, ev.ID, "conv_missing", false) }); err == nil {
		t.Fatal("an event was moved to a conversation that does not exist")
	}
}

// testWorkCountOpen counts the work of a conversation that has not ended.
func testWorkCountOpen(t *testing.T, e *env) {
	tn := e.tenant(t)
	ep, c, ev := e.thread(t, tn.ID)
	count := func() int {
		t.Helper()
		return read(t, e, func(tx agentowl.Tx) (int, error) { return tx.WorkCountOpen(e.ctx, c.ID) })
	}
	equal(t, "no work", count(), 0)
	statuses := []agentowl.WorkStatus{agentowl.WorkPending, agentowl.WorkAccepted, agentowl.WorkRunning, agentowl.WorkNeedsInput,
		agentowl.WorkCompleted, agentowl.WorkFailed, agentowl.WorkCancelled}
	for i, st := range statuses {
		w := e.work(t, newWork(ep, ev, i+1, e.now))
		w.Status, w.UpdatedAt = st, e.now
		if st != agentowl.WorkPending {
			w.Sequence = 1
		}
		if st.Terminal() {
			w.EndedAt = ptr(e.now)
		}
		e.write(t, func(tx agentowl.Tx) error { return tx.WorkUpdate(e.ctx, w) })
	}
	_, _, elsewhere := e.thread(t, tn.ID)
	e.work(t, newWork(ep, elsewhere, 1, e.now))
	equal(t, "open work", count(), 4)
}

// testMessageRewrite replaces a body only while no attempt has started.
func testMessageRewrite(t *testing.T, e *env) {
	tn := e.tenant(t)
	m, sent, done := newMessage(tn.ID, e.now), newMessage(tn.ID, e.now.Add(time.Second)), msgEnded(tn.ID, agentowl.MessageDelivered, e.now, e.now.Add(time.Hour))
	e.messages(t, m, sent, done)
	rewrite := func(id string, body string) error {
		return e.writeErr(func(tx agentowl.Tx) error { return tx.MessageRewrite(e.ctx, id, []byte(body)) })
	}
	if err := rewrite(m.ID, "{\"v\":2}\x00\xff"); err != nil {
		t.Fatal(err)
	}
	m.Body = []byte("{\"v\":2}\x00\xff")
	equal(t, "rewritten message", e.getMessage(t, m.ID), m)

	// A claimed message may be on the wire: its body is fixed.
	claimed := e.claim(t, "w1", e.now.Add(time.Second), e.now.Add(time.Minute), 2)
	equal(t, "claimed", len(claimed), 2)
	wantErr(t, "rewriting a claimed message", rewrite(sent.ID, "{}"), agentowl.ErrConflict)
	// Deferred without an attempt, it may be rewritten again.
	e.write(t, func(tx agentowl.Tx) error { return tx.MessageDefer(e.ctx, m.ID, "w1", 1, e.now.Add(time.Hour)) })
	if err := rewrite(m.ID, "{\"v\":3}"); err != nil {
		t.Fatalf("rewriting a deferred message: %v", err)
	}
	// An attempt that ended keeps the body fixed, retried or not.
	e.finish(t, agentowl.FinishParams{ID: sent.ID, Owner: "w1", Attempt: newAttempt(sent, 1, e.now, 503, ""),
		State: agentowl.MessagePending, NextAttempt: e.now.Add(time.Minute)})
	wantErr(t, "rewriting a message after an attempt", rewrite(sent.ID, "{}"), agentowl.ErrConflict)
	wantErr(t, "rewriting a delivered message", rewrite(done.ID, "{}"), agentowl.ErrConflict)
	wantErr(t, "rewriting an unknown message", rewrite("00000000-0000-0000-0000-000000000000", "{}"), agentowl.ErrNotFound)
}
