package maintenance_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/access"
	"github.com/agentowl/agentowl/internal/clocktest"
	"github.com/agentowl/agentowl/internal/ingress"
	"github.com/agentowl/agentowl/internal/maintenance"
	"github.com/agentowl/agentowl/internal/server"
	"github.com/agentowl/agentowl/internal/server/servertest"
	"github.com/agentowl/agentowl/internal/store/storetest"
	"github.com/agentowl/agentowl/internal/work"
)

// start is the clock's start in every test.
var start = time.Date(2026, 9, 16, 12, 0, 0, 0, time.UTC)

// fixture is a server on a real store and a fake clock, with no delivery
// engine and no running scheduler: tests run the jobs by hand (RunJob) and
// play the delivery engine's part where they need a delivered handoff.
type fixture struct {
	t     testing.TB
	ctx   context.Context
	srv   *server.Server
	st    agentowl.Store
	clock *clocktest.Fake
	sched *maintenance.Scheduler
	admin *access.Principal
	n     int
}

func setup(t testing.TB, b storetest.Backend, cfg maintenance.Config, adjust ...func(*server.Config)) *fixture {
	t.Helper()
	sc := servertest.Config(t, b)
	clock := clocktest.New(start)
	sc.Clock, sc.NoDelivery = clock, true
	sc.Egress.AllowCIDRs = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	cfg.Disabled = true
	sc.Maintenance = cfg
	for _, fn := range adjust {
		fn(&sc)
	}
	srv := servertest.Start(t, sc)
	ctx := context.Background()
	p, err := srv.Access().Authenticate(ctx, srv.BootstrapToken(), agentowl.TokenOperator)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, ctx: ctx, srv: srv, st: srv.Store(), clock: clock, sched: srv.Scheduler(), admin: p}
}

// forEachBackend runs fn as a parallel subtest per store backend.
func forEachBackend(t *testing.T, cfg maintenance.Config, fn func(t *testing.T, f *fixture)) {
	for _, b := range storetest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			fn(t, setup(t, b, cfg))
		})
	}
}

// endpoint is an agent-work endpoint, its runtime credential and a binding
// routing to it.
type endpoint struct {
	id      string
	cred    *agentowl.RuntimeCredential
	binding *agentowl.Binding
}

func (f *fixture) endpoint(overdue *agentowl.EndpointOverdue) *endpoint {
	f.t.Helper()
	f.n++
	name, url, on := fmt.Sprintf("ep-%d", f.n), "https://127.0.0.1:9/hook", true
	ep, err := f.srv.Work().CreateEndpoint(f.ctx, f.admin, "default", work.EndpointInput{Name: &name, URL: &url, AgentWork: &on, Overdue: overdue})
	if err != nil {
		f.t.Fatal(err)
	}
	cred, err := f.srv.Work().CreateCredential(f.ctx, f.admin, "default", ep.Endpoint.ID, "", nil,
		[]string{work.ScopeCallbacks, work.ScopeDecisions})
	if err != nil {
		f.t.Fatal(err)
	}
	b, err := f.srv.Ingress().CreateBinding(f.ctx, f.admin, "default", ingress.BindingInput{Channel: ingress.ChannelWebhook, EndpointID: ep.Endpoint.ID})
	if err != nil {
		f.t.Fatal(err)
	}
	return &endpoint{id: ep.Endpoint.ID, cred: cred.Credential, binding: b.Binding}
}

// handOff receives one event at ep's binding and returns its work.
func (f *fixture) handOff(ep *endpoint) string {
	f.t.Helper()
	acc, err := f.srv.Ingress().AcceptWebhook(f.ctx, ep.binding, http.Header{}, []byte(`{"text":"hello"}`))
	if err != nil {
		f.t.Fatal(err)
	}
	if acc.WorkID == "" {
		f.t.Fatalf("the event made no work")
	}
	return acc.WorkID
}

// deliverAll plays the delivery engine: every due message is delivered now.
func (f *fixture) deliverAll() {
	f.t.Helper()
	now := f.clock.Now()
	var msgs []*agentowl.OutboxMessage
	f.write(func(tx agentowl.Tx) (err error) {
		msgs, err = tx.MessageClaim(f.ctx, agentowl.ClaimParams{Now: now, LeaseUntil: now.Add(time.Minute), Owner: "test", Limit: 1000})
		return err
	})
	for _, m := range msgs {
		retain := now.Add(agentowl.RetentionAfterDecision)
		f.write(func(tx agentowl.Tx) error {
			return tx.MessageFinish(f.ctx, agentowl.FinishParams{ID: m.ID, Owner: "test", State: agentowl.MessageDelivered, NextAttempt: now,
				RetainUntil: &retain, Attempt: agentowl.Attempt{EventID: m.ID, N: m.Attempts, URL: "https://127.0.0.1:9/hook",
					StartedAt: now, EndedAt: now, StatusCode: 200}})
		})
	}
}

// callback posts a runtime callback of sequence seq with status and the
// extra fields given.
func (f *fixture) callback(ep *endpoint, workID string, seq int, status string, extra map[string]any) *work.Receipt {
	f.t.Helper()
	body := map[string]any{"version": "agent-work.v1", "callback_id": fmt.Sprintf("%s:%d", workID, seq), "work_id": workID,
		"sequence": seq, "status": status, "occurred_at": f.clock.Now().Format(time.RFC3339)}
	for k, v := range extra {
		body[k] = v
	}
	data, err := json.Marshal(body)
	if err != nil {
		f.t.Fatal(err)
	}
	r, err := f.srv.Work().RecordCallback(f.ctx, ep.cred, workID, data)
	if err != nil {
		f.t.Fatalf("callback %d %s: %v", seq, status, err)
	}
	return r
}

// run runs a job now and returns its record, failing on an error outcome.
func (f *fixture) run(job string) *agentowl.JobRun {
	f.t.Helper()
	r, err := f.sched.RunJob(f.ctx, job)
	if err != nil {
		f.t.Fatal(err)
	}
	if r.Outcome == "error" {
		f.t.Fatalf("job %s failed: %s", job, r.Error)
	}
	return r
}

func (f *fixture) write(fn func(tx agentowl.Tx) error) {
	f.t.Helper()
	if err := f.st.Write(f.ctx, fn); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) work(id string) *agentowl.Work {
	f.t.Helper()
	var w *agentowl.Work
	if err := f.st.Read(f.ctx, func(tx agentowl.Tx) (err error) {
		w, err = tx.WorkGet(f.ctx, id)
		return err
	}); err != nil {
		f.t.Fatal(err)
	}
	return w
}

// overdue returns the overdue incidents of a work, oldest first.
func (f *fixture) overdue(workID string) []*agentowl.AttentionItem {
	f.t.Helper()
	var items []*agentowl.AttentionItem
	if err := f.st.Read(f.ctx, func(tx agentowl.Tx) (err error) {
		items, err = tx.AttentionList(f.ctx, agentowl.AttentionListParams{TenantID: f.admin.Membership.TenantID, WorkID: workID, Limit: 100})
		return err
	}); err != nil {
		f.t.Fatal(err)
	}
	var out []*agentowl.AttentionItem
	for i := len(items) - 1; i >= 0; i-- {
		if items[i].OverdueRule != "" {
			out = append(out, items[i])
		}
	}
	return out
}
