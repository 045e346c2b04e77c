package httpapi_test

import (
	"context"
	"database/sql"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/admission"
	"github.com/agentowl/agentowl/internal/server"
	"github.com/agentowl/agentowl/internal/server/servertest"
	"github.com/agentowl/agentowl/internal/store/storetest"
)

// overloadEnv is a server whose admission queues run one write at a time,
// with a way to hold every write of a table in the database while the test
// sends more.
type overloadEnv struct {
	*env
	h *opHarness
	// hold blocks the writes of table until the returned function runs.
	hold func(table string) (release func())
}

func startOverload(t *testing.T, b storetest.Backend) *overloadEnv {
	t.Helper()
	sc := servertest.Config(t, b)
	overloadConfig(&sc)
	return newOverloadEnv(t, start(t, sc), sc)
}

// overloadConfig sets up sc for the overload tests: no delivery engine
// (its timers on the fake clock would blur the test's), queues that run
// one write at a time with the default wait (250ms on the fake clock), and
// an SQLite busy timeout longer than any hold (a held write waits on the
// busy handler for as long as the test holds the lock; it must not give
// up first).
func overloadConfig(sc *server.Config) {
	sc.NoDelivery = true
	sc.HTTP.Admission = admission.Config{Concurrency: 1}
	sc.SQLiteBusyTimeout = time.Hour
}

// startWorkOverload is startOverload with agent work (endpoints, bindings,
// runtime callbacks).
func startWorkOverload(t *testing.T, b storetest.Backend) (*overloadEnv, *workEnv) {
	t.Helper()
	var sc server.Config
	we := setupWorkServer(t, b, func(c *server.Config) {
		overloadConfig(c)
		sc = *c
	})
	return newOverloadEnv(t, we.env, sc), we
}

func newOverloadEnv(t *testing.T, e *env, sc server.Config) *overloadEnv {
	t.Helper()
	o := &overloadEnv{env: e, h: newOpHarness(t, e)}
	ctx := context.Background()
	if sc.DatabaseURL == "" {
		o.hold = func(string) func() { return holdSQLite(t, ctx, sc) }
	} else {
		o.hold = func(table string) func() { return holdPostgres(t, ctx, sc, table) }
	}
	return o
}

// holdSQLite takes the database's write lock from another connection.
func holdSQLite(t *testing.T, ctx context.Context, sc server.Config) func() {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(sc.DataDir, "agentowl.db"))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	return func() {
		if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
			t.Error(err)
		}
		_ = conn.Close()
		_ = db.Close()
	}
}

