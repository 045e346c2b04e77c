package work

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/clocktest"
	"github.com/agentowl/agentowl/internal/ratelimit"
	"github.com/agentowl/agentowl/internal/store/storetest"
)

// The rules of RecordCallback and AuthenticateRuntime that need a store:
// which callback applies (sequence, duplicates, conflicts, terminal work,
// the callback cap), what it writes, and what it means for the inbox. They
// run on every store backend storetest offers (SQLite always).

var testIDs atomic.Int64

// testID is an ID unique in the test binary, with a readable kind prefix.
func testID(kind string) string { return fmt.Sprintf("%s_t%d", kind, testIDs.Add(1)) }

// cbEnv is one backend's store with a tenant, an agent-work endpoint, a
// runtime credential, and an event that work is made for.
type cbEnv struct {
	t     *testing.T
	ctx   context.Context
	st    agentowl.Store
	clock *clocktest.Fake
	svc   *Service
	ep    *agentowl.Endpoint
	cred  *agentowl.RuntimeCredential
	conv  *agentowl.Conversation
	ev    *agentowl.Event
}

// forEachStore runs fn on a fresh environment of every store backend.
func forEachStore(t *testing.T, cfg Config, fn func(t *testing.T, e *cbEnv)) {
	t.Helper()
	storetest.Each(t, func(t *testing.T, b storetest.Backend) {
		fn(t, newCBEnv(t, b.Open(t), cfg))
	})
}

