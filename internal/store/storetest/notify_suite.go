package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/agentowl/agentowl"
)

// notifyTests are the conformance subtests of notifications and console
// sessions; Exercise runs them with the others.
var notifyTests = []suiteCase[*env]{
	{"NotificationFanOut", testNotificationFanOut},
	{"NotificationFanOutConcurrent", testNotificationFanOutConcurrent},
	{"NotificationReadState", testNotificationReadState},
	{"ConsoleSessions", testConsoleSessions},
}

func (e *env) operators(t *testing.T, tenantID string, n int) []*agentowl.Operator {
	t.Helper()
	var out []*agentowl.Operator
	for range n {
		o := newOperator(tenantID, e.now)
		e.write(t, func(tx agentowl.Tx) error { return tx.OperatorCreate(e.ctx, o) })
		out = append(out, o)
	}
	return out
}

func fanOut(tenantID, key, kind, endpointID string, at time.Time) *agentowl.NotificationFanOut {
	return &agentowl.NotificationFanOut{TenantID: tenantID, CauseKey: key, Kind: kind, Cause: "work_completed",
		Subject: "work:" + key, EndpointID: endpointID, Title: "Title of " + key, CreatedAt: at,
		IDPrefix: "ntf_" + agentowl.NewID("")[:8] + "_"}
}

func (e *env) fanOut(t *testing.T, f *agentowl.NotificationFanOut) int {
	t.Helper()
	var n int
	e.write(t, func(tx agentowl.Tx) error { return tx.NotificationFanOut(e.ctx, f, &n) })
	return n
}

func notices(t *testing.T, e *env, p agentowl.NotificationListParams) []*agentowl.Notification {
	t.Helper()
	return read(t, e, func(tx agentowl.Tx) ([]*agentowl.Notification, error) { return tx.NotificationList(e.ctx, p) })
}

func testNotificationFanOut(t *testing.T, e *env) {
	ten, other := e.tenant(t), e.tenant(t)
	ops := e.operators(t, ten.ID, 3)
	e.operators(t, other.ID, 2)
	// ops[1] mutes results; ops[2] mutes endpoint ep_muted.
	e.write(t, func(tx agentowl.Tx) error {
		if err := tx.NotificationSetMutes(e.ctx, ten.ID, ops[1].ID, []agentowl.NotificationMute{{By: "kind", Value: "result"}}); err != nil {
			return err
		}
		return tx.NotificationSetMutes(e.ctx, ten.ID, ops[2].ID, []agentowl.NotificationMute{{By: "endpoint", Value: "ep_muted"}})
	})
	equal(t, "mutes", read(t, e, func(tx agentowl.Tx) ([]agentowl.NotificationMute, error) {
		return tx.NotificationMutes(e.ctx, ops[1].ID)
	}), []agentowl.NotificationMute{{By: "kind", Value: "result"}})

	equal(t, "result on ep_a reaches", e.fanOut(t, fanOut(ten.ID, "k1", "result", "ep_a", e.now)), 2)
	equal(t, "failure on ep_muted reaches", e.fanOut(t, fanOut(ten.ID, "k2", "failure", "ep_muted", e.now.Add(time.Second))), 2)
	equal(t, "the same cause again", e.fanOut(t, fanOut(ten.ID, "k1", "result", "ep_a", e.now.Add(time.Hour))), 0)
	equal(t, "no endpoint", e.fanOut(t, fanOut(ten.ID, "k3", "input", "", e.now.Add(2*time.Second))), 3)

	got := notices(t, e, agentowl.NotificationListParams{OperatorID: ops[0].ID})
	if len(got) != 3 || got[0].CauseKey != "k3" || got[1].CauseKey != "k2" || got[2].CauseKey != "k1" {
		t.Fatalf("ops[0] notices = %s", show(got))
	}
	n := got[2]
	if n.TenantID != ten.ID || n.OperatorID != ops[0].ID || n.Kind != "result" || n.Cause != "work_completed" ||
		n.Subject != "work:k1" || n.EndpointID != "ep_a" || n.Title != "Title of k1" || !n.CreatedAt.Equal(e.now) || n.ReadAt != nil {
		t.Fatalf("notice = %s", show(n))
	}
	keys := func(ns []*agentowl.Notification) []string {
		var out []string
		for _, n := range ns {
			out = append(out, n.CauseKey)
		}
		return sorted(out)
	}
	equal(t, "ops[1] (muted results)", keys(notices(t, e, agentowl.NotificationListParams{OperatorID: ops[1].ID})), []string{"k2", "k3"})
	equal(t, "ops[2] (muted ep_muted)", keys(notices(t, e, agentowl.NotificationListParams{OperatorID: ops[2].ID})), []string{"k1", "k3"})

	// Pages: newest first, after a cursor.
	page := notices(t, e, agentowl.NotificationListParams{OperatorID: ops[0].ID, Limit: 2})
	next := notices(t, e, agentowl.NotificationListParams{OperatorID: ops[0].ID, Limit: 2,
		After: &agentowl.Cursor{At: page[1].CreatedAt, ID: page[1].ID}})
	if len(page) != 2 || len(next) != 1 || next[0].CauseKey != "k1" {
		t.Fatalf("pages = %s then %s", show(page), show(next))
	}
	// Another recipient's notice is not found.
	_, err := read2(e, func(tx agentowl.Tx) (*agentowl.Notification, error) {
		return tx.NotificationGet(e.ctx, ops[1].ID, n.ID)
	})
	wantErr(t, "another recipient's notice", err, agentowl.ErrNotFound)
	// Replacing mutes removes the old ones.
	e.write(t, func(tx agentowl.Tx) error { return tx.NotificationSetMutes(e.ctx, ten.ID, ops[1].ID, nil) })
	equal(t, "mutes cleared", len(read(t, e, func(tx agentowl.Tx) ([]agentowl.NotificationMute, error) {
		return tx.NotificationMutes(e.ctx, ops[1].ID)
	})), 0)
}

