package doctor_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/access"
	"github.com/agentowl/agentowl/internal/clocktest"
	"github.com/agentowl/agentowl/internal/doctor"
	"github.com/agentowl/agentowl/internal/ratelimit"
	"github.com/agentowl/agentowl/internal/store/storetest"
	"github.com/agentowl/agentowl/internal/work"
)

// fakeScheduler and fakeOverdue stand in for internal/maintenance, which
// the assembly wires in: a hand-written fake at the package's edge.
type fakeScheduler struct {
	mu             sync.Mutex
	clock          *clocktest.Fake
	leader         string
	until          time.Time // zero: a lease renewed just now, for 30s
	stalls, silent []string  // the delivery engines' findings
}

func (f *fakeScheduler) EngineFindings(context.Context) ([]string, []string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stalls, f.silent, nil
}

func (f *fakeScheduler) setEngines(stalls, silent []string) {
	f.mu.Lock()
	f.stalls, f.silent = stalls, silent
	f.mu.Unlock()
}

func (f *fakeScheduler) Leader(context.Context) (string, time.Time, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	until := f.until
	if until.IsZero() {
		until = f.clock.Now().Add(30 * time.Second)
	}
	return f.leader, until, f.leader != "", nil
}

func (f *fakeScheduler) set(leader string, until time.Time) {
	f.mu.Lock()
	f.leader, f.until = leader, until
	f.mu.Unlock()
}

type fakeOverdue struct {
	mu sync.Mutex
	n  map[string]int
}

func (f *fakeOverdue) OverdueCount(_ context.Context, tenantID string) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n[tenantID], nil
}

func (f *fakeOverdue) set(tenantID string, n int) {
	f.mu.Lock()
	f.n[tenantID] = n
	f.mu.Unlock()
}

// env is one test's tenant on a real store, with a doctor whose scheduler
// and overdue counts the test sets.
type env struct {
	t        *testing.T
	ctx      context.Context
	st       agentowl.Store
	clock    *clocktest.Fake
	admin    *access.Principal
	tenantID string
	doctor   *doctor.Service
	sched    *fakeScheduler
	overdue  *fakeOverdue
	rate     *ratelimit.Limiter
}

const (
	callbackCap = 100
	retainedCap = 1000 // bytes of retained attachments
)

func setup(t *testing.T, b storetest.Backend) *env {
	t.Helper()
	ctx := context.Background()
	st := b.Open(t)
	clock := clocktest.New(time.Date(2026, 10, 6, 12, 0, 0, 0, time.UTC))
	e := &env{t: t, ctx: ctx, st: st, clock: clock,
		sched: &fakeScheduler{clock: clock, leader: "replica-1"}, overdue: &fakeOverdue{n: map[string]int{}},
		rate: ratelimit.New("runtime-callbacks", ratelimit.Limit{Events: 10, Per: time.Minute}, st, clock)}
	e.tenantID, e.admin = e.tenant("acme")
	e.doctor = doctor.New(st, clock, doctor.Config{Scheduler: e.sched, Overdue: e.overdue, Engines: e.sched, CallbackRate: e.rate,
		MaxCallbacksPerWork: callbackCap, RetainedBytesLimit: retainedCap})
	return e
}

// tenant creates tenant name and returns its ID and its first admin.
func (e *env) tenant(name string) (string, *access.Principal) {
	e.t.Helper()
	acc := access.New(e.st, e.clock, access.Config{})
	res, err := acc.Bootstrap(e.ctx, name)
	if err != nil {
		e.t.Fatal(err)
	}
	admin, err := acc.Authenticate(e.ctx, res.Token, agentowl.TokenOperator)
	if err != nil {
		e.t.Fatal(err)
	}
	return res.Tenant.ID, admin
}