func newCBEnv(t *testing.T, st agentowl.Store, cfg Config) *cbEnv {
	t.Helper()
	e := &cbEnv{t: t, ctx: t.Context(), st: st, clock: clocktest.New(time.Date(2026, 10, 6, 12, 0, 0, 0, time.UTC))}
	svc, err := New(st, e.clock, nil, nil, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.svc = svc
	now := e.clock.Now()
	tn := &agentowl.Tenant{ID: testID("t"), Name: testID("tenant"), CreatedAt: now}
	e.ep = &agentowl.Endpoint{ID: testID("ep"), TenantID: tn.ID, Name: "runtime", URL: "https://runtime.example.com/",
		AgentWork: true, SigningSecret: []byte("sealed"), CreatedAt: now, UpdatedAt: now}
	b := &agentowl.Binding{ID: testID("bnd"), TenantID: tn.ID, Channel: "webhook", Name: "crm", EndpointID: e.ep.ID,
		TokenHash: []byte(testID("h")), CreatedAt: now}
	e.conv = &agentowl.Conversation{ID: testID("conv"), TenantID: tn.ID, BindingID: b.ID, Channel: "webhook",
		Status: agentowl.ConversationOpen, CreatedAt: now, LastEventAt: now}
	e.ev = &agentowl.Event{ID: testID("evt"), TenantID: tn.ID, BindingID: b.ID, ConversationID: e.conv.ID, Channel: "webhook",
		Sender: "crm", ReceivedAt: now, Headers: map[string][]string{}, Payload: []byte(`{}`), Attachments: []byte(`[]`)}
	e.write(func(tx agentowl.Tx) error {
		for _, f := range []func() error{
			func() error { return tx.TenantCreate(e.ctx, tn) },
			func() error { return tx.EndpointCreate(e.ctx, e.ep) },
			func() error { return tx.BindingCreate(e.ctx, b) },
			func() error { return tx.ConversationCreate(e.ctx, e.conv) },
			func() error { return tx.EventCreate(e.ctx, e.ev) },
		} {
			if err := f(); err != nil {
				return err
			}
		}
		return nil
	})
	e.cred = e.credential(e.ep, now.Add(30*24*time.Hour), ScopeCallbacks)
	return e
}

func (e *cbEnv) write(fn func(tx agentowl.Tx) error) {
	e.t.Helper()
	if err := e.st.Write(e.ctx, fn); err != nil {
		e.t.Fatalf("write: %v", err)
	}
}

// credential stores a runtime credential of ep, expiring at expires.
func (e *cbEnv) credential(ep *agentowl.Endpoint, expires time.Time, scopes ...string) *agentowl.RuntimeCredential {
	e.t.Helper()
	c := &agentowl.RuntimeCredential{ID: testID("rtc"), TenantID: ep.TenantID, EndpointID: ep.ID,
		Hash: agentowl.HashToken(agentowl.NewTokenSecret(agentowl.TokenRuntime)), Scopes: scopes, CreatedAt: e.clock.Now(), ExpiresAt: expires}
	e.write(func(tx agentowl.Tx) error { return tx.RuntimeCredentialCreate(e.ctx, c) })
	return c
}

// newWork stores pending work of the event, as a handoff does.
func (e *cbEnv) newWork() *agentowl.Work {
	e.t.Helper()
	now := e.clock.Now()
	w := &agentowl.Work{ID: testID("work"), TenantID: e.ev.TenantID, EndpointID: e.ep.ID, ConversationID: e.conv.ID,
		EventID: e.ev.ID, Generation: int(testIDs.Add(1)), DeliveryID: testID("d"), CredentialID: e.cred.ID,
		Status: agentowl.WorkPending, CreatedAt: now, UpdatedAt: now}
	e.write(func(tx agentowl.Tx) error { return tx.WorkCreate(e.ctx, w) })
	return w
}

func (e *cbEnv) getWork(id string) *agentowl.Work {
	e.t.Helper()
	var w *agentowl.Work
	if err := e.st.Read(e.ctx, func(tx agentowl.Tx) (err error) { w, err = tx.WorkGet(e.ctx, id); return err }); err != nil {
		e.t.Fatal(err)
	}
	return w
}

func (e *cbEnv) items(workID string) []*agentowl.AttentionItem {
	e.t.Helper()
	var items []*agentowl.AttentionItem
	if err := e.st.Read(e.ctx, func(tx agentowl.Tx) (err error) {
		items, err = tx.AttentionList(e.ctx, agentowl.AttentionListParams{TenantID: e.ep.TenantID, WorkID: workID, Limit: 100})
		return err
	}); err != nil {
		e.t.Fatal(err)
	}
	return items
}

// cb is one callback of a scenario: its ID, sequence, status and extra
// JSON members, and what RecordCallback must answer.
type cb struct {
	id     string // "" for "cb-<seq>"
	seq    int64
	status agentowl.WorkStatus
	extra  string
	at     string // occurred_at; "" for a fixed instant
	// want: "" for an applied callback, "stale", "duplicate", or the
	// error code refusing it.
	want string
}

func (c cb) body(workID string) []byte {
	id, at := c.id, c.at
	if id == "" {
		id = fmt.Sprintf("cb-%d", c.seq)
	}
	if at == "" {
		at = "2026-10-06T12:00:00.000Z"
	}
	return fmt.Appendf(nil, `{"version":"agent-work.v1","callback_id":%q,"work_id":%q,"sequence":%d,"status":%q,"occurred_at":%q%s}`,
		id, workID, c.seq, c.status, at, c.extra)
}

// TestRecordCallbackRules runs scenarios of callbacks on fresh work and
// checks each answer and the work they leave.
func TestRecordCallbackRules(t *testing.T) {
	t.Parallel()
	needs := func(rev int) string {
		return `,"requests":[` + strings.Replace(question, `"revision":1`, fmt.Sprintf(`"revision":%d`, rev), 1) + `]`
	}
	for _, sc := range []struct {
		name string
		cbs  []cb
		// The work afterwards.
		status    agentowl.WorkStatus
		seq       int64
		callbacks int
		ended     bool
	}{
		{"the first callback applies", []cb{{seq: 1, status: agentowl.WorkAccepted}},
			agentowl.WorkAccepted, 1, 1, false},
		{"pending may end at once", []cb{{seq: 1, status: agentowl.WorkCompleted}},
			agentowl.WorkCompleted, 1, 1, true},
		{"sequence gaps are allowed", []cb{{seq: 1, status: agentowl.WorkAccepted}, {seq: 7, status: agentowl.WorkRunning}},
			agentowl.WorkRunning, 7, 2, false},
		{"the same status again applies", []cb{{seq: 1, status: agentowl.WorkRunning}, {seq: 2, status: agentowl.WorkRunning}},
			agentowl.WorkRunning, 2, 2, false},
		{"no status order: running back to accepted", []cb{{seq: 1, status: agentowl.WorkRunning}, {seq: 2, status: agentowl.WorkAccepted}},
			agentowl.WorkAccepted, 2, 2, false},
		{"needs_input, then running", []cb{{seq: 1, status: agentowl.WorkNeedsInput, extra: needs(1)}, {seq: 2, status: agentowl.WorkRunning}},
			agentowl.WorkRunning, 2, 2, false},
		{"a lower sequence is recorded stale", []cb{{seq: 5, status: agentowl.WorkRunning}, {seq: 3, status: agentowl.WorkCompleted, want: "stale"}},
			agentowl.WorkRunning, 5, 2, false},
		{"an exact retry is a duplicate", []cb{{seq: 1, status: agentowl.WorkRunning}, {seq: 1, status: agentowl.WorkRunning, want: "duplicate"}},
			agentowl.WorkRunning, 1, 1, false},
		{"a re-serialized retry is a duplicate", []cb{{seq: 1, status: agentowl.WorkRunning, extra: `,"runtime_session_id":"s"`},
			{seq: 1, status: agentowl.WorkRunning, extra: ` , "runtime_session_id" : "s" `, want: "duplicate"}},
			agentowl.WorkRunning, 1, 1, false},
		{"a callback ID reused with another status", []cb{{id: "x", seq: 1, status: agentowl.WorkRunning},
			{id: "x", seq: 1, status: agentowl.WorkCompleted, want: agentowl.ECodeCallbackConflict}},
			agentowl.WorkRunning, 1, 1, false},
		{"a callback ID reused with another sequence", []cb{{id: "x", seq: 1, status: agentowl.WorkRunning},
			{id: "x", seq: 2, status: agentowl.WorkRunning, want: agentowl.ECodeCallbackConflict}},
			agentowl.WorkRunning, 1, 1, false},
		{"a callback ID reused with another timestamp", []cb{{id: "x", seq: 1, status: agentowl.WorkRunning},
			{id: "x", seq: 1, status: agentowl.WorkRunning, at: "2026-10-06T12:00:01.000Z", want: agentowl.ECodeCallbackConflict}},
			agentowl.WorkRunning, 1, 1, false},
		{"a sequence reused by another callback", []cb{{id: "x", seq: 1, status: agentowl.WorkRunning},
			{id: "y", seq: 1, status: agentowl.WorkRunning, want: agentowl.ECodeSequenceConflict}},
			agentowl.WorkRunning, 1, 1, false},
		{"terminal work refuses a newer callback", []cb{{seq: 1, status: agentowl.WorkCompleted},
			{seq: 2, status: agentowl.WorkRunning, want: agentowl.ECodeAlreadyTerminal}},
			agentowl.WorkCompleted, 1, 1, true},
		{"terminal work refuses the same terminal status", []cb{{seq: 1, status: agentowl.WorkFailed},
			{seq: 2, status: agentowl.WorkFailed, want: agentowl.ECodeAlreadyTerminal}},
			agentowl.WorkFailed, 1, 1, true},
		{"one below the applied sequence is stale", []cb{{seq: 2, status: agentowl.WorkRunning}, {seq: 1, status: agentowl.WorkFailed, want: "stale"}},
			agentowl.WorkRunning, 2, 2, false},
		{"terminal work records an older callback stale", []cb{{seq: 4, status: agentowl.WorkCancelled},
			{seq: 2, status: agentowl.WorkRunning, want: "stale"}},
			agentowl.WorkCancelled, 4, 2, true},
		{"a duplicate after the end is still a duplicate", []cb{{seq: 1, status: agentowl.WorkRunning}, {seq: 2, status: agentowl.WorkCompleted},
			{seq: 1, status: agentowl.WorkRunning, want: "duplicate"}},
			agentowl.WorkCompleted, 2, 2, true},
	} {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			forEachStore(t, Config{}, func(t *testing.T, e *cbEnv) {
				w := e.newWork()
				var first *Receipt
				for i, c := range sc.cbs {
					before := e.getWork(w.ID)
					r, err := e.svc.RecordCallback(e.ctx, e.cred, w.ID, c.body(w.ID))
					switch c.want {
					case "", "stale", "duplicate":
						if err != nil {
							t.Fatalf("callback %d: %v", i, err)
						}
						if r.Stale != (c.want == "stale") || r.Duplicate != (c.want == "duplicate") || r.Sequence != c.seq || r.Status != c.status {
							t.Fatalf("callback %d: receipt %+v, want %q", i, r, c.want)
						}
						after := e.getWork(w.ID)
						if c.want != "duplicate" && r.WorkStatus != after.Status {
							t.Errorf("callback %d: receipt says the work is %q, it is %q", i, r.WorkStatus, after.Status)
						}
						if c.want == "" && (after.Status != c.status || !before.Status.CanBecome(after.Status)) {
							t.Errorf("callback %d: %q -> %q, which the record's rule does not allow", i, before.Status, after.Status)
						}
						if c.want != "" && (after.Status != before.Status || after.Sequence != before.Sequence) {
							t.Errorf("callback %d (%s) changed the work: %q/%d -> %q/%d", i, c.want, before.Status, before.Sequence, after.Status, after.Sequence)
						}
						if c.want == "duplicate" && (first == nil || !r.RecordedAt.Equal(first.RecordedAt) || r.WorkStatus != first.WorkStatus) {
							t.Errorf("callback %d: a duplicate's receipt %+v is not the original's %+v", i, r, first)
						}
						if i == 0 {
							first = r
						}
					default:
						if code, _ := codeOf(err); code != c.want {
							t.Fatalf("callback %d: %v, want %s", i, err, c.want)
						}
						if c.want == agentowl.ECodeAlreadyTerminal && before.Status.CanBecome(c.status) {
							t.Errorf("callback %d: refused, but the record's rule lets %q become %q", i, before.Status, c.status)
						}
					}
					e.clock.Advance(time.Second)
				}
				got := e.getWork(w.ID)
				if got.Status != sc.status || got.Sequence != sc.seq || got.Callbacks != sc.callbacks || (got.EndedAt != nil) != sc.ended {
					t.Errorf("work: status %q sequence %d callbacks %d ended %v; want %q %d %d %v",
						got.Status, got.Sequence, got.Callbacks, got.EndedAt != nil, sc.status, sc.seq, sc.callbacks, sc.ended)
				}
			})
		})
	}
}

