package aap_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentowl/agentowl/aap"
	"github.com/agentowl/agentowl/internal/clocktest"
)

// fakeProvider is a hand-written provider at the process edge, for answers a
// correct provider never gives. It keeps requests by idempotency key.
type fakeProvider struct {
	mu     sync.Mutex
	clock  *clocktest.Fake
	byKey  map[string]*aap.Request
	byID   map[string]*aap.Request
	posts  int
	cancel []string
	// onCreate runs after a request is created, before the answer.
	onCreate func(r *aap.Request) error
	// answer, if set, replaces what GetRequest returns.
	answer func(r aap.Request) (*aap.Request, error)
	// cancelErr fails cancellations.
	cancelErr error
}

func newFakeProvider(clock *clocktest.Fake) *fakeProvider {
	return &fakeProvider{clock: clock, byKey: map[string]*aap.Request{}, byID: map[string]*aap.Request{}}
}

func (f *fakeProvider) CreateRequest(_ context.Context, key string, c *aap.Call) (*aap.Request, error) {
	f.mu.Lock()
	f.posts++
	r, ok := f.byKey[key]
	if !ok {
		r = &aap.Request{ID: uuid.NewString(), Tool: c.Tool, Arguments: c.Arguments, Timeout: c.Timeout, Status: aap.StatusPending,
			CreatedAt: f.clock.Now(), DeadlineAt: f.clock.Now().Add(30 * time.Minute)}
		f.byKey[key], f.byID[r.ID] = r, r
	}
	cp := *r
	hook := f.onCreate
	f.mu.Unlock()
	if hook != nil {
		if err := hook(&cp); err != nil {
			return nil, err
		}
	}
	return f.get(cp.ID)
}

func (f *fakeProvider) get(id string) (*aap.Request, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.byID[id]
	if !ok {
		return nil, &aap.APIError{StatusCode: 404, Code: "not_found"}
	}
	cp := *r
	return &cp, nil
}

func (f *fakeProvider) GetRequest(_ context.Context, id string) (*aap.Request, error) {
	r, err := f.get(id)
	if err == nil && f.answer != nil {
		return f.answer(*r)
	}
	return r, err
}

func (f *fakeProvider) CancelRequest(_ context.Context, id string) (*aap.Request, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cancel = append(f.cancel, id)
	if f.cancelErr != nil {
		return nil, f.cancelErr
	}
	r := f.byID[id]
	if r.Status.Terminal() && r.Status != aap.StatusCancelled {
		return nil, &aap.APIError{StatusCode: 409, Code: "already_terminal"}
	}
	r.Status, r.Decision = aap.StatusCancelled, &aap.Decision{Status: aap.StatusCancelled, DecidedAt: f.clock.Now()}
	cp := *r
	return &cp, nil
}

// decide records an outcome; approvals are valid for validity.
func (f *fakeProvider) decide(id string, s aap.Status, validity time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.byID[id]
	r.Status, r.Decision = s, &aap.Decision{Status: s, DecidedAt: f.clock.Now(), Note: "because"}
	if s == aap.StatusApproved {
		exp := f.clock.Now().Add(validity)
		r.Decision.ExpiresAt = &exp
	}
}

// adapterEnv is an Adapter over a real SQLite store and a fake provider,
// counting tool runs.
type adapterEnv struct {
	t     *testing.T
	clock *clocktest.Fake
	fake  *fakeProvider
	store aap.Store
	a     *aap.Adapter

	mu   sync.Mutex
	runs map[string]int
}

func newAdapterEnv(t *testing.T) *adapterEnv {
	e := &adapterEnv{t: t, clock: clocktest.New(t0), runs: map[string]int{}}
	e.fake = newFakeProvider(e.clock)
	e.store = openStore(t, filepath.Join(t.TempDir(), "harness.db"))
	t.Cleanup(func() { e.store.Close() })
	e.a = e.adapter(e.store)
	return e
}

func (e *adapterEnv) adapter(st aap.ExecutionStore) *aap.Adapter {
	a, err := aap.NewAdapter(e.config(e.fake, st, nil))
	must(e.t, err)
	return a
}

