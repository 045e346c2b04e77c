package aap_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/agentowl/agentowl/aap"
	"github.com/agentowl/agentowl/internal/clocktest"
)

// TestInvariantRandomized drives the real kit (Adapter, Receiver, SQLite
// stores) against the real provider in-process (HTTP API, decisions,
// policies, the delivery engine and egress over TLS) on a fake clock, and
// injects, in seeded random order:
//
//   - kills of the harness at any step: before or after any store write,
//     before a provider call reaches the provider or after it was processed
//     with its answer lost, before or after the tool runs;
//   - receiver faults: unavailable (503), killed after recording but before
//     answering (the provider retries: a duplicate), restarts (store closed
//     and reopened), and lost notifications (acknowledged but never
//     recorded, so only recovery finds the decision);
//   - duplicate and reordered notifications (captured messages replayed
//     later, out of order);
//   - provider delivery engine restarts (a killed provider's outbox carries
//     on);
//   - approvals that expire while the execution is suspended, requests
//     that expire undecided, denials, policy decisions at creation, and
//     abandonment.
//
// After a fault-free final recovery it checks: the tool ran at most once
// per execution and per request; never at or after decision.expires_at;
// never unless the request read back from the provider is approved (with
// the exact submitted call); every approved request whose execution was not
// abandoned and whose approval was still valid at the final recovery ran
// exactly once, except when the harness was killed between durably marking
// the execution started and the tool's start (the execution then stays
// "started": at most once wins); abandoned executions never ran and their
// requests are no longer pending; nothing else was ever cancelled.
//
// AAP_INVARIANT_SEEDS sets how many seeds run (default 100); a failure names
// its seed, and AAP_INVARIANT_SEED=N reruns just that one.
func TestInvariantRandomized(t *testing.T) {
	seeds, first := 100, 1
	if v, err := strconv.Atoi(os.Getenv("AAP_INVARIANT_SEEDS")); err == nil && v > 0 {
		seeds = v
	}
	if v, err := strconv.Atoi(os.Getenv("AAP_INVARIANT_SEED")); err == nil {
		first, seeds = v, 1
	}
	clock := clocktest.New(t0)
	f := &faults{}
	rs := newReceiverSite(t, clock, f.wrap)
	p := newProvider(t, clock, rs.caPEM())
	p.op.Call(http.MethodPost, "/policies", map[string]any{"tool": "auto_ok", "effect": "approve"}, nil)
	p.op.Call(http.MethodPost, "/policies", map[string]any{"tool": "auto_no", "effect": "deny"}, nil)
	cred := p.provision(rs, "invariant")
	var stats scenarioStats
	defer func() { t.Logf("%d seeds: %s", seeds, &stats) }()
	for seed := first; seed < first+seeds; seed++ {
		s := &scenario{t: t, seed: seed, rng: rand.New(rand.NewPCG(uint64(seed), 7)), clock: clock, p: p, rs: rs, f: f, cred: cred,
			path: filepath.Join(t.TempDir(), fmt.Sprintf("harness-%d.db", seed)), windowCrash: map[string]bool{}}
		s.run()
		stats.add(s)
		s.store.Close()
		if t.Failed() {
			t.Fatalf("seed %d failed (rerun with AAP_INVARIANT_SEED=%d); its steps:\n%s", seed, seed, s.log.String())
		}
	}
}

// ---- receiver faults

type receiverMode int

const (
	recvNormal      receiverMode = iota
	recvUnavailable              // 503 before looking at it
	recvKilled                   // recorded, then the connection dies before the answer
	recvLost                     // acknowledged but never recorded
)

type faults struct {
	mu       sync.Mutex
	rng      *rand.Rand // nil: no faults
	captured []msg
}

func (f *faults) set(rng *rand.Rand) {
	f.mu.Lock()
	f.rng = rng
	f.mu.Unlock()
}

func (f *faults) pick(body []byte) receiverMode {
	f.mu.Lock()
	defer f.mu.Unlock()
	var m struct{ Type string }
	_ = json.Unmarshal(body, &m)
	if f.rng == nil || m.Type != aap.TypeRequestResolved {
		return recvNormal
	}
	switch n := f.rng.IntN(100); {
	case n < 15:
		return recvUnavailable
	case n < 30:
		return recvKilled
	case n < 38:
		return recvLost
	}
	return recvNormal
}