func (e *env) write(fn func(tx agentowl.Tx) error) {
	e.t.Helper()
	if err := e.st.Write(e.ctx, fn); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) report() *doctor.Report {
	e.t.Helper()
	r, err := e.doctor.Check(e.ctx, e.admin, "acme")
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

// expect fails unless the report holds exactly the findings named as
// "check severity subject", and has status.
func (e *env) expect(what, status string, want ...string) *doctor.Report {
	e.t.Helper()
	r := e.report()
	var got []string
	for _, f := range r.Findings {
		got = append(got, fmt.Sprintf("%s %s %s", f.Check, f.Severity, f.Subject))
		if f.Message == "" || f.Command == "" {
			e.t.Errorf("%s: finding without message or command: %+v", what, f)
		}
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") || r.Status() != status {
		e.t.Fatalf("%s: status %s, findings:\n%s\nwant status %s, findings:\n%s", what, r.Status(), strings.Join(got, "\n"), status,
			strings.Join(want, "\n"))
	}
	return r
}

func id(prefix string) string {
	return prefix + "_" + strings.ReplaceAll(agentowl.NewID(""), "-", "")[:20]
}

func (e *env) endpoint(agentWork bool) *agentowl.Endpoint {
	ep := &agentowl.Endpoint{ID: id("ep"), TenantID: e.tenantID, Name: id("name"), URL: "https://runtime.example/hook",
		AgentWork: agentWork, SigningSecret: []byte("sealed"), CreatedAt: e.clock.Now(), UpdatedAt: e.clock.Now()}
	e.write(func(tx agentowl.Tx) error { return tx.EndpointCreate(e.ctx, ep) })
	return ep
}

func (e *env) credential(ep *agentowl.Endpoint, days int, scopes ...string) *agentowl.RuntimeCredential {
	c := &agentowl.RuntimeCredential{ID: id("rtc"), TenantID: e.tenantID, EndpointID: ep.ID, Hash: []byte(agentowl.NewID("")),
		Scopes: scopes, CreatedAt: e.clock.Now(), ExpiresAt: e.clock.Now().Add(time.Duration(days) * 24 * time.Hour)}
	e.write(func(tx agentowl.Tx) error { return tx.RuntimeCredentialCreate(e.ctx, c) })
	return c
}

func (e *env) binding(ep *agentowl.Endpoint) *agentowl.Binding {
	b := &agentowl.Binding{ID: id("bnd"), TenantID: e.tenantID, Channel: "webhook", EndpointID: ep.ID, TokenHash: []byte(agentowl.NewID("")),
		CreatedAt: e.clock.Now()}
	e.write(func(tx agentowl.Tx) error { return tx.BindingCreate(e.ctx, b) })
	return b
}

// work persists an event of b and its work.
func (e *env) work(b *agentowl.Binding) *agentowl.Work {
	now := e.clock.Now()
	c := &agentowl.Conversation{ID: id("conv"), TenantID: e.tenantID, BindingID: b.ID, Status: "open", CreatedAt: now, LastEventAt: now}
	ev := &agentowl.Event{ID: id("evt"), TenantID: e.tenantID, BindingID: b.ID, ConversationID: c.ID, Channel: "webhook", ReceivedAt: now,
		Payload: []byte(`{}`), Attachments: []byte(`[]`)}
	w := &agentowl.Work{ID: id("work"), TenantID: e.tenantID, EndpointID: b.EndpointID, ConversationID: c.ID, EventID: ev.ID, Generation: 1,
		DeliveryID: agentowl.NewID(""), Status: agentowl.WorkPending, CreatedAt: now, UpdatedAt: now}
	e.write(func(tx agentowl.Tx) error {
		if err := tx.ConversationCreate(e.ctx, c); err != nil {
			return err
		}
		if err := tx.EventCreate(e.ctx, ev); err != nil {
			return err
		}
		return tx.WorkCreate(e.ctx, w)
	})
	return w
}

func (e *env) handoff(w *agentowl.Work) *agentowl.OutboxMessage {
	now := e.clock.Now()
	m := &agentowl.OutboxMessage{ID: agentowl.NewID(""), TenantID: e.tenantID, Kind: work.MessageKindHandoff, Destination: work.Destination(w.EndpointID),
		Subject: w.ID, Body: []byte(`{}`), CreatedAt: now, DeadlineAt: now.Add(72 * time.Hour), State: agentowl.MessagePending, NextAttempt: now}
	e.write(func(tx agentowl.Tx) error { return tx.MessageCreate(e.ctx, m) })
	return m
}

// attempt claims message m and records one attempt answered with status;
// a failure is retried in a minute unless end, when the message fails.
func (e *env) attempt(m *agentowl.OutboxMessage, status int, end bool) {
	e.t.Helper()
	now := e.clock.Now()
	var n int
	e.write(func(tx agentowl.Tx) error {
		ms, err := tx.MessageClaim(e.ctx, agentowl.ClaimParams{Now: now, LeaseUntil: now.Add(time.Minute), Owner: "engine", Limit: 100})
		for _, c := range ms {
			if c.ID == m.ID {
				n = c.Attempts
			}
		}
		return err
	})
	if n == 0 {
		e.t.Fatalf("message %s was not due", m.ID)
	}
	p := agentowl.FinishParams{ID: m.ID, Owner: "engine", Attempt: agentowl.Attempt{EventID: m.ID, N: n, URL: "https://runtime.example/hook",
		StartedAt: now, EndedAt: now, StatusCode: status}, State: agentowl.MessageDelivered}
	if status >= 300 {
		p.Attempt.Error, p.State, p.NextAttempt = fmt.Sprintf("HTTP %d", status), agentowl.MessagePending, now.Add(time.Minute)
		if end {
			p.State, p.NextAttempt = agentowl.MessageFailed, now
		}
	}
	if p.State != agentowl.MessagePending {
		p.RetainUntil = ptr(now.Add(7 * 24 * time.Hour))
	}
	e.write(func(tx agentowl.Tx) error { return tx.MessageFinish(e.ctx, p) })
}

func ptr[T any](v T) *T { return &v }

// healthy makes an agent-work endpoint with a credential for 30 days and a
// binding, and a first work delivered.
func (e *env) healthy() (*agentowl.Endpoint, *agentowl.Binding, *agentowl.Work) {
	ep := e.endpoint(true)
	e.credential(ep, 30, work.ScopeCallbacks, work.ScopeDecisions)
	b := e.binding(ep)
	w := e.work(b)
	e.attempt(e.handoff(w), 204, false)
	return ep, b, w
}

func forEachBackend(t *testing.T, fn func(t *testing.T, e *env)) {
	for _, b := range storetest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			fn(t, setup(t, b))
		})
	}
}