// config is an adapter's configuration on p and st whose tool counts its
// runs and, if saw is not nil, tells saw what it ran.
func (e *adapterEnv) config(p aap.Provider, st aap.ExecutionStore, saw func(ctx context.Context, x *aap.Execution)) aap.AdapterConfig {
	return aap.AdapterConfig{Provider: p, Store: st, Clock: e.clock,
		Run: func(ctx context.Context, x *aap.Execution) (json.RawMessage, error) {
			if saw != nil {
				saw(ctx, x)
			}
			e.mu.Lock()
			e.runs[x.Key]++
			e.mu.Unlock()
			return json.RawMessage(`{"refund":"issued"}`), nil
		}}
}

func (e *adapterEnv) ran(key string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.runs[key]
}

var refund = aap.Call{Tool: "issue_refund", Arguments: json.RawMessage(`{"payment_id": "payment_123", "amount": 4900, "currency": "GBP"}`), Timeout: "30m"}

func expectState(t *testing.T, e *aap.Execution, state aap.ExecState, reason string) {
	t.Helper()
	if e == nil || e.State != state || !strings.Contains(e.Reason, reason) {
		t.Fatalf("execution = %+v, want state %s with reason containing %q", e, state, reason)
	}
}

// Submit saves the key and exact call before it posts, and a lost answer
// is recovered with the same key: one provider request.
func TestSubmitSavesFirstAndRetriesWithSameKey(t *testing.T) {
	t.Parallel()
	e := newAdapterEnv(t)
	lost := true
	e.fake.onCreate = func(r *aap.Request) error {
		saved, err := e.store.GetExecution(context.Background(), "k1")
		if err != nil || saved.State != aap.ExecSubmitting || saved.Call.Tool != "issue_refund" ||
			string(saved.Call.Arguments) != `{"payment_id":"payment_123","amount":4900,"currency":"GBP"}` {
			t.Errorf("at POST time the saved execution is %+v (%v)", saved, err)
		}
		if lost {
			lost = false
			return errors.New("connection reset") // the provider committed; the answer is lost
		}
		return nil
	}
	x, err := e.a.Submit(context.Background(), "k1", refund)
	if err == nil || x.State != aap.ExecSubmitting {
		t.Fatalf("Submit with a lost answer = %+v, %v", x, err)
	}
	// A restarted harness recovers it.
	list, err := e.adapter(e.store).Recover(context.Background())
	must(t, err)
	if len(list) != 1 || list[0].State != aap.ExecWaiting || list[0].RequestID == "" {
		t.Fatalf("Recover = %+v", list)
	}
	if len(e.fake.byKey) != 1 || e.fake.posts != 2 {
		t.Fatalf("provider saw %d posts creating %d requests; want 2 posts, 1 request", e.fake.posts, len(e.fake.byKey))
	}
	// Submitting the same key and call again continues it; another call
	// with the same key is refused.
	again, err := e.a.Submit(context.Background(), "k1", refund)
	must(t, err)
	if again.RequestID != list[0].RequestID {
		t.Fatalf("resubmission has request %s, want %s", again.RequestID, list[0].RequestID)
	}
	other := refund
	other.Arguments = json.RawMessage(`{"payment_id":"payment_123","amount":4901,"currency":"GBP"}`)
	if _, err := e.a.Submit(context.Background(), "k1", other); !errors.Is(err, aap.ErrConflict) {
		t.Fatalf("another call with the same key: %v, want ErrConflict", err)
	}
}

// A request already terminal at creation is applied at once.
func TestSubmitAppliesImmediateDecision(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		status aap.Status
		state  aap.ExecState
		runs   int
		reason string
	}{
		{aap.StatusApproved, aap.ExecFinished, 1, ""},
		{aap.StatusDenied, aap.ExecNotRun, 0, "denied: because"},
		{aap.StatusCancelled, aap.ExecNotRun, 0, "cancelled"},
		{aap.StatusExpired, aap.ExecNotRun, 0, "expired"},
	} {
		e := newAdapterEnv(t)
		e.fake.onCreate = func(r *aap.Request) error { e.fake.decide(r.ID, c.status, time.Minute); return nil }
		x, err := e.a.Submit(context.Background(), "k", refund)
		must(t, err)
		expectState(t, x, c.state, c.reason)
		if e.ran("k") != c.runs || (c.runs == 1 && string(x.Result) != `{"refund":"issued"}`) {
			t.Fatalf("%s: ran %d times, result %s", c.status, e.ran("k"), x.Result)
		}
	}
}