// TestRecordCallbackScope pins who may report: only the credential's own
// endpoint (and tenant) sees the work; anything else is not_found.
func TestRecordCallbackScope(t *testing.T) {
	t.Parallel()
	forEachStore(t, Config{}, func(t *testing.T, e *cbEnv) {
		w := e.newWork()
		now := e.clock.Now()
		other := &agentowl.Endpoint{ID: testID("ep"), TenantID: e.ep.TenantID, Name: "other", URL: "https://other.example.com/",
			AgentWork: true, SigningSecret: []byte("sealed"), CreatedAt: now, UpdatedAt: now}
		e.write(func(tx agentowl.Tx) error { return tx.EndpointCreate(e.ctx, other) })
		otherCred := e.credential(other, now.Add(time.Hour), ScopeCallbacks)
		body := cb{seq: 1, status: agentowl.WorkRunning}.body(w.ID)
		_, err := e.svc.RecordCallback(e.ctx, otherCred, w.ID, body)
		checkCode(t, "another endpoint's credential", err, agentowl.ECodeNotFound, "")
		missing := testID("work")
		_, err = e.svc.RecordCallback(e.ctx, e.cred, missing, cb{seq: 1, status: agentowl.WorkRunning}.body(missing))
		checkCode(t, "unknown work", err, agentowl.ECodeNotFound, "")
		_, err = e.svc.RecordCallback(e.ctx, e.cred, w.ID, cb{seq: 1, status: agentowl.WorkPending}.body(w.ID))
		checkCode(t, "an invalid body", err, agentowl.ECodeInvalidField, "status")
		if got := e.getWork(w.ID); got.Status != agentowl.WorkPending || got.Callbacks != 0 {
			t.Errorf("refused callbacks changed the work: %+v", got)
		}
	})
}