func TestCleanTenant(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *env) {
		e.healthy()
		r := e.expect("a healthy tenant", "ok")
		if r.Tenant != "acme" || !r.CheckedAt.Equal(e.clock.Now()) {
			t.Errorf("report of %q at %v", r.Tenant, r.CheckedAt)
		}
	})
}

func TestCredentialFindings(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *env) {
		ep, _, _ := e.healthy()
		subject := "endpoint:" + ep.ID
		// 25 days on, the only credential expires within 7 days.
		e.clock.Advance(25 * 24 * time.Hour)
		r := e.expect("credential expiring", "warning", "runtime_credentials warning "+subject)
		if f := r.Findings[0]; !strings.Contains(f.Command, "agentowl runtime-credentials create "+ep.ID) {
			t.Errorf("command %q", f.Command)
		}
		fresh := e.credential(ep, 90, work.ScopeCallbacks)
		e.expect("a new credential installed", "ok")
		// A credential without callbacks:write does not count.
		e.write(func(tx agentowl.Tx) error { return tx.RuntimeCredentialRevoke(e.ctx, fresh.ID, e.clock.Now()) })
		e.credential(ep, 90, work.ScopeDecisions)
		e.clock.Advance(6 * 24 * time.Hour) // the first credential has expired too
		e.expect("no credential may post callbacks", "error", "runtime_credentials error "+subject)
		e.credential(ep, 30, work.ScopeCallbacks)
		e.expect("a callback credential again", "ok")
	})
}