// Resume runs an approved call once, only before expires_at, and ends
// every other outcome as not run with its reason.
func TestResumeEnforcesDecision(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newAdapterEnv(t)
	submit := func(key string) string {
		x, err := e.a.Submit(ctx, key, refund)
		must(t, err)
		expectState(t, x, aap.ExecWaiting, "")
		return x.RequestID
	}
	// Still pending: a spurious wake-up changes nothing.
	pending := submit("pending")
	x, err := e.a.Resume(ctx, pending)
	must(t, err)
	expectState(t, x, aap.ExecWaiting, "")

	ok := submit("ok")
	e.fake.decide(ok, aap.StatusApproved, 5*time.Minute)
	e.clock.Advance(5*time.Minute - time.Second)
	x, err = e.a.Resume(ctx, ok)
	must(t, err)
	expectState(t, x, aap.ExecFinished, "")
	for range 3 { // repeated wake-ups and recovery never run it again
		x, err = e.a.Resume(ctx, ok)
		must(t, err)
		_, err = e.a.Recover(ctx)
		must(t, err)
	}
	if e.ran("ok") != 1 || x.State != aap.ExecFinished {
		t.Fatalf("ran %d times, state %s", e.ran("ok"), x.State)
	}

	late := submit("late")
	e.fake.decide(late, aap.StatusApproved, 5*time.Minute)
	e.clock.Advance(5 * time.Minute) // at expires_at: too late
	x, err = e.a.Resume(ctx, late)
	must(t, err)
	expectState(t, x, aap.ExecNotRun, "approval expired")

	for status, reason := range map[aap.Status]string{aap.StatusDenied: "denied: because", aap.StatusExpired: "expired: no decision",
		aap.StatusCancelled: "cancelled"} {
		id := submit(string(status))
		e.fake.decide(id, status, 0)
		x, err = e.a.Resume(ctx, id)
		must(t, err)
		expectState(t, x, aap.ExecNotRun, reason)
	}
	if e.ran("late") != 0 || e.ran("denied") != 0 || e.ran("expired") != 0 || e.ran("cancelled") != 0 {
		t.Fatalf("runs: %v", e.runs)
	}
	if _, err := e.a.Resume(ctx, uuid.NewString()); !errors.Is(err, aap.ErrUnknownRequest) {
		t.Fatalf("Resume of an unknown request: %v", err)
	}
}

// An answer that does not match what was asked for, or does not parse,
// never lets the tool run.
func TestResumeValidatesProviderAnswer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, c := range []struct {
		name   string
		answer func(r aap.Request) (*aap.Request, error)
		state  aap.ExecState
	}{
		{"other request ID", func(r aap.Request) (*aap.Request, error) { r.ID = uuid.NewString(); return &r, nil }, aap.ExecWaiting},
		{"other tool", func(r aap.Request) (*aap.Request, error) { r.Tool = "drop_table"; return &r, nil }, aap.ExecNotRun},
		{"other arguments", func(r aap.Request) (*aap.Request, error) {
			r.Arguments = json.RawMessage(`{"payment_id":"payment_123","amount":490000,"currency":"GBP"}`)
			return &r, nil
		}, aap.ExecNotRun},
		{"number spelled differently", func(r aap.Request) (*aap.Request, error) {
			r.Arguments = json.RawMessage(`{"payment_id":"payment_123","amount":4900.0,"currency":"GBP"}`)
			return &r, nil
		}, aap.ExecNotRun},
		{"unparseable", func(r aap.Request) (*aap.Request, error) {
			return nil, fmt.Errorf("%w: garbage", aap.ErrInvalidResponse)
		}, aap.ExecWaiting},
		{"server error", func(r aap.Request) (*aap.Request, error) { return nil, &aap.APIError{StatusCode: 500} }, aap.ExecWaiting},
	} {
		e := newAdapterEnv(t)
		x, err := e.a.Submit(ctx, "k", refund)
		must(t, err)
		e.fake.decide(x.RequestID, aap.StatusApproved, time.Hour)
		e.fake.answer = c.answer
		x, _ = e.a.Resume(ctx, x.RequestID)
		if x.State != c.state || e.ran("k") != 0 {
			t.Errorf("%s: state %s, ran %d; want %s and not run", c.name, x.State, e.ran("k"), c.state)
		}
	}
	// Key order and whitespace are not differences.
	e := newAdapterEnv(t)
	x, err := e.a.Submit(ctx, "k", refund)
	must(t, err)
	e.fake.decide(x.RequestID, aap.StatusApproved, time.Hour)
	e.fake.answer = func(r aap.Request) (*aap.Request, error) {
		r.Arguments = json.RawMessage(`{ "currency":"GBP", "amount":4900, "payment_id":"payment_123" }`)
		return &r, nil
	}
	x, err = e.a.Resume(ctx, x.RequestID)
	must(t, err)
	expectState(t, x, aap.ExecFinished, "")
}