// TestRecordCallbackLimit pins the callback cap: stale callbacks count,
// and the callback past the cap is refused without being recorded.
func TestRecordCallbackLimit(t *testing.T) {
	t.Parallel()
	forEachStore(t, Config{MaxCallbacksPerWork: 2}, func(t *testing.T, e *cbEnv) {
		w := e.newWork()
		for _, c := range []cb{{seq: 5, status: agentowl.WorkRunning}, {seq: 2, status: agentowl.WorkRunning, want: "stale"}} {
			if r, err := e.svc.RecordCallback(e.ctx, e.cred, w.ID, c.body(w.ID)); err != nil || r.Stale != (c.want == "stale") {
				t.Fatalf("seq %d: %+v, %v", c.seq, r, err)
			}
		}
		_, err := e.svc.RecordCallback(e.ctx, e.cred, w.ID, cb{seq: 9, status: agentowl.WorkCompleted}.body(w.ID))
		checkCode(t, "past the cap", err, agentowl.ECodeCallbackLimit, "")
		// A retry of a recorded callback is still answered.
		if r, err := e.svc.RecordCallback(e.ctx, e.cred, w.ID, cb{seq: 5, status: agentowl.WorkRunning}.body(w.ID)); err != nil || !r.Duplicate {
			t.Errorf("a duplicate at the cap: %+v, %v", r, err)
		}
		if got := e.getWork(w.ID); got.Callbacks != 2 || got.Status != agentowl.WorkRunning {
			t.Errorf("work after the cap: %+v", got)
		}
	})
}