func TestDeliveryFindings(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *env) {
		ep, b, _ := e.healthy()
		subject := "endpoint:" + ep.ID
		w := e.work(b)
		m := e.handoff(w)
		e.attempt(m, 503, false)
		e.expect("a handoff being retried", "warning", "failing_deliveries warning "+subject)
		e.clock.Advance(time.Minute)
		e.attempt(m, 204, false)
		e.expect("the retry delivered", "ok")

		// A failed handoff is an error until redriven and delivered.
		m = e.handoff(e.work(b))
		e.attempt(m, 500, true)
		r := e.expect("a failed handoff", "error", "failing_deliveries error "+subject)
		if f := r.Findings[0]; f.Command != "agentowl work-outbox list --endpoint "+ep.ID+" --state failed" {
			t.Errorf("command %q", f.Command)
		}
		e.write(func(tx agentowl.Tx) error {
			_, err := tx.MessageRedrive(e.ctx, agentowl.RedriveParams{ID: m.ID, From: []agentowl.MessageState{agentowl.MessageFailed},
				Now: e.clock.Now(), DeadlineAt: e.clock.Now().Add(time.Hour)})
			return err
		})
		e.expect("redriven, not attempted yet", "ok")
		e.attempt(m, 204, false)
		e.expect("the redriven handoff delivered", "ok")

		// ... or until its incident is resolved after review.
		m = e.handoff(e.work(b))
		e.attempt(m, 500, true)
		it := &agentowl.AttentionItem{ID: id("att"), TenantID: e.tenantID, Kind: "incident", Status: agentowl.AttentionOpen, WorkID: m.Subject,
			EndpointID: ep.ID, Summary: "failed", MessageID: m.ID, CreatedAt: e.clock.Now(), UpdatedAt: e.clock.Now()}
		e.write(func(tx agentowl.Tx) error { return tx.AttentionCreate(e.ctx, it) })
		e.expect("a failed handoff with an open incident", "error", "failing_deliveries error "+subject)
		it.Status, it.Resolution, it.ResolvedAt = agentowl.AttentionResolved, "reviewed", ptr(e.clock.Now())
		e.write(func(tx agentowl.Tx) error { return tx.AttentionUpdate(e.ctx, it) })
		e.expect("its incident reviewed", "ok")

		// A publication to a plain endpoint points at ingress-publications.
		plain := e.endpoint(false)
		pb := e.binding(plain)
		ev := e.work(pb) // the event; its work is not used
		pm := &agentowl.OutboxMessage{ID: agentowl.NewID(""), TenantID: e.tenantID, Kind: work.MessageKindEvent, Destination: work.Destination(plain.ID),
			Subject: ev.EventID, Body: []byte(`{}`), CreatedAt: e.clock.Now(), DeadlineAt: e.clock.Now().Add(time.Hour),
			State: agentowl.MessagePending, NextAttempt: e.clock.Now()}
		e.write(func(tx agentowl.Tx) error { return tx.MessageCreate(e.ctx, pm) })
		e.attempt(pm, 500, true)
		r = e.expect("a failed publication", "error", "failing_deliveries error endpoint:"+plain.ID,
			"bindings_without_agent_work info binding:"+pb.ID)
		if f := r.Findings[0]; !strings.HasPrefix(f.Command, "agentowl ingress-publications list --endpoint "+plain.ID) {
			t.Errorf("command %q", f.Command)
		}
	})
}

func TestStuckOutbox(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *env) {
		_, b, _ := e.healthy()
		m := e.handoff(e.work(b))
		e.clock.Advance(4 * time.Minute)
		e.expect("due for four minutes", "ok")
		e.clock.Advance(2 * time.Minute)
		r := e.expect("due for six minutes, nobody delivering", "error", "stuck_outbox error tenant")
		if !strings.Contains(r.Findings[0].Message, "AGENTOWL_DELIVERY") {
			t.Errorf("message %q", r.Findings[0].Message)
		}
		e.attempt(m, 204, false)
		e.expect("an engine delivered it", "ok")
	})
}