func (f *faults) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		mode := f.pick(body)
		f.mu.Lock()
		f.captured = append(f.captured, msg{header: r.Header.Clone(), body: body})
		f.mu.Unlock()
		switch mode {
		case recvUnavailable:
			w.WriteHeader(http.StatusServiceUnavailable)
		case recvLost:
			w.WriteHeader(http.StatusNoContent)
		case recvKilled:
			h.ServeHTTP(httptest.NewRecorder(), r)
			panic(http.ErrAbortHandler)
		default:
			h.ServeHTTP(w, r)
		}
	})
}

// ---- harness kills

var errKilled = errors.New("killed")

// life is one harness process. At its crashAt-th step it dies, before or
// after performing that step; every later step fails without effect.
type life struct {
	mu      sync.Mutex
	dead    bool
	ops     int
	crashAt int // 0: never
	after   bool
}

// step performs op unless the process is dead; onCrash learns whether a
// kill at this step happened after op took effect.
func (l *life) step(op func() error, onCrash func(after bool)) error {
	l.mu.Lock()
	if l.dead {
		l.mu.Unlock()
		return errKilled
	}
	l.ops++
	crash, after := l.ops == l.crashAt, l.after
	if crash && !after {
		l.dead = true
		l.mu.Unlock()
		if onCrash != nil {
			onCrash(false)
		}
		return errKilled
	}
	l.mu.Unlock()
	err := op()
	if crash {
		l.mu.Lock()
		l.dead = true
		l.mu.Unlock()
		if onCrash != nil {
			onCrash(true)
		}
		return errKilled
	}
	return err
}

// stepped is step for an operation with a result and no crash hook.
func stepped[T any](l *life, op func() (T, error)) (v T, err error) {
	err = l.step(func() error { v, err = op(); return err }, nil)
	return v, err
}

type mortalStore struct {
	aap.ExecutionStore
	l *life
	s *scenario
}

func (m *mortalStore) CreateExecution(ctx context.Context, e *aap.Execution) error {
	return m.l.step(func() error { return m.ExecutionStore.CreateExecution(ctx, e) }, nil)
}

func (m *mortalStore) GetExecution(ctx context.Context, key string) (*aap.Execution, error) {
	return stepped(m.l, func() (*aap.Execution, error) { return m.ExecutionStore.GetExecution(ctx, key) })
}

func (m *mortalStore) ExecutionByRequest(ctx context.Context, id string) (*aap.Execution, error) {
	return stepped(m.l, func() (*aap.Execution, error) { return m.ExecutionStore.ExecutionByRequest(ctx, id) })
}

func (m *mortalStore) Transition(ctx context.Context, key string, from []aap.ExecState, c aap.Change) (ok bool, err error) {
	err = m.l.step(func() error { ok, err = m.ExecutionStore.Transition(ctx, key, from, c); return err }, func(after bool) {
		if after && c.State == aap.ExecStarted {
			m.s.markWindowCrash(key)
		}
	})
	return ok, err
}

func (m *mortalStore) ListExecutions(ctx context.Context, states ...aap.ExecState) ([]*aap.Execution, error) {
	return stepped(m.l, func() ([]*aap.Execution, error) { return m.ExecutionStore.ListExecutions(ctx, states...) })
}

type mortalProvider struct {
	aap.Provider
	l *life
}

func (m *mortalProvider) CreateRequest(ctx context.Context, key string, c *aap.Call) (*aap.Request, error) {
	return stepped(m.l, func() (*aap.Request, error) { return m.Provider.CreateRequest(ctx, key, c) })
}

func (m *mortalProvider) GetRequest(ctx context.Context, id string) (*aap.Request, error) {
	return stepped(m.l, func() (*aap.Request, error) { return m.Provider.GetRequest(ctx, id) })
}

func (m *mortalProvider) CancelRequest(ctx context.Context, id string) (*aap.Request, error) {
	return stepped(m.l, func() (*aap.Request, error) { return m.Provider.CancelRequest(ctx, id) })
}

// ---- the scenario

type plan int

const (
	planApprove      plan = iota // a person approves, valid for minutes
	planApproveShort             // a person approves, valid for seconds: often expires while suspended
	planDeny
	planExpire // nobody decides before the deadline
	planAbandon
	planAutoOK // a policy approves at creation
	planAutoNo // a policy denies at creation
)

type toolRun struct {
	key, requestID string
	args           json.RawMessage
	at             time.Time
}