// The client refuses malformed provider answers; the adapter then never
// runs the tool.
func TestClientParsesStrictly(t *testing.T) {
	t.Parallel()
	id := "7ab8c8ec-7b2d-4fd6-9b52-752f9515eb71"
	base := `"id":"` + id + `","tool":"issue_refund","arguments":{"amount":4900},"timeout":"30m","created_at":"2026-09-16T12:00:00Z","deadline_at":"2026-09-16T12:30:00Z"`
	approved := `"status":"approved","decision":{"status":"approved","decided_at":"2026-09-16T12:02:00Z","expires_at":"2026-09-16T12:07:00Z"}`
	good := []string{
		`{` + base + `,"status":"pending"}`,
		`{` + base + `,` + approved + `}`,
		`{` + base + `,"status":"denied","decision":{"status":"denied","note":"no","decided_at":"2026-09-16T12:02:00Z"}}`,
	}
	bad := map[string]string{
		"not JSON":                    `<html>`,
		"unknown status":              `{` + base + `,"status":"approved_ish"}`,
		"pending with decision":       `{` + base + `,"status":"pending","decision":{"status":"pending","decided_at":"2026-09-16T12:02:00Z"}}`,
		"approved without decision":   `{` + base + `,"status":"approved"}`,
		"approved without expires_at": `{` + base + `,"status":"approved","decision":{"status":"approved","decided_at":"2026-09-16T12:02:00Z"}}`,
		"expires_at before decided_at": `{` + base + `,"status":"approved","decision":{"status":"approved","decided_at":"2026-09-16T12:02:00Z",` +
			`"expires_at":"2026-09-16T12:02:00Z"}}`,
		"decision status differs": `{` + base + `,"status":"approved","decision":{"status":"denied","decided_at":"2026-09-16T12:02:00Z","expires_at":"2026-09-16T12:07:00Z"}}`,
		"denied with expires_at":  `{` + base + `,"status":"denied","decision":{"status":"denied","decided_at":"2026-09-16T12:02:00Z","expires_at":"2026-09-16T12:07:00Z"}}`,
		"unknown field":           `{` + base + `,` + approved + `,"run":true}`,
		"missing tool":            strings.Replace(`{`+base+`,"status":"pending"}`, `"tool":"issue_refund",`, "", 1),
		"arguments not an object": strings.Replace(`{`+base+`,"status":"pending"}`, `{"amount":4900}`, `[4900]`, 1),
		"bad time":                strings.Replace(`{`+base+`,`+approved+`}`, `"2026-09-16T12:07:00Z"`, `"soon"`, 1),
		"trailing data":           `{` + base + `,"status":"pending"}{}`,
		"id not a UUID":           strings.Replace(`{`+base+`,"status":"pending"}`, id, "1", 1),
	}
	for _, g := range good {
		if _, err := aap.ParseRequest([]byte(g)); err != nil {
			t.Errorf("ParseRequest(%s): %v", g, err)
		}
	}
	for name, b := range bad {
		if _, err := aap.ParseRequest([]byte(b)); !errors.Is(err, aap.ErrInvalidResponse) {
			t.Errorf("%s: ParseRequest = %v, want ErrInvalidResponse", name, err)
		}
	}
	// Through HTTP: another request's body, and garbage, are errors.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, id) {
			fmt.Fprint(w, `{`+strings.Replace(base, id, uuid.NewString(), 1)+`,`+approved+`}`)
			return
		}
		fmt.Fprint(w, `{"status":"approved"`)
	}))
	defer srv.Close()
	c := &aap.Client{BaseURL: srv.URL, Token: "owl_inst_x"}
	if _, err := c.GetRequest(context.Background(), id); !errors.Is(err, aap.ErrInvalidResponse) {
		t.Errorf("GetRequest answered with another request: %v", err)
	}
	if _, err := c.GetRequest(context.Background(), uuid.NewString()); !errors.Is(err, aap.ErrInvalidResponse) {
		t.Errorf("GetRequest answered with garbage: %v", err)
	}
}