func TestReceiptFindings(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *env) {
		_, _, w := e.healthy()
		now := e.clock.Now()
		it := &agentowl.AttentionItem{ID: id("att"), TenantID: e.tenantID, Kind: "question", Status: agentowl.AttentionOpen, WorkID: w.ID,
			EndpointID: w.EndpointID, RequestID: "q1", Revision: 1, Prompt: "Which?", AllowedDecisions: []string{"answer"},
			ExpiresAt: ptr(now.Add(time.Hour)), ContentHash: []byte("h"), Request: []byte(`{}`), CreatedAt: now, UpdatedAt: now}
		d := &agentowl.WorkDecision{WorkID: w.ID, ID: "d1", TenantID: e.tenantID, AttentionID: it.ID, RequestID: "q1", Revision: 1,
			Decision: "answer", Answer: "blue", ContentHash: []byte("c"), Body: []byte(`{}`), DecidedBy: "op", DecidedAt: now}
		e.write(func(tx agentowl.Tx) error {
			if err := tx.AttentionCreate(e.ctx, it); err != nil {
				return err
			}
			return tx.WorkDecisionCreate(e.ctx, d)
		})
		e.clock.Advance(9 * time.Minute)
		e.expect("a decision nine minutes old", "ok")
		e.clock.Advance(2 * time.Minute)
		r := e.expect("a decision without receipt", "warning", "pushes_without_receipts warning work:"+w.ID)
		if f := r.Findings[0]; f.Command != "agentowl work inspect "+w.ID || !strings.Contains(f.Message, "/decisions") {
			t.Errorf("finding %+v", f)
		}
		e.write(func(tx agentowl.Tx) error { return tx.DecisionSetReceipt(e.ctx, w.ID, "d1", e.clock.Now(), "recovery") })
		e.expect("the runtime recovered it", "ok")
	})
}

func TestQuotaFindings(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *env) {
		ep, _, w := e.healthy()
		setCallbacks := func(n int, status agentowl.WorkStatus) {
			w.Callbacks, w.Status, w.Sequence = n, status, int64(n)
			if status.Terminal() {
				w.EndedAt = ptr(e.clock.Now())
			}
			e.write(func(tx agentowl.Tx) error { return tx.WorkUpdate(e.ctx, w) })
		}
		setCallbacks(79, agentowl.WorkRunning)
		e.expect("79 of 100 callbacks", "ok")
		setCallbacks(80, agentowl.WorkRunning)
		e.expect("80 of 100 callbacks", "warning", "quota warning work:"+w.ID)
		setCallbacks(100, agentowl.WorkRunning)
		e.expect("the cap reached", "error", "quota error work:"+w.ID)
		setCallbacks(100, agentowl.WorkCompleted)
		e.expect("the work ended", "ok")

		// The callback rate: 8 of 10 in a minute is near the limit.
		for range 7 {
			e.rate.Allow(e.ctx, ep.ID)
		}
		e.expect("7 callbacks in the minute", "ok")
		e.rate.Allow(e.ctx, ep.ID)
		e.expect("8 callbacks in the minute", "warning", "quota warning endpoint:"+ep.ID)
		e.clock.Advance(time.Minute)
		e.expect("the minute after (its count is the last minute's)", "warning", "quota warning endpoint:"+ep.ID)
		e.clock.Advance(time.Minute)
		e.expect("two quiet minutes", "ok")

		// Retained attachment bytes: 80% of the quota warns, the quota is an
		// error (new files are blocked), released bytes clear it.
		retain := func(n int64) {
			e.write(func(tx agentowl.Tx) error {
				if n < 0 {
					return tx.RetainedBytesRelease(e.ctx, e.tenantID, -n)
				}
				ok, err := tx.RetainedBytesReserve(e.ctx, e.tenantID, n, retainedCap)
				if err == nil && !ok {
					err = fmt.Errorf("reserving %d bytes was refused", n)
				}
				return err
			})
		}
		retain(799)
		e.expect("799 of 1000 bytes", "ok")
		retain(1)
		e.expect("800 of 1000 bytes", "warning", "quota warning tenant")
		retain(200)
		e.expect("the quota reached", "error", "quota error tenant")
		retain(-500)
		e.expect("expired files released", "ok")
	})
}

