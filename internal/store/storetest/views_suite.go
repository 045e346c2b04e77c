package storetest

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentowl/agentowl"
)

// The operator views' reads (agentowl.OperatorViewStore).
var viewTests = []suiteCase[*env]{
	{"EventListEarlier", testEventListEarlier},
	{"EventDigests", testEventDigests},
	{"AttentionUrgency", testAttentionUrgency},
	{"RequestsByDeadline", testRequestsByDeadline},
}

// testEventListEarlier: a conversation's events before one, newest first,
// ties by ID, other conversations' left out.
func testEventListEarlier(t *testing.T, e *env) {
	c, evs := e.conversationEvents(t, 6)
	slices.SortFunc(evs, func(a, b *agentowl.Event) int {
		if c := b.ReceivedAt.Compare(a.ReceivedAt); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
	earlier := func(before *agentowl.Event, limit int) []string {
		t.Helper()
		return eventIDs(read(t, e, func(tx agentowl.Tx) ([]*agentowl.Event, error) {
			return tx.EventListEarlier(e.ctx, c.ID, agentowl.Cursor{At: before.ReceivedAt, ID: before.ID}, limit)
		}))
	}
	equal(t, "before the newest, newest first", earlier(evs[0], 10), eventIDs(evs[1:]))
	equal(t, "the newest two before the second", earlier(evs[1], 2), eventIDs(evs[2:4]))
	equal(t, "before the first", earlier(evs[5], 10), []string{})
	got := read(t, e, func(tx agentowl.Tx) ([]*agentowl.Event, error) {
		return tx.EventListEarlier(e.ctx, c.ID, agentowl.Cursor{At: evs[0].ReceivedAt, ID: evs[0].ID}, 1)
	})
	equal(t, "a listed event, whole", got[0], evs[1])
}

// testEventDigests: the event of each work with its payload cut, the
// conversation list's first events and open work counts.
func testEventDigests(t *testing.T, e *env) {
	tn := e.tenant(t)
	ep, c, ev := e.thread(t, tn.ID)
	big := newEvent(c, e.now.Add(time.Second))
	big.Payload = json.RawMessage(`{"text": "` + strings.Repeat("x", agentowl.EventDigestBytes) + `"}`)
	_, c2, ev2 := e.thread(t, tn.ID)
	e.write(t, func(tx agentowl.Tx) error { return tx.EventCreate(e.ctx, big) })
	w1, w2 := e.work(t, newWork(ep, ev, 1, e.now)), e.work(t, newWork(ep, big, 1, e.now))
	done := newWork(ep, ev, 2, e.now)
	done.Status, done.Sequence, done.EndedAt = agentowl.WorkCompleted, 1, ptr(e.now)
	e.work(t, done)
	got := read(t, e, func(tx agentowl.Tx) (map[string]*agentowl.Event, error) {
		return tx.EventDigestsByWork(e.ctx, []string{w1.ID, w2.ID, "work_missing"})
	})
	if len(got) != 2 || got[w1.ID] == nil || got[w2.ID] == nil {
		t.Fatalf("digests %v", got)
	}
	d1 := got[w1.ID]
	equal(t, "a digest's event", []any{d1.ID, d1.ConversationID, d1.Channel, d1.Sender, d1.ReceivedAt, string(d1.Payload)},
		[]any{ev.ID, ev.ConversationID, ev.Channel, ev.Sender, ev.ReceivedAt, string(ev.Payload)})
	equal(t, "a big payload, cut", string(got[w2.ID].Payload), string(big.Payload[:agentowl.EventDigestBytes]))
	none := read(t, e, func(tx agentowl.Tx) (map[string]*agentowl.Event, error) { return tx.EventDigestsByWork(e.ctx, nil) })
	equal(t, "no works", len(none), 0)

	cd := read(t, e, func(tx agentowl.Tx) (map[string]*agentowl.ConversationDigest, error) {
		return tx.ConversationDigests(e.ctx, []string{c.ID, c2.ID, "conv_missing"})
	})
	if len(cd) != 2 || cd[c.ID] == nil || cd[c2.ID] == nil {
		t.Fatalf("conversation digests %v", cd)
	}
	equal(t, "first events and open work", []any{cd[c.ID].First.ID, cd[c.ID].OpenWork, cd[c2.ID].First.ID, cd[c2.ID].OpenWork},
		[]any{ev.ID, 2, ev2.ID, 0})
}

// testAttentionUrgency: counts per kind and status; dated items soonest
// first and undated ones newest first, each paging by keyset; resolved
// and other tenants' items left out.
func testAttentionUrgency(t *testing.T, e *env) {
	tn, other := e.tenant(t), e.tenant(t)
	ep, _, ev := e.thread(t, tn.ID)
	w := e.work(t, newWork(ep, ev, 1, e.now))
	oep, _, oev := e.thread(t, other.ID)
	ow := e.work(t, newWork(oep, oev, 1, e.now))
	question := func(w *agentowl.Work, created time.Time, expires time.Duration, st agentowl.AttentionStatus) *agentowl.AttentionItem {
		return e.attention(t, &agentowl.AttentionItem{ID: wid("att"), TenantID: w.TenantID, Kind: "question", Status: st, WorkID: w.ID,
			EndpointID: w.EndpointID, RequestID: "q-" + agentowl.NewID("")[:8], Revision: 1, Prompt: "Which?",
			AllowedDecisions: []string{"answer"}, ExpiresAt: ptr(e.now.Add(expires)), ContentHash: hashOf("q"), Request: []byte(`{}`),
			CreatedAt: created, UpdatedAt: created})
	}
	late := question(w, e.now, 2*time.Hour, agentowl.AttentionOpen)
	soon := question(w, e.now.Add(-time.Hour), 10*time.Minute, agentowl.AttentionAcknowledged)
	tie1, tie2 := question(w, e.now, time.Hour, agentowl.AttentionOpen), question(w, e.now, time.Hour, agentowl.AttentionOpen)
	if tie2.ID < tie1.ID {
		tie1, tie2 = tie2, tie1
	}
	gone := question(w, e.now, time.Minute, agentowl.AttentionOpen)
	gone.Status = agentowl.AttentionResolved
	e.write(t, func(tx agentowl.Tx) error { return tx.AttentionUpdate(e.ctx, gone) })
	question(ow, e.now, time.Minute, agentowl.AttentionOpen)
	inc1 := e.attention(t, newIncident(w, "", e.now.Add(-time.Minute)))
	inc2 := e.attention(t, newIncident(w, "", e.now))

	counts := read(t, e, func(tx agentowl.Tx) ([]agentowl.AttentionCount, error) {
		return tx.AttentionCounts(e.ctx, tn.ID, e.now.Add(15*time.Minute))
	})
	equal(t, "counts", counts, []agentowl.AttentionCount{
		{Kind: "incident", Status: agentowl.AttentionOpen, N: 2},
		{Kind: "question", Status: agentowl.AttentionAcknowledged, N: 1, Soon: 1},
		{Kind: "question", Status: agentowl.AttentionOpen, N: 3},
	})
	ids := func(its []*agentowl.AttentionItem) []string {
		out := []string{}
		for _, it := range its {
			out = append(out, it.ID)
		}
		return out
	}
	dated := func(st agentowl.AttentionStatus, after *agentowl.Cursor, limit int) []*agentowl.AttentionItem {
		return read(t, e, func(tx agentowl.Tx) ([]*agentowl.AttentionItem, error) {
			return tx.AttentionListDated(e.ctx, agentowl.AttentionListParams{TenantID: tn.ID, Status: st, After: after, Limit: limit})
		})
	}
	equal(t, "dated, soonest first", ids(dated(agentowl.AttentionUnresolved, nil, 0)), []string{soon.ID, tie1.ID, tie2.ID, late.ID})
	equal(t, "dated, open", ids(dated(agentowl.AttentionOpen, nil, 0)), []string{tie1.ID, tie2.ID, late.ID})
	equal(t, "dated, acknowledged", ids(dated(agentowl.AttentionAcknowledged, nil, 0)), []string{soon.ID})
	page := dated(agentowl.AttentionUnresolved, nil, 2)
	equal(t, "dated, the next page", ids(dated(agentowl.AttentionUnresolved, &agentowl.Cursor{At: *page[1].ExpiresAt, ID: page[1].ID}, 2)),
		[]string{tie2.ID, late.ID})
	equal(t, "a dated item, whole", dated(agentowl.AttentionUnresolved, nil, 1)[0], soon)
	undated := func(after *agentowl.Cursor) []string {
		return ids(read(t, e, func(tx agentowl.Tx) ([]*agentowl.AttentionItem, error) {
			return tx.AttentionListUndated(e.ctx, agentowl.AttentionListParams{TenantID: tn.ID, Status: agentowl.AttentionUnresolved, After: after})
		}))
	}
	equal(t, "undated, newest first", undated(nil), []string{inc2.ID, inc1.ID})
	equal(t, "undated, the next page", undated(&agentowl.Cursor{At: inc2.CreatedAt, ID: inc2.ID}), []string{inc1.ID})
}

// testRequestsByDeadline: pending requests not past their deadline,
// soonest first, paged; counts with acknowledgements.
func testRequestsByDeadline(t *testing.T, e *env) {
	tn := e.tenant(t)
	in := e.instance(t, tn.ID, e.now)
	a := newRequest(in, e.now)
	a.DeadlineAt = e.now.Add(time.Hour)
	b := newRequest(in, e.now)
	b.DeadlineAt = e.now.Add(10 * time.Minute)
	past := newRequest(in, e.now.Add(-time.Hour))
	past.DeadlineAt = e.now.Add(-time.Minute)
	decided := newRequest(in, e.now)
	e.write(t, func(tx agentowl.Tx) error {
		for _, r := range []*agentowl.ApprovalRequest{a, b, past, decided} {
			if err := tx.RequestCreate(e.ctx, r); err != nil {
				return err
			}
		}
		return tx.AAPAckSet(e.ctx, &agentowl.AAPAck{RequestID: a.ID, TenantID: tn.ID, Assignee: "ann", At: e.now})
	})
	e.resolve(t, decided, denied(e.now), e.now.Add(time.Hour))
	list := func(after *agentowl.Cursor, limit int) []string {
		rs := read(t, e, func(tx agentowl.Tx) ([]*agentowl.ApprovalRequest, error) {
			return tx.RequestListPendingByDeadline(e.ctx, tn.ID, e.now, after, limit)
		})
		out := []string{}
		for _, r := range rs {
			out = append(out, r.ID)
		}
		return out
	}
	equal(t, "by deadline", list(nil, 0), []string{b.ID, a.ID})
	equal(t, "after the first", list(&agentowl.Cursor{At: b.DeadlineAt, ID: b.ID}, 1), []string{a.ID})
	c := read(t, e, func(tx agentowl.Tx) (agentowl.RequestCounts, error) {
		return tx.RequestCountPending(e.ctx, tn.ID, e.now, e.now.Add(15*time.Minute))
	})
	equal(t, "counts", c, agentowl.RequestCounts{Pending: 2, Acknowledged: 1, Soon: 1})
}