type scenario struct {
	t     *testing.T
	seed  int
	rng   *rand.Rand
	clock *clocktest.Fake
	p     *provider
	rs    *receiverSite
	f     *faults
	cred  *aap.Credential
	path  string
	log   bytes.Buffer

	store   aap.Store
	life    *life
	kills   int
	adapter *aap.Adapter
	calls   []*scall

	mu          sync.Mutex
	runs        []toolRun
	windowCrash map[string]bool
}

type scall struct {
	key       string
	call      aap.Call
	plan      plan
	submitted bool
	decided   bool
}

func (s *scenario) logf(format string, args ...any) {
	fmt.Fprintf(&s.log, "%s  ", s.clock.Now().Format("15:04:05"))
	fmt.Fprintf(&s.log, format+"\n", args...)
}

func (s *scenario) markWindowCrash(key string) {
	s.mu.Lock()
	s.windowCrash[key] = true
	s.mu.Unlock()
}

// start begins a new harness process over the saved state; crashAt 0 never
// kills it.
func (s *scenario) start(crashAt int, after bool) {
	if s.store != nil {
		s.store.Close()
	}
	if s.life != nil && s.life.dead {
		s.kills++
	}
	s.store = openStore(s.t, s.path)
	s.life = &life{crashAt: crashAt, after: after}
	l := s.life
	a, err := aap.NewAdapter(aap.AdapterConfig{
		Provider: &mortalProvider{Provider: s.cred.Client(nil), l: l},
		Store:    &mortalStore{ExecutionStore: s.store, l: l, s: s},
		Clock:    s.clock,
		Run: func(_ context.Context, e *aap.Execution) (json.RawMessage, error) {
			err := l.step(func() error {
				s.mu.Lock()
				s.runs = append(s.runs, toolRun{key: e.Key, requestID: e.RequestID, args: e.Call.Arguments, at: s.clock.Now()})
				s.mu.Unlock()
				return nil
			}, func(after bool) {
				if !after {
					s.markWindowCrash(e.Key)
				}
			})
			return json.RawMessage(`{"ok":true}`), err
		},
	})
	must(s.t, err)
	s.adapter = a
	s.logf("harness started (kill at step %d, after=%v)", crashAt, after)
}

func (s *scenario) randomStart() {
	if s.rng.IntN(2) == 0 {
		s.start(1+s.rng.IntN(15), s.rng.IntN(2) == 0)
	} else {
		s.start(0, false)
	}
}

func (s *scenario) execution(key string) *aap.Execution {
	x, err := s.store.GetExecution(context.Background(), key)
	if errors.Is(err, aap.ErrNotFound) {
		return nil
	}
	must(s.t, err)
	return x
}

// dispatch hands every available wake-up to the harness, as Dispatch does.
func (s *scenario) dispatch() {
	r, _ := s.rs.current()
	ws, err := r.Wakeups(context.Background(), 20*time.Second, 100)
	must(s.t, err)
	for _, w := range ws {
		err := s.adapter.HandleWakeup(context.Background(), w)
		s.logf("wake-up %s for %s: %v", w.EventID[:8], w.RequestID[:8], err)
		if err == nil {
			if err := r.Ack(context.Background(), w.EventID); err != nil && !errors.Is(err, aap.ErrNotFound) {
				s.t.Fatal(err)
			}
		}
	}
}

func (s *scenario) replay() {
	s.f.mu.Lock()
	if len(s.f.captured) == 0 {
		s.f.mu.Unlock()
		return
	}
	m := s.f.captured[s.rng.IntN(len(s.f.captured))]
	s.f.mu.Unlock()
	req, err := http.NewRequest(http.MethodPost, s.rs.url(), bytes.NewReader(m.body))
	must(s.t, err)
	req.Header = m.header.Clone()
	resp, err := s.rs.srv.Client().Do(req)
	if err != nil {
		return // the fault wrapper killed the connection
	}
	resp.Body.Close()
	s.logf("replayed a captured message: %d", resp.StatusCode)
	switch resp.StatusCode {
	case 200, 204, 503, 401: // 401: its timestamp is now more than 5 minutes old
	default:
		s.t.Errorf("a replayed, correctly signed message got %d", resp.StatusCode)
	}
}