func TestBindingSchedulerAndOverdueFindings(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *env) {
		e.healthy()
		plain := e.endpoint(false)
		b := e.binding(plain)
		e.expect("a binding to a plain endpoint: a note, still ok", "ok", "bindings_without_agent_work info binding:"+b.ID)
		e.write(func(tx agentowl.Tx) error { return tx.BindingDelete(e.ctx, b.ID, e.clock.Now()) })
		e.expect("the binding deleted", "ok")

		e.overdue.set(e.tenantID, 2)
		e.overdue.set("another-tenant", 5)
		e.expect("two overdue work items", "warning", "overdue_work warning tenant")
		e.overdue.set(e.tenantID, 0)
		e.expect("none overdue", "ok")

		e.sched.set("", time.Time{})
		e.expect("no leader", "error", "scheduler_leader error scheduler")
		e.sched.set("replica-2", e.clock.Now())
		e.expect("a leader whose lease lapsed", "error", "scheduler_leader error scheduler")
		e.sched.set("replica-2", e.clock.Now().Add(time.Second))
		e.expect("a leader whose lease holds a second more", "ok")
		e.sched.set("replica-2", time.Time{})
		e.expect("a live leader", "ok")

		e.sched.setEngines(nil, []string{"replica r1 stopped reporting"})
		e.expect("a delivery engine gone silent", "warning", "delivery_engines warning delivery")
		e.sched.setEngines([]string{"replica r2 holds 3 destination slots without an attempt"}, []string{"replica r1 stopped reporting"})
		e.expect("slots held without an attempt", "error", "delivery_engines error delivery", "delivery_engines warning delivery")
		e.sched.setEngines(nil, nil)
		e.expect("healthy engines", "ok")

		// Without a scheduler or overdue detection wired in, the report says
		// it did not check, and stays ok.
		bare := doctor.New(e.st, e.clock, doctor.Config{})
		r, err := bare.Check(e.ctx, e.admin, "acme")
		if err != nil {
			t.Fatal(err)
		}
		if r.Status() != "ok" || len(r.Findings) != 3 {
			t.Errorf("report without scheduler, overdue detection or engine reports: %+v", r.Findings)
		}
		for _, f := range r.Findings {
			if f.Severity != doctor.Note || !strings.Contains(f.Message, "not checked") {
				t.Errorf("finding without its source: %+v, want a note that it was not checked", f)
			}
		}
	})
}

// Only the tenant's admins may run it; another tenant is not found.
func TestAccess(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *env) {
		otherID, p := e.tenant("other")
		if _, err := e.doctor.Check(e.ctx, p, "acme"); agentowl.ErrorCode(err) != agentowl.ECodeNotFound {
			t.Errorf("another tenant's admin: %v, want not_found", err)
		}
		member := &access.Principal{Operator: e.admin.Operator, Membership: &agentowl.Membership{TenantID: e.tenantID, TenantName: "acme",
			Role: agentowl.RoleMember}}
		if _, err := e.doctor.Check(e.ctx, member, "acme"); agentowl.ErrorCode(err) != agentowl.ECodeForbidden {
			t.Errorf("a member: %v, want forbidden", err)
		}
		// The other tenant's failing deliveries do not show in acme's report.
		e.healthy()
		otherEP := &agentowl.Endpoint{ID: id("ep"), TenantID: otherID, Name: "x", URL: "https://x.example/", AgentWork: true,
			SigningSecret: []byte("s"), CreatedAt: e.clock.Now(), UpdatedAt: e.clock.Now()}
		e.write(func(tx agentowl.Tx) error { return tx.EndpointCreate(e.ctx, otherEP) })
		e.expect("acme, beside a tenant with an endpoint without credentials", "ok")
		r, err := e.doctor.Check(e.ctx, p, "other")
		if err != nil || r.Status() != "error" {
			t.Errorf("other's report: %+v, %v", r, err)
		}
	})
}