// TestRecordCallbackWrites pins what applied callbacks write: the result
// of completed work, the error of failed work, the requests while
// needs_input, and the runtime session on the work and its conversation
// (a stale callback's session changes neither).
func TestRecordCallbackWrites(t *testing.T) {
	t.Parallel()
	forEachStore(t, Config{}, func(t *testing.T, e *cbEnv) {
		record := func(w *agentowl.Work, c cb) {
			t.Helper()
			if _, err := e.svc.RecordCallback(e.ctx, e.cred, w.ID, c.body(w.ID)); err != nil {
				t.Fatalf("seq %d: %v", c.seq, err)
			}
		}
		session := func() string {
			t.Helper()
			var c *agentowl.Conversation
			if err := e.st.Read(e.ctx, func(tx agentowl.Tx) (err error) { c, err = tx.ConversationGet(e.ctx, e.conv.ID); return err }); err != nil {
				t.Fatal(err)
			}
			return c.RuntimeSessionID
		}
		w := e.newWork()
		record(w, cb{seq: 2, status: agentowl.WorkRunning, extra: `,"runtime_session_id":"s-1"`})
		if got := e.getWork(w.ID); got.RuntimeSessionID != "s-1" || session() != "s-1" {
			t.Fatalf("session: work %q, conversation %q", got.RuntimeSessionID, session())
		}
		record(w, cb{seq: 1, status: agentowl.WorkRunning, extra: `,"runtime_session_id":"s-old"`})
		if got := e.getWork(w.ID); got.RuntimeSessionID != "s-1" || session() != "s-1" {
			t.Errorf("a stale callback moved the session: work %q, conversation %q", got.RuntimeSessionID, session())
		}
		record(w, cb{seq: 3, status: agentowl.WorkNeedsInput, extra: `,"requests":[` + question + `]`})
		if got := e.getWork(w.ID); len(got.Requests) == 0 {
			t.Errorf("needs_input kept no requests")
		}
		record(w, cb{seq: 4, status: agentowl.WorkCompleted, extra: `,"result":{"summary":"done","url":"https://r.example/1"}`})
		got := e.getWork(w.ID)
		if got.Requests != nil || got.ResultSummary != "done" || got.ResultURL != "https://r.example/1" || got.EndedAt == nil {
			t.Errorf("completed work: %+v", got)
		}

		f := e.newWork()
		record(f, cb{seq: 1, status: agentowl.WorkFailed, extra: `,"error":{"code":"boom","message":"it broke"}`})
		if got := e.getWork(f.ID); string(got.Error) != `{"code":"boom","message":"it broke"}` || got.EndedAt == nil ||
			!got.EndedAt.Equal(e.clock.Now()) {
			t.Errorf("failed work: error %s, ended %v", got.Error, got.EndedAt)
		}
	})
}