func (s *scenario) run() {
	ctx := context.Background()
	s.f.set(rand.New(rand.NewPCG(uint64(s.seed), 11)))
	s.f.mu.Lock()
	s.f.captured = nil
	s.f.mu.Unlock()
	n := 1 + s.rng.IntN(4)
	for i := range n {
		c := &scall{key: fmt.Sprintf("s%d-c%d", s.seed, i), plan: plan(s.rng.IntN(7))}
		tool, timeout := "issue_refund", "10m"
		switch c.plan {
		case planAutoOK:
			tool = "auto_ok"
		case planAutoNo:
			tool = "auto_no"
		case planExpire:
			timeout = "1m"
		}
		args := fmt.Sprintf(`{"payment_id":"p-%d-%d","amount":%d,"currency":"GBP"}`, s.seed, i, 100+s.rng.IntN(10000))
		c.call = aap.Call{Tool: tool, Arguments: json.RawMessage(args), Timeout: timeout}
		s.calls = append(s.calls, c)
	}
	s.randomStart()
	for range 30 {
		switch k := s.rng.IntN(100); {
		case k < 18: // the agent makes a tool call
			for _, c := range s.calls {
				if !c.submitted {
					c.submitted = true
					x, err := s.adapter.Submit(ctx, c.key, c.call)
					s.logf("submit %s (plan %d): %v %v", c.key, c.plan, state(x), err)
					break
				}
			}
		case k < 32: // a person decides
			c := s.calls[s.rng.IntN(len(s.calls))]
			x := s.execution(c.key)
			if c.decided || x == nil || x.RequestID == "" || (c.plan != planApprove && c.plan != planApproveShort && c.plan != planDeny) {
				continue
			}
			c.decided = true
			validity := time.Duration(30+s.rng.IntN(270)) * time.Second
			if c.plan == planApproveShort {
				validity = time.Duration(1+s.rng.IntN(10)) * time.Second
			}
			ok := s.p.decide(x.RequestID, c.plan != planDeny, validity)
			s.logf("decide %s approve=%v valid=%s: %v", c.key, c.plan != planDeny, validity, ok)
		case k < 47:
			d := time.Duration(1+s.rng.IntN(20)) * time.Second
			if s.rng.IntN(6) == 0 {
				d = time.Duration(40+s.rng.IntN(60)) * time.Second
			}
			s.clock.Advance(d)
			s.logf("clock +%s", d)
			s.p.flush()
		case k < 57:
			s.p.flush()
		case k < 70:
			s.dispatch()
		case k < 76:
			s.replay()
		case k < 84:
			s.randomStart()
			if s.rng.IntN(2) == 0 {
				_, err := s.adapter.Recover(ctx)
				s.logf("recover: %v", err)
			}
		case k < 88:
			_, err := s.adapter.Recover(ctx)
			s.logf("recover: %v", err)
		case k < 91:
			s.rs.restart()
			s.logf("receiver restarted")
		case k < 94:
			s.p.restart()
			s.logf("provider restarted")
		default:
			for _, c := range s.calls {
				if c.plan == planAbandon && c.submitted {
					x, err := s.adapter.Abandon(ctx, c.key, "")
					s.logf("abandon %s: %v %v", c.key, state(x), err)
					break
				}
			}
		}
	}
	s.final()
	s.check()
}

func state(x *aap.Execution) string {
	if x == nil {
		return "-"
	}
	return string(x.State)
}

// final is the fault-free end: the harness restarts and recovers, pending
// requests are decided by plan, notifications are delivered, and recovery
// runs once more (for the lost ones).
func (s *scenario) final() {
	ctx := context.Background()
	s.f.set(nil)
	s.start(0, false)
	_, err := s.adapter.Recover(ctx)
	s.logf("final recover: %v", err)
	must(s.t, err)
	for _, c := range s.calls {
		x := s.execution(c.key)
		if x == nil || x.RequestID == "" {
			continue
		}
		switch c.plan {
		case planApprove, planApproveShort, planDeny:
			if !c.decided {
				c.decided = true
				ok := s.p.decide(x.RequestID, c.plan != planDeny, 10*time.Minute)
				s.logf("final decide %s: %v", c.key, ok)
			}
		case planAbandon:
			_, err := s.adapter.Abandon(ctx, c.key, "")
			must(s.t, err)
		}
	}
	s.p.flush()
	s.dispatch()
	_, err = s.adapter.Recover(ctx)
	must(s.t, err)
	s.logf("final state reached")
}