// A provider that is briefly unavailable (503 with Retry-After) is a
// temporary error that carries how long to wait: the submission stays to be
// retried with the same key.
func TestClientUnavailableIsTemporary(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "7")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, `{"error":{"type":"dependency","code":"unavailable","message":"retry shortly","request_id":"r1"}}`)
	}))
	defer srv.Close()
	c := &aap.Client{BaseURL: srv.URL, Token: "owl_inst_x"}
	_, err := c.CreateRequest(context.Background(), "k1", &refund)
	var ae *aap.APIError
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusServiceUnavailable || ae.Code != "unavailable" ||
		ae.RetryAfter != 7*time.Second || !ae.Temporary() {
		t.Fatalf("503 answer: %#v", err)
	}
}

// A decision (and its wake-up) that arrives before the submission saved
// its request ID is not lost.
func TestWakeupBeforeSuspensionSaved(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newAdapterEnv(t)
	other := e.adapter(e.store) // the process the receiver's --exec starts
	var early error
	e.fake.onCreate = func(r *aap.Request) error {
		e.fake.decide(r.ID, aap.StatusApproved, time.Minute)
		_, early = other.Resume(ctx, r.ID)
		return nil
	}
	x, err := e.a.Submit(ctx, "k", refund)
	must(t, err)
	if !errors.Is(early, aap.ErrUnknownRequest) {
		t.Fatalf("the early wake-up got %v, want ErrUnknownRequest so the receiver keeps it", early)
	}
	expectState(t, x, aap.ExecFinished, "")
	// The kept wake-up, retried, is discarded.
	y, err := other.Resume(ctx, x.RequestID)
	must(t, err)
	if y.State != aap.ExecFinished || e.ran("k") != 1 {
		t.Fatalf("retried wake-up: %s, ran %d", y.State, e.ran("k"))
	}
}

// Abandon cancels the request and a later approval never runs the call;
// suspending never cancels.
func TestAbandon(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newAdapterEnv(t)
	x, err := e.a.Submit(ctx, "sleeping", refund)
	must(t, err)
	y, err := e.a.Submit(ctx, "gone", refund)
	must(t, err)
	z, err := e.a.Abandon(ctx, "gone", "the user left")
	must(t, err)
	if z.State != aap.ExecAbandoned || !z.CancelDone || z.Reason != "the user left" {
		t.Fatalf("Abandon = %+v", z)
	}
	if len(e.fake.cancel) != 1 || e.fake.cancel[0] != y.RequestID {
		t.Fatalf("cancelled %v, want only %s (never the sleeping %s)", e.fake.cancel, y.RequestID, x.RequestID)
	}
	// A notification for the abandoned execution is acknowledged and
	// discarded.
	w, err := e.a.Resume(ctx, y.RequestID)
	must(t, err)
	if w.State != aap.ExecAbandoned || e.ran("gone") != 0 {
		t.Fatalf("after abandon: %s, ran %d", w.State, e.ran("gone"))
	}
	// A failed cancellation is retried by Recover; a submission without a
	// request ID is re-posted with its key to find it.
	e.fake.onCreate = func(*aap.Request) error { return errors.New("connection reset") }
	_, err = e.a.Submit(ctx, "half", refund)
	if err == nil {
		t.Fatal("Submit succeeded despite the lost answer")
	}
	e.fake.onCreate = nil
	e.fake.cancelErr = errors.New("provider down")
	h, err := e.a.Abandon(ctx, "half", "")
	if err == nil || h.State != aap.ExecAbandoned || h.CancelDone {
		t.Fatalf("Abandon with the provider down = %+v, %v", h, err)
	}
	e.fake.cancelErr = nil
	_, err = e.a.Recover(ctx)
	must(t, err)
	h, _ = e.a.Execution(ctx, "half")
	if !h.CancelDone || h.RequestID == "" {
		t.Fatalf("after Recover: %+v", h)
	}
	r, _ := e.fake.get(h.RequestID)
	if r.Status != aap.StatusCancelled {
		t.Fatalf("the abandoned request is %s", r.Status)
	}
	// Finished executions cannot be abandoned.
	s, _ := e.fake.get(x.RequestID)
	e.fake.decide(s.ID, aap.StatusApproved, time.Minute)
	_, err = e.a.Resume(ctx, x.RequestID)
	must(t, err)
	f, err := e.a.Abandon(ctx, "sleeping", "")
	must(t, err)
	if f.State != aap.ExecFinished {
		t.Fatalf("abandoning a finished execution made it %s", f.State)
	}
}