// TestRecordCallbackAttention pins what applied callbacks do to the inbox:
// a needs_input request opens an item per revision, a higher revision
// supersedes the lower, the work's end resolves what is left undecided,
// and a failure opens an incident. Every status change of an item is one
// agentowl.AttentionStatus.CanBecome allows.
func TestRecordCallbackAttention(t *testing.T) {
	t.Parallel()
	forEachStore(t, Config{}, func(t *testing.T, e *cbEnv) {
		w := e.newWork()
		seen := map[string]agentowl.AttentionStatus{}
		step := func(c cb) map[string]*agentowl.AttentionItem {
			t.Helper()
			if _, err := e.svc.RecordCallback(e.ctx, e.cred, w.ID, c.body(w.ID)); err != nil {
				t.Fatalf("seq %d: %v", c.seq, err)
			}
			byRev := map[string]*agentowl.AttentionItem{}
			for _, it := range e.items(w.ID) {
				if prev, ok := seen[it.ID]; ok && prev != it.Status && !prev.CanBecome(it.Status) {
					t.Errorf("item %s: %q -> %q, which the record's rule does not allow", it.ID, prev, it.Status)
				}
				seen[it.ID] = it.Status
				key := it.Kind
				if it.RequestID != "" {
					key = fmt.Sprintf("%s@%d", it.RequestID, it.Revision)
				}
				byRev[key] = it
			}
			return byRev
		}
		rev := func(n int) string {
			return `,"requests":[` + strings.Replace(question, `"revision":1`, fmt.Sprintf(`"revision":%d`, n), 1) + `]`
		}
		items := step(cb{seq: 1, status: agentowl.WorkNeedsInput, extra: rev(1)})
		if it := items["q1@1"]; it == nil || it.Status != agentowl.AttentionOpen || it.Kind != KindQuestion {
			t.Fatalf("after needs_input: %v", items)
		}
		items = step(cb{seq: 2, status: agentowl.WorkNeedsInput, extra: rev(2)})
		if it := items["q1@1"]; it.Status != agentowl.AttentionResolved || it.Resolution != ResolvedSuperseded {
			t.Errorf("revision 1 after revision 2: %s %s", it.Status, it.Resolution)
		}
		if it := items["q1@2"]; it == nil || it.Status != agentowl.AttentionOpen {
			t.Fatalf("revision 2: %v", it)
		}
		// The same revision again, with other content, is a conflict.
		_, err := e.svc.RecordCallback(e.ctx, e.cred, w.ID, cb{seq: 3, status: agentowl.WorkNeedsInput,
			extra: strings.Replace(rev(2), "Which account?", "Which bank?", 1)}.body(w.ID))
		checkCode(t, "revision 2 changed", err, agentowl.ECodeRequestConflict, "requests")
		_, err = e.svc.RecordCallback(e.ctx, e.cred, w.ID, cb{seq: 3, status: agentowl.WorkNeedsInput, extra: rev(1)}.body(w.ID))
		checkCode(t, "revision 1 again", err, agentowl.ECodeRequestConflict, "requests")
		items = step(cb{seq: 4, status: agentowl.WorkFailed})
		if it := items["q1@2"]; it.Status != agentowl.AttentionResolved || it.Resolution != ResolvedWorkEnded {
			t.Errorf("revision 2 after the work failed: %s %s", it.Status, it.Resolution)
		}
		if it := items[KindIncident]; it == nil || it.Status != agentowl.AttentionOpen ||
			!strings.HasPrefix(it.Summary, "The runtime reported the work failed") {
			t.Errorf("incident: %+v", it)
		}
		if n := len(seen); n != 3 {
			t.Errorf("%d items, want 3 (two revisions and an incident)", n)
		}
	})
}