func (s *scenario) check() {
	t := s.t
	ctx := context.Background()
	now := s.clock.Now()
	client := s.cred.Client(nil)
	all, err := s.store.ListExecutions(ctx, aap.ExecSubmitting, aap.ExecWaiting, aap.ExecStarted, aap.ExecFinished, aap.ExecNotRun, aap.ExecAbandoned)
	must(t, err)
	runsByKey, runsByReq := map[string][]toolRun{}, map[string]int{}
	for _, r := range s.runs {
		runsByKey[r.key] = append(runsByKey[r.key], r)
		runsByReq[r.requestID]++
	}
	for id, n := range runsByReq {
		if n > 1 {
			t.Errorf("request %s ran %d times", id, n)
		}
	}
	for _, x := range all {
		runs := runsByKey[x.Key]
		if len(runs) > 1 {
			t.Errorf("%s ran %d times", x.Key, len(runs))
		}
		if x.State == aap.ExecSubmitting {
			t.Errorf("%s is still submitting after a fault-free recovery", x.Key)
			continue
		}
		if x.RequestID == "" {
			if len(runs) > 0 {
				t.Errorf("%s ran without a request", x.Key)
			}
			continue
		}
		req, err := client.GetRequest(ctx, x.RequestID)
		must(t, err)
		for _, r := range runs {
			switch {
			case req.Status != aap.StatusApproved:
				t.Errorf("%s ran but its request is %s", x.Key, req.Status)
			case !r.at.Before(*req.Decision.ExpiresAt):
				t.Errorf("%s ran at %s, not before expires_at %s", x.Key, r.at, req.Decision.ExpiresAt)
			case r.requestID != x.RequestID || !bytes.Equal(r.args, x.Call.Arguments) || !bytes.Equal(r.args, s.callOf(x.Key).Arguments):
				t.Errorf("%s ran %s with %s; submitted %s as %s", x.Key, r.requestID, r.args, x.RequestID, s.callOf(x.Key).Arguments)
			}
		}
		switch {
		case x.State == aap.ExecAbandoned:
			if len(runs) > 0 {
				t.Errorf("abandoned %s ran", x.Key)
			}
			if x.CancelDone && req.Status == aap.StatusPending {
				t.Errorf("abandoned %s: cancellation confirmed but the request is pending", x.Key)
			}
		case req.Status == aap.StatusCancelled:
			t.Errorf("%s (%s) was never abandoned, but its request was cancelled", x.Key, x.State)
		case req.Status == aap.StatusApproved && now.Before(*req.Decision.ExpiresAt):
			if len(runs) != 1 && !(s.windowCrash[x.Key] && x.State == aap.ExecStarted) {
				t.Errorf("%s: approved until %s, recovered at %s, state %s (%s), but ran %d times", x.Key,
					req.Decision.ExpiresAt, now, x.State, x.Reason, len(runs))
			}
		case req.Status == aap.StatusApproved:
			// Expired before the final recovery: it may have run in time or not at all.
		case req.Status.Terminal():
			if len(runs) > 0 || x.State != aap.ExecNotRun {
				t.Errorf("%s: request %s, execution %s, ran %d times", x.Key, req.Status, x.State, len(runs))
			}
		default: // pending
			if x.State != aap.ExecWaiting {
				t.Errorf("%s: request pending, execution %s", x.Key, x.State)
			}
		}
	}
}

// scenarioStats shows that the faults and outcomes the test is about
// actually happen.
type scenarioStats struct {
	executions, runs, windowCrashes, kills int
	states                                 map[aap.ExecState]int
	notifications                          int
}

func (st *scenarioStats) add(s *scenario) {
	if st.states == nil {
		st.states = map[aap.ExecState]int{}
	}
	all, _ := s.store.ListExecutions(context.Background(), aap.ExecSubmitting, aap.ExecWaiting, aap.ExecStarted,
		aap.ExecFinished, aap.ExecNotRun, aap.ExecAbandoned)
	for _, x := range all {
		st.executions++
		st.states[x.State]++
	}
	st.runs += len(s.runs)
	st.windowCrashes += len(s.windowCrash)
	st.kills += s.kills
	s.f.mu.Lock()
	st.notifications += len(s.f.captured)
	s.f.mu.Unlock()
}

func (st *scenarioStats) String() string {
	return fmt.Sprintf("%d executions %v, %d tool runs, %d harness kills (%d between start mark and tool), %d webhook attempts",
		st.executions, st.states, st.runs, st.kills, st.windowCrashes, st.notifications)
}

func (s *scenario) callOf(key string) aap.Call {
	for _, c := range s.calls {
		if c.key == key {
			return c.call
		}
	}
	return aap.Call{}
}