// holdPostgres locks table against writes (reads go on) in a transaction
// of another connection.
func holdPostgres(t *testing.T, ctx context.Context, sc server.Config, table string) func() {
	t.Helper()
	u, err := url.Parse(sc.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("pgx", storetest.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, "LOCK TABLE "+u.Query().Get("search_path")+"."+table+" IN EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	return func() {
		if err := tx.Rollback(); err != nil {
			t.Error(err)
		}
		_ = db.Close()
	}
}

// overload sends two writes of one surface at once while the store holds
// writes (hold), with the surface's queue taking one write at a time: one
// runs and waits in the store, the other waits for its turn. When the
// queue's maximum wait passes (the fake clock advances by it), the waiting
// write is refused with 503 overloaded and Retry-After, counted in
// /metrics; once the store takes writes again the running one succeeds, and
// the refused one, sent again as it was, succeeds too: nothing accepted is
// lost and nothing refused was half-written. send(i) sends write i (0 or 1)
// and may be called again for the retry; it must be idempotent.
func (o *overloadEnv) overload(t *testing.T, surface string, hold func() func(), send func(i int) *response, ok int) {
	t.Helper()
	base := settledWaiters(o.clock)
	release := sync.OnceFunc(hold())
	defer release() // a failed check must not leave the store held
	answers := [2]chan *response{make(chan *response, 1), make(chan *response, 1)}
	for i := range answers {
		go func() { answers[i] <- send(i) }()
	}
	// One write holds the queue's only turn (its store write waits on the
	// held lock); the other parks on the clock for its maximum wait.
	eventually(t, syncLimit, "a write to wait for its turn", func() bool { return o.clock.Waiters() > base })
	wait := admission.MaxWait(admission.Config{}, surface)
	if surface == admission.Providers {
		// A provider's webhook waits longer: once the default wait has
		// passed, its timer has not fired and it still waits for its turn.
		waiting := o.clock.Waiters()
		o.clock.Advance(admission.DefaultMaxWait)
		if got := o.clock.Waiters(); got != waiting {
			t.Fatalf("%s: %d timers waiting after the default wait, want still %d: the write gave up its wait", surface, got, waiting)
		}
		wait -= admission.DefaultMaxWait
	}
	o.clock.Advance(wait)
	var refused int
	var r *response
	select {
	case r = <-answers[0]:
		refused = 0
	case r = <-answers[1]:
		refused = 1
	}
	if r.Status != http.StatusServiceUnavailable || r.ErrorCode(t) != "overloaded" || r.Header.Get("Retry-After") != "1" {
		t.Fatalf("%s: the write that waited past the maximum wait: got %d %s (Retry-After %q), want 503 overloaded with Retry-After: 1",
			surface, r.Status, r.Body, r.Header.Get("Retry-After"))
	}
	release()
	if r := <-answers[1-refused]; r.Status != ok {
		t.Fatalf("%s: the admitted write: got %d %s, want %d", surface, r.Status, r.Body, ok)
	}
	if r := send(refused); r.Status != ok {
		t.Fatalf("%s: the refused write sent again: got %d %s, want %d", surface, r.Status, r.Body, ok)
	}
	m := o.do("GET", "/metrics", "", nil)
	if want := `agentowl_admission_rejected_total{surface="` + surface + `"} 1`; !strings.Contains(string(m.Body), want) {
		t.Fatalf("/metrics lacks %s", want)
	}
}

// Requests created (AAP) and operator decisions: a write that would wait
// past the admission queue's maximum wait is 503 overloaded with
// Retry-After, nothing of it is stored, and the write admitted before it
// commits. The store's writes are held by the test (the database's lock),
// the wait is on the fake clock: no timing in the test.
func TestAdmissionOverload(t *testing.T) {
	for _, b := range storetest.Backends(t) {
		t.Run(b.Name+"/requests", func(t *testing.T) {
			t.Parallel()
			o := startOverload(t, b)
			_, cred := o.h.instance()
			keys := []string{agentowl.NewID(""), agentowl.NewID("")}
			ids := make([]string, 2)
			o.overload(t, admission.Requests, func() func() { return o.hold("approval_requests") }, func(i int) *response {
				r := o.do("POST", "/v1/requests", cred, refundBody(), "Idempotency-Key", keys[i])
				if r.Status == http.StatusCreated {
					ids[i] = r.JSON(t)["id"].(string)
				}
				return r
			}, http.StatusCreated)
			for _, id := range ids {
				if got := getRequest(t, o.env, cred, id); got.Status != "pending" {
					t.Fatalf("request %s: %s, want pending", id, got.Status)
				}
			}
			if n := len(o.h.list(o.operatorToken, "/api/v1/tenants/default/approvals")); n != 2 {
				t.Fatalf("%d requests stored, want 2", n)
			}
		})
		t.Run(b.Name+"/events", func(t *testing.T) {
			t.Parallel()
			o, we := startWorkOverload(t, b)
			id := we.endpoint(t, newRuntime(t, we), true)["id"].(string)
			_, in := we.binding(t, id, nil)
			o.overload(t, admission.Events, func() func() { return o.hold("events") }, func(i int) *response {
				return o.do(http.MethodPost, in, "", map[string]any{"text": "event " + strconv.Itoa(i)})
			}, http.StatusAccepted)
			// Both events stored once each: the refused one was not, until
			// it was sent again.
			if items := we.listWork(t, "?endpoint="+id); len(items) != 2 {
				t.Fatalf("%d work items, want 2", len(items))
			}
		})
		t.Run(b.Name+"/provider-events", func(t *testing.T) {
			t.Parallel()
			o, we := startWorkOverload(t, b)
			id := we.endpoint(t, newRuntime(t, we), true)["id"].(string)
			p := we.provider(t, "sms", id)
			o.overload(t, admission.Providers, func() func() { return o.hold("events") }, func(i int) *response {
				return o.twilioPost(p.path, p.ingress, authToken, sms("SM"+strconv.Itoa(i), "+15551230000", "text "+strconv.Itoa(i)))
			}, http.StatusOK)
			if items := we.listWork(t, "?endpoint="+id); len(items) != 2 {
				t.Fatalf("%d work items, want 2", len(items))
			}
		})
		t.Run(b.Name+"/provider-events-backlog", func(t *testing.T) {
			// While deliveries lag, a provider's SMS is still taken (a
			// refusal would lose it), and a webhook event is refused.
			t.Parallel()
			we := setupWorkServer(t, b, func(c *server.Config) {
				overloadConfig(c)
				c.HTTP.Admission.Backlog = func() time.Duration { return time.Hour }
			})
			id := we.endpoint(t, newRuntime(t, we), true)["id"].(string)
			we.provider(t, "sms", id).send(t, sms("SM1", "+15551230000", "while deliveries lag"))
			_, in := we.binding(t, id, nil)
			if r := we.do(http.MethodPost, in, "", map[string]any{"text": "webhook"}); r.Status != http.StatusServiceUnavailable || r.ErrorCode(t) != "overloaded" {
				t.Fatalf("a webhook event while deliveries lag: %d %s, want 503 overloaded", r.Status, r.Body)
			}
			if items := we.listWork(t, "?endpoint="+id); len(items) != 1 {
				t.Fatalf("%d work items, want 1 (the SMS)", len(items))
			}
		})
		t.Run(b.Name+"/callbacks", func(t *testing.T) {
			t.Parallel()
			o, we := startWorkOverload(t, b)
			id := we.endpoint(t, newRuntime(t, we), true)["id"].(string)
			token := we.credential(t, id, nil)["token"].(string)
			_, in := we.binding(t, id, nil)
			we.send(t, in, map[string]any{"text": "one"})
			we.send(t, in, map[string]any{"text": "two"})
			items := we.listWork(t, "?endpoint="+id)
			if len(items) != 2 {
				t.Fatalf("%d work items, want 2", len(items))
			}
			works := []string{items[0]["id"].(string), items[1]["id"].(string)}
			o.overload(t, admission.Callbacks, func() func() { return o.hold("work_callbacks") }, func(i int) *response {
				return o.do(http.MethodPost, "/runtime/v1/work/"+works[i]+"/callbacks", token, callback(works[i], "cb-1", 1, "running"))
			}, http.StatusOK)
			for _, w := range works {
				if st := jsonAt(we.getWork(t, w), "runtime", "status"); st != "running" {
					t.Fatalf("work %s: %v, want running", w, st)
				}
			}
		})
		t.Run(b.Name+"/delivery-backlog", func(t *testing.T) {
			t.Parallel()
			testBacklogRefusal(t, b)
		})
		t.Run(b.Name+"/decisions", func(t *testing.T) {
			t.Parallel()
			o := startOverload(t, b)
			_, cred := o.h.instance()
			ids := []string{submit(t, o.env, cred, refundBody()).ID, submit(t, o.env, cred, refundBody()).ID}
			o.overload(t, admission.Decisions, func() func() { return o.hold("approval_requests") }, func(i int) *response {
				return decide(o.env, ids[i], "approve")
			}, http.StatusOK)
			for _, id := range ids {
				if got := getRequest(t, o.env, cred, id); got.Status != "approved" {
					t.Fatalf("request %s: %s, want approved", id, got.Status)
				}
			}
		})
	}
}

// While the delivery engine is the maximum wait behind, a decision is
// refused with 503 overloaded and Retry-After even though its queue has
// room: what it would hand to the engine would wait longer than the wait
// allows. It is counted in /metrics (as refused, and as refused for the
// backlog), nothing of it is stored, and sent again once the engine has
// caught up it is taken. The backlog is the test's (the engine's own is
// tested in internal/delivery).
func testBacklogRefusal(t *testing.T, b storetest.Backend) {
	var backlog atomic.Int64
	sc := servertest.Config(t, b)
	overloadConfig(&sc)
	sc.HTTP.Admission.Backlog = func() time.Duration { return time.Duration(backlog.Load()) }
	o := newOverloadEnv(t, start(t, sc), sc)
	_, cred := o.h.instance()
	id := submit(t, o.env, cred, refundBody()).ID
	backlog.Store(int64(admission.DefaultMaxWait))
	r := decide(o.env, id, "approve")
	if r.Status != http.StatusServiceUnavailable || r.ErrorCode(t) != "overloaded" || r.Header.Get("Retry-After") != "1" {
		t.Fatalf("a decision while deliveries lag: got %d %s (Retry-After %q), want 503 overloaded with Retry-After: 1",
			r.Status, r.Body, r.Header.Get("Retry-After"))
	}
	if got := getRequest(t, o.env, cred, id); got.Status != "pending" {
		t.Fatalf("the refused decision's request: %s, want pending", got.Status)
	}
	backlog.Store(0)
	if r := decide(o.env, id, "approve"); r.Status != http.StatusOK {
		t.Fatalf("the decision sent again: got %d %s, want 200", r.Status, r.Body)
	}
	if got := getRequest(t, o.env, cred, id); got.Status != "approved" {
		t.Fatalf("request %s: %s, want approved", id, got.Status)
	}
	m := o.do("GET", "/metrics", "", nil)
	for _, want := range []string{`agentowl_admission_rejected_total{surface="decisions"} 1`,
		`agentowl_admission_backlog_rejected_total{surface="decisions"} 1`} {
		if !strings.Contains(string(m.Body), want) {
			t.Fatalf("/metrics lacks %s", want)
		}
	}
}