// TestAuthenticateRuntime pins which tokens authenticate a runtime: a live
// runtime credential (agentowl.RuntimeCredential.Active) of a live
// endpoint, nothing else; and AllowCallback's scope and rate checks.
func TestAuthenticateRuntime(t *testing.T) {
	t.Parallel()
	forEachStore(t, Config{CallbackLimit: ratelimit.Limit{Events: 2, Per: time.Minute}}, func(t *testing.T, e *cbEnv) {
		now := e.clock.Now()
		stored := func(ep *agentowl.Endpoint, expires time.Time, revoked bool, scopes ...string) (string, *agentowl.RuntimeCredential) {
			secret := agentowl.NewTokenSecret(agentowl.TokenRuntime)
			c := &agentowl.RuntimeCredential{ID: testID("rtc"), TenantID: ep.TenantID, EndpointID: ep.ID, Hash: agentowl.HashToken(secret),
				Scopes: scopes, CreatedAt: now.Add(-time.Hour), ExpiresAt: expires}
			if revoked {
				c.RevokedAt = &now
			}
			e.write(func(tx agentowl.Tx) error { return tx.RuntimeCredentialCreate(e.ctx, c) })
			return secret, c
		}
		live, liveCred := stored(e.ep, now.Add(time.Hour), false, ScopeCallbacks)
		atExpiry, _ := stored(e.ep, now, false, ScopeCallbacks)
		revoked, _ := stored(e.ep, now.Add(time.Hour), true, ScopeCallbacks)
		gone := &agentowl.Endpoint{ID: testID("ep"), TenantID: e.ep.TenantID, Name: "gone", URL: "https://gone.example.com/",
			AgentWork: true, SigningSecret: []byte("sealed"), CreatedAt: now, UpdatedAt: now, DeletedAt: &now}
		e.write(func(tx agentowl.Tx) error { return tx.EndpointCreate(e.ctx, gone) })
		ofDeleted, _ := stored(gone, now.Add(time.Hour), false, ScopeCallbacks)
		noScope, noScopeCred := stored(e.ep, now.Add(time.Hour), false, ScopeDecisions)
		for _, c := range []struct {
			name, secret string
			ok           bool
		}{
			{"live", live, true},
			{"live without the callbacks scope", noScope, true},
			{"at its expiry instant", atExpiry, false},
			{"revoked", revoked, false},
			{"of a deleted endpoint", ofDeleted, false},
			{"another kind of token", agentowl.NewTokenSecret(agentowl.TokenOperator), false},
			{"unknown", agentowl.NewTokenSecret(agentowl.TokenRuntime), false},
			{"empty", "", false},
			{"too long", live + strings.Repeat("x", 256), false},
		} {
			got, err := e.svc.AuthenticateRuntime(e.ctx, c.secret)
			if c.ok {
				if err != nil || got == nil {
					t.Errorf("%s: %v", c.name, err)
				}
				continue
			}
			checkCode(t, c.name, err, agentowl.ECodeUnauthenticated, "")
		}
		// An hour later the live credential has expired too.
		e.clock.Advance(time.Hour)
		_, err := e.svc.AuthenticateRuntime(e.ctx, live)
		checkCode(t, "live, an hour later", err, agentowl.ECodeUnauthenticated, "")

		checkCode(t, "without the scope", e.svc.AllowCallback(e.ctx, noScopeCred), agentowl.ECodeInsufficientScope, "")
		for i := range 2 {
			if err := e.svc.AllowCallback(e.ctx, liveCred); err != nil {
				t.Fatalf("callback %d under the limit: %v", i, err)
			}
		}
		checkCode(t, "over the endpoint's rate", e.svc.AllowCallback(e.ctx, liveCred), agentowl.ECodeRateLimited, "")
	})
}