func read2[T any](e *env, fn func(tx agentowl.Tx) (T, error)) (T, error) {
	var v T
	err := e.s.Read(e.ctx, func(tx agentowl.Tx) (err error) {
		v, err = fn(tx)
		return err
	})
	return v, err
}

// testNotificationFanOutConcurrent: concurrent fan-outs of one cause leave
// one notice per recipient.
func testNotificationFanOutConcurrent(t *testing.T, e *env) {
	ten := e.tenant(t)
	ops := e.operators(t, ten.ID, 5)
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	total := make(chan int, 20)
	for range 20 {
		wg.Go(func() {
			var n int
			err := e.s.Write(e.ctx, func(tx agentowl.Tx) error {
				return tx.NotificationFanOut(e.ctx, fanOut(ten.ID, "same", "failure", "", e.now), &n)
			})
			total <- n
			if err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	close(total)
	for err := range errs {
		t.Fatalf("fan-out: %v", err)
	}
	sum := 0
	for n := range total {
		sum += n
	}
	for _, o := range ops {
		if got := notices(t, e, agentowl.NotificationListParams{OperatorID: o.ID}); len(got) != 1 {
			t.Fatalf("operator %s has %d notices", o.Name, len(got))
		}
	}
	// A retried transaction may count twice, never less.
	if sum < len(ops) {
		t.Fatalf("fan-outs reported %d notices, want at least %d", sum, len(ops))
	}
}

func testNotificationReadState(t *testing.T, e *env) {
	ten := e.tenant(t)
	ops := e.operators(t, ten.ID, 2)
	for i := range 4 {
		e.fanOut(t, fanOut(ten.ID, fmt.Sprint("k", i), "input", "", e.now.Add(time.Duration(i)*time.Second)))
	}
	unread := func(o *agentowl.Operator) int {
		return read(t, e, func(tx agentowl.Tx) (int, error) { return tx.NotificationUnread(e.ctx, o.ID) })
	}
	list := notices(t, e, agentowl.NotificationListParams{OperatorID: ops[0].ID})
	markRead := func(o *agentowl.Operator, ids []string) int {
		var n int
		e.write(t, func(tx agentowl.Tx) (err error) {
			n, err = tx.NotificationMarkRead(e.ctx, o.ID, ids, e.now.Add(time.Minute))
			return err
		})
		return n
	}
	equal(t, "mark one", markRead(ops[0], []string{list[0].ID}), 1)
	equal(t, "mark it again", markRead(ops[0], []string{list[0].ID}), 0)
	equal(t, "another's notice", markRead(ops[1], []string{list[1].ID}), 0)
	equal(t, "unread of ops[0]", unread(ops[0]), 3)
	equal(t, "unread of ops[1]", unread(ops[1]), 4)
	got := read(t, e, func(tx agentowl.Tx) (*agentowl.Notification, error) {
		return tx.NotificationGet(e.ctx, ops[0].ID, list[0].ID)
	})
	if got.ReadAt == nil || !got.ReadAt.Equal(e.now.Add(time.Minute)) {
		t.Fatalf("read_at = %v", got.ReadAt)
	}
	equal(t, "unread only", len(notices(t, e, agentowl.NotificationListParams{OperatorID: ops[0].ID, UnreadOnly: true})), 3)
	equal(t, "mark all", markRead(ops[0], nil), 3)
	equal(t, "unread after all", unread(ops[0]), 0)
	equal(t, "ops[1] untouched", unread(ops[1]), 4)
	equal(t, "empty list marks nothing", markRead(ops[1], []string{}), 0)
}

func testConsoleSessions(t *testing.T, e *env) {
	ten := e.tenant(t)
	op := e.operators(t, ten.ID, 1)[0]
	tok := newToken(agentowl.TokenOperator, ten.ID, e.now)
	tok.OperatorID = op.ID
	e.write(t, func(tx agentowl.Tx) error { return tx.TokenCreate(e.ctx, tok) })
	s := &agentowl.ConsoleSessionRecord{ID: agentowl.NewID(""), Kind: agentowl.ConsoleLoginLink, Hash: hashOf(agentowl.NewID("")),
		TenantID: ten.ID, OperatorID: op.ID, TokenID: tok.ID, CreatedAt: e.now, LastSeenAt: e.now, ExpiresAt: e.now.Add(time.Hour)}
	e.write(t, func(tx agentowl.Tx) error { return tx.ConsoleSessionCreate(e.ctx, s) })
	dup := *s
	dup.ID = agentowl.NewID("")
	wantErr(t, "a taken hash", e.writeErr(func(tx agentowl.Tx) error { return tx.ConsoleSessionCreate(e.ctx, &dup) }), agentowl.ErrConflict)

	got, gotTok, err := readPair(e, func(tx agentowl.Tx) (*agentowl.ConsoleSessionRecord, *agentowl.Token, error) {
		return tx.ConsoleSessionGetByHash(e.ctx, s.Hash)
	})
	if err != nil {
		t.Fatal(err)
	}
	equal(t, "session", got, s)
	equal(t, "its token", gotTok, tok)
	_, _, err = readPair(e, func(tx agentowl.Tx) (*agentowl.ConsoleSessionRecord, *agentowl.Token, error) {
		return tx.ConsoleSessionGetByHash(e.ctx, hashOf("nope"))
	})
	wantErr(t, "unknown hash", err, agentowl.ErrNotFound)

	e.write(t, func(tx agentowl.Tx) error { return tx.ConsoleSessionUse(e.ctx, s.ID, e.now.Add(time.Second)) })
	wantErr(t, "a link used twice", e.writeErr(func(tx agentowl.Tx) error { return tx.ConsoleSessionUse(e.ctx, s.ID, e.now) }),
		agentowl.ErrConflict)
	e.write(t, func(tx agentowl.Tx) error { return tx.ConsoleSessionTouch(e.ctx, s.ID, e.now.Add(time.Minute)) })
	e.write(t, func(tx agentowl.Tx) error { return tx.ConsoleSessionRevoke(e.ctx, s.ID, e.now.Add(2*time.Minute)) })
	e.write(t, func(tx agentowl.Tx) error { return tx.ConsoleSessionRevoke(e.ctx, s.ID, e.now.Add(3*time.Minute)) })
	got, _, err = readPair(e, func(tx agentowl.Tx) (*agentowl.ConsoleSessionRecord, *agentowl.Token, error) {
		return tx.ConsoleSessionGetByHash(e.ctx, s.Hash)
	})
	if err != nil {
		t.Fatal(err)
	}
	if !got.UsedAt.Equal(e.now.Add(time.Second)) || !got.LastSeenAt.Equal(e.now.Add(time.Minute)) ||
		!got.RevokedAt.Equal(e.now.Add(2*time.Minute)) {
		t.Fatalf("after use, touch and revoke: %s", show(got))
	}
	wantErr(t, "touch unknown", e.writeErr(func(tx agentowl.Tx) error { return tx.ConsoleSessionTouch(e.ctx, "nope", e.now) }),
		agentowl.ErrNotFound)
}