// failingStore fails Transition to a given state once it is asked to,
// as a process killed at that step would.
type failingStore struct {
	aap.ExecutionStore
	failTo aap.ExecState
}

func (s *failingStore) Transition(ctx context.Context, key string, from []aap.ExecState, c aap.Change) (bool, error) {
	if c.State == s.failTo {
		return false, errors.New("killed")
	}
	return s.ExecutionStore.Transition(ctx, key, from, c)
}

// Once marked started, an execution is never started again, even when the
// process died before recording the outcome.
func TestStartedIsNeverRerun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newAdapterEnv(t)
	dying := e.adapter(&failingStore{ExecutionStore: e.store, failTo: aap.ExecFinished})
	x, err := dying.Submit(ctx, "k", refund)
	must(t, err)
	e.fake.decide(x.RequestID, aap.StatusApproved, time.Minute)
	if _, err := dying.Resume(ctx, x.RequestID); err == nil {
		t.Fatal("the dying adapter reported success")
	}
	for range 2 {
		if _, err := e.a.Recover(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := e.a.Resume(ctx, x.RequestID); err != nil {
			t.Fatal(err)
		}
	}
	got, _ := e.a.Execution(ctx, "k")
	if got.State != aap.ExecStarted || e.ran("k") != 1 {
		t.Fatalf("state %s, ran %d; want started (outcome unknown) and exactly one run", got.State, e.ran("k"))
	}
}

// FuzzParseRequest: any provider answer either parses into a request that
// satisfies the contract's invariants or is an error; it never panics.
func FuzzParseRequest(f *testing.F) {
	base := `"id":"7ab8c8ec-7b2d-4fd6-9b52-752f9515eb71","tool":"issue_refund","arguments":{"amount":4900},"timeout":"30m","created_at":"2026-09-16T12:00:00Z","deadline_at":"2026-09-16T12:30:00Z"`
	f.Add([]byte(`{` + base + `,"status":"pending"}`))
	f.Add([]byte(`{` + base + `,"status":"approved","decision":{"status":"approved","decided_at":"2026-09-16T12:02:00Z","expires_at":"2026-09-16T12:07:00Z"}}`))
	f.Add([]byte(`{` + base + `,"status":"denied","decision":{"status":"denied","note":"no","decided_at":"2026-09-16T12:02:00Z"}}`))
	f.Add([]byte(`{` + base + `,"status":"approved","decision":{"status":"approved","decided_at":"2026-09-16T12:02:00Z"}}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := aap.ParseRequest(data)
		if err != nil {
			if !errors.Is(err, aap.ErrInvalidResponse) {
				t.Fatalf("error %v does not wrap ErrInvalidResponse", err)
			}
			return
		}
		if r.Status.Terminal() != (r.Decision != nil) {
			t.Fatalf("status %s with decision %v", r.Status, r.Decision)
		}
		if r.Status == aap.StatusApproved && (r.Decision.ExpiresAt == nil || !r.Decision.ExpiresAt.After(r.Decision.DecidedAt)) {
			t.Fatalf("approval without a valid expires_at: %+v", r.Decision)
		}
		if r.Status != aap.StatusPending && r.Status != aap.StatusApproved && r.Status != aap.StatusDenied &&
			r.Status != aap.StatusExpired && r.Status != aap.StatusCancelled {
			t.Fatalf("status %q", r.Status)
		}
	})
}
