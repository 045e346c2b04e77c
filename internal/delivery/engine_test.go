package delivery_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/clocktest"
	"github.com/agentowl/agentowl/internal/delivery"
	"github.com/agentowl/agentowl/internal/outbox"
	"github.com/agentowl/agentowl/internal/ratelimit"
	"github.com/agentowl/agentowl/webhook"
)

// receiver is a real HTTPS endpoint that records every message, verifies
// its signature, and answers with a scripted status per call.
type receiver struct {
	t      *testing.T
	srv    *httptest.Server
	secret string
	key    webhook.Key
	clock  *clocktest.Fake
	answer func(n int) (status int, header http.Header)

	mu       sync.Mutex
	got      []received
	inflight map[string]int
	overlap  bool
}

type received struct {
	id, timestamp string
	body          []byte
	verifyErr     error
}

func newReceiver(t *testing.T, clock *clocktest.Fake, answer func(n int) (int, http.Header)) *receiver {
	r := &receiver{t: t, secret: webhook.NewSecret(), clock: clock, answer: answer, inflight: map[string]int{}}
	r.key, _ = webhook.ParseSecret(r.secret)
	r.srv = httptest.NewTLSServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	id := req.Header.Get(webhook.HeaderID)
	_, verr := r.key.Verify(req.Header, body, r.clock.Now(), webhook.DefaultTolerance)
	r.mu.Lock()
	r.inflight[id]++
	if r.inflight[id] > 1 {
		r.overlap = true
	}
	n := len(r.got)
	r.got = append(r.got, received{id: id, timestamp: req.Header.Get(webhook.HeaderTimestamp), body: body, verifyErr: verr})
	r.mu.Unlock()
	defer func() { r.mu.Lock(); r.inflight[id]--; r.mu.Unlock() }()
	status, h := http.StatusNoContent, http.Header(nil)
	if r.answer != nil {
		status, h = r.answer(n)
	}
	for k, v := range h {
		w.Header()[k] = v
	}
	w.WriteHeader(status)
}

func (r *receiver) received() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.got...)
}

// fixture is a store with one tenant, a fake clock and a resolver whose
// targets a test can change.
type fixture struct {
	t       *testing.T
	store   agentowl.Store
	clock   *clocktest.Fake
	tenant  string
	mu      sync.Mutex
	targets map[string]*outbox.Target
}

func newFixture(t *testing.T, st agentowl.Store) *fixture {
	f := &fixture{t: t, store: st, clock: clocktest.New(time.Date(2026, 9, 16, 12, 0, 0, 0, time.UTC)),
		tenant: uuid.NewString(), targets: map[string]*outbox.Target{}}
	err := f.store.Write(context.Background(), func(tx agentowl.Tx) error {
		return tx.TenantCreate(context.Background(), &agentowl.Tenant{ID: f.tenant, Name: "t-" + f.tenant[:8], CreatedAt: f.clock.Now()})
	})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) resolve(_ context.Context, _ agentowl.Tx, dest string) (*outbox.Target, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.targets[dest], nil
}

func (f *fixture) point(dest string, r *receiver) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r == nil {
		delete(f.targets, dest)
		return
	}
	f.targets[dest] = &outbox.Target{URL: r.srv.URL + "/hook", Secret: r.secret}
}

// engine starts an engine whose HTTPS client trusts client's receiver.
func (f *fixture) engine(client *http.Client, cfg delivery.Config) *delivery.Engine {
	if cfg.RetryMinDelay == 0 {
		cfg.RetryMinDelay, cfg.RetryMaxDelay = time.Second, 4*time.Second
	}
	e, err := delivery.New(f.store, f.clock, client, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		f.t.Fatal(err)
	}
	e.Handle("*", f.resolve)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { e.Run(ctx); close(done) }()
	f.t.Cleanup(func() { cancel(); <-done })
	return e
}

func (f *fixture) message(dest string, window time.Duration) *agentowl.OutboxMessage {
	return f.messageFor(f.tenant, dest, window)
}

// messageFor is message of another tenant (provisioning account).
func (f *fixture) messageFor(tenant, dest string, window time.Duration) *agentowl.OutboxMessage {
	id := uuid.NewString()
	now := f.clock.Now()
	m := &agentowl.OutboxMessage{ID: id, TenantID: tenant, Kind: "test", Destination: dest, Subject: "s-" + id,
		Body: []byte(fmt.Sprintf(`{"id":%q,"type":"test"}`, id)), CreatedAt: now, DeadlineAt: now.Add(window),
		State: agentowl.MessagePending, NextAttempt: now}
	if err := f.store.Write(context.Background(), func(tx agentowl.Tx) error { return tx.MessageCreate(context.Background(), m) }); err != nil {
		f.t.Fatal(err)
	}
	return m
}

func (f *fixture) get(id string) *agentowl.OutboxMessage {
	var m *agentowl.OutboxMessage
	if err := f.store.Read(context.Background(), func(tx agentowl.Tx) (err error) { m, err = tx.MessageGet(context.Background(), id); return err }); err != nil {
		f.t.Fatal(err)
	}
	return m
}

// states describes messages for a failure's log: state, attempts, next
// attempt, lease and last error.
func (f *fixture) states(ids []string) string {
	var b strings.Builder
	for _, id := range ids {
		m := f.get(id)
		fmt.Fprintf(&b, "  %s %s attempts=%d next=%s lease=%s until=%v last=%q\n", id, m.State, m.Attempts,
			m.NextAttempt.Format(time.RFC3339Nano), m.LeaseOwner, m.LeaseUntil, m.LastError)
	}
	return b.String()
}

func (f *fixture) allDelivered(ids []string) bool {
	for _, id := range ids {
		if f.get(id).State != agentowl.MessageDelivered {
			return false
		}
	}
	return true
}

// deliverAll runs the engines until every message of ids is delivered. The
// test clock moves only while no message is leased, and then just to the
// earliest retry: moved while attempts are under way, it would outrun
// their leases and the slots' on a slow machine, and the messages' windows
// could end before they are sent. A failed message, or a minute of real
// time, fails the test.
func (f *fixture) deliverAll(t *testing.T, ids []string, engines ...*delivery.Engine) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		delivered, leased := 0, false
		var next time.Time
		for _, id := range ids {
			switch m := f.get(id); {
			case m.State == agentowl.MessageDelivered:
				delivered++
			case m.State != agentowl.MessagePending:
				t.Fatalf("message %s is %s, want it delivered", id, m.State)
			case m.LeaseOwner != "":
				leased = true
			case next.IsZero() || m.NextAttempt.Before(next):
				next = m.NextAttempt
			}
		}
		if delivered == len(ids) {
			return
		}
		if !leased && next.After(f.clock.Now()) {
			f.clock.Advance(next.Sub(f.clock.Now()))
		}
		for _, e := range engines {
			e.Wake()
		}
	}
	t.Fatalf("messages not all delivered within a minute")
}

func (f *fixture) attempts(id string) []*agentowl.Attempt {
	var as []*agentowl.Attempt
	if err := f.store.Read(context.Background(), func(tx agentowl.Tx) (err error) { as, err = tx.AttemptList(context.Background(), id); return err }); err != nil {
		f.t.Fatal(err)
	}
	return as
}

// waitFor polls cond (synchronization with the engine's goroutines, not a
// timing assertion) and fails the test if it never holds. Engines are woken
// on every poll: one that parked on a fake-clock timer set after the test's
// last Advance would otherwise sleep forever. Waking only makes an engine
// look for due messages; what is due is still decided by the clock. The
// bound is generous: CI shares two cores with every package's tests, and
// only a condition that never holds should fail here.
func waitFor(t *testing.T, what string, cond func() bool, engines ...*delivery.Engine) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		if cond() {
			return
		}
		for _, e := range engines {
			e.Wake()
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// forEach runs fn on a fixture of each store, the stores side by side
// (delivery.EachStore), in parallel with the package's other tests that use
// it: they wait on receivers and leases, not the CPU.
// releaseAtEnd returns what releases the handlers held on gate, which a test
// calls once it has seen them held; it releases them when the test ends at
// the latest, before the servers registered earlier close (and wait for
// their handlers).
func releaseAtEnd(t *testing.T, gate chan struct{}) func() {
	release := sync.OnceFunc(func() { close(gate) })
	t.Cleanup(release)
	return release
}

func forEach(t *testing.T, fn func(t *testing.T, f *fixture)) {
	t.Parallel()
	delivery.EachStore(t, func(t *testing.T, st agentowl.Store) { fn(t, newFixture(t, st)) })
}

func TestEngineDeliversSignedMessage(t *testing.T) {
	forEach(t, func(t *testing.T, f *fixture) {
		r := newReceiver(t, f.clock, nil)
		f.point("d", r)
		e := f.engine(r.srv.Client(), delivery.Config{})
		m := f.message("d", time.Hour)
		e.Wake()
		waitFor(t, "delivery", func() bool { return f.get(m.ID).State == agentowl.MessageDelivered }, e)
		got := r.received()
		if len(got) != 1 || got[0].id != m.ID || string(got[0].body) != string(m.Body) || got[0].verifyErr != nil {
			t.Fatalf("received %+v", got)
		}
		if as := f.attempts(m.ID); len(as) != 1 || as[0].StatusCode != 204 || as[0].URL != r.srv.URL+"/hook" {
			t.Fatalf("attempts %+v", as)
		}
		if rt := f.get(m.ID).RetainUntil; rt == nil || rt.Before(m.CreatedAt.Add(agentowl.RetentionAfterDecision)) {
			t.Fatalf("retain_until %v, want at least creation + 7 days", rt)
		}
		reg := prometheus.NewRegistry()
		reg.MustRegister(e.Metrics().Collectors(f.store)...)
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]float64{}
		for _, fam := range families {
			for _, m := range fam.GetMetric() {
				seen[fam.GetName()] += m.GetCounter().GetValue() + m.GetGauge().GetValue() + float64(m.GetHistogram().GetSampleCount())
			}
		}
		for name, want := range map[string]float64{
			"agentowl_delivery_attempts_total":      1,
			"agentowl_delivery_outcomes_total":      1,
			"agentowl_delivery_ack_latency_seconds": 1,
			"agentowl_delivery_queue_depth":         0,
		} {
			if got, ok := seen[name]; !ok || got != want {
				t.Errorf("metric %s = %v (present %v), want %v", name, got, ok, want)
			}
		}
		if _, ok := seen["agentowl_delivery_oldest_pending_seconds"]; !ok {
			t.Error("no oldest-pending gauge")
		}
	})
}

func TestEngineRetriesWithSameBodyAndFreshSignature(t *testing.T) {
	forEach(t, func(t *testing.T, f *fixture) {
		r := newReceiver(t, f.clock, func(n int) (int, http.Header) {
			if n == 0 {
				return 500, nil
			}
			return 204, nil
		})
		f.point("d", r)
		e := f.engine(r.srv.Client(), delivery.Config{})
		m := f.message("d", time.Hour)
		e.Wake()
		waitFor(t, "first attempt recorded", func() bool { return len(f.attempts(m.ID)) == 1 }, e)
		if next := f.get(m.ID).NextAttempt; !next.After(f.clock.Now()) || next.After(f.clock.Now().Add(4*time.Second)) {
			t.Fatalf("next attempt %v not within the backoff bound after %v", next, f.clock.Now())
		}
		f.clock.Advance(5 * time.Second)
		waitFor(t, "delivery", func() bool { return f.get(m.ID).State == agentowl.MessageDelivered }, e)
		got := r.received()
		if len(got) != 2 || got[0].id != got[1].id || string(got[0].body) != string(got[1].body) {
			t.Fatalf("retry changed id or body: %+v", got)
		}
		if got[0].timestamp == got[1].timestamp {
			t.Fatalf("retry reused the timestamp %s", got[0].timestamp)
		}
		for _, g := range got {
			if g.verifyErr != nil {
				t.Fatalf("signature: %v", g.verifyErr)
			}
		}
		if as := f.attempts(m.ID); len(as) != 2 || as[0].StatusCode != 500 || as[0].Error != "HTTP 500" || as[1].StatusCode != 204 {
			t.Fatalf("attempts %+v", as)
		}
	})
}

// A redriven message's new series backs off as a new message does: its
// first failure is retried within the first delay bound (RetryMinDelay),
// not after the long waits its earlier attempts had reached.
func TestEngineRedrivenSeriesBacksOffAfresh(t *testing.T) {
	forEach(t, func(t *testing.T, f *fixture) {
		r := newReceiver(t, f.clock, func(int) (int, http.Header) { return 500, nil })
		f.point("d", r)
		e := f.engine(r.srv.Client(), delivery.Config{RetryMinDelay: time.Second, RetryMaxDelay: time.Hour})
		// As a redrive leaves it: 20 attempts made, the new series starting
		// after them.
		id, now := uuid.NewString(), f.clock.Now()
		m := &agentowl.OutboxMessage{ID: id, TenantID: f.tenant, Kind: "test", Destination: "d", Subject: "s-" + id, Body: []byte(`{}`),
			CreatedAt: now, DeadlineAt: now.Add(48 * time.Hour), State: agentowl.MessagePending, NextAttempt: now, Attempts: 20,
			AttemptBase: 20, Redrives: 1}
		if err := f.store.Write(context.Background(), func(tx agentowl.Tx) error { return tx.MessageCreate(context.Background(), m) }); err != nil {
			t.Fatal(err)
		}
		e.Wake()
		waitFor(t, "the series' first attempt", func() bool { return len(f.attempts(m.ID)) == 1 }, e)
		got := f.get(m.ID)
		if as := f.attempts(m.ID); as[0].N != 21 || got.Attempts != 21 {
			t.Fatalf("attempt %d, message attempts %d; want 21", as[0].N, got.Attempts)
		}
		if next := got.NextAttempt; next.After(f.clock.Now().Add(time.Second)) {
			t.Fatalf("retry at %v, %v after the failure; a new series waits at most the first bound (1s)", next, next.Sub(f.clock.Now()))
		}
	})
}

func TestEngineRespectsRetryAfterWithinWindow(t *testing.T) {
	forEach(t, func(t *testing.T, f *fixture) {
		r := newReceiver(t, f.clock, func(n int) (int, http.Header) {
			return 429, http.Header{"Retry-After": {"120"}}
		})
		f.point("d", r)
		e := f.engine(r.srv.Client(), delivery.Config{})
		m := f.message("d", time.Hour)
		e.Wake()
		waitFor(t, "first attempt", func() bool { return len(f.attempts(m.ID)) == 1 }, e)
		if next := f.get(m.ID).NextAttempt; next.Before(f.clock.Now().Add(120 * time.Second)) {
			t.Fatalf("next attempt %v ignores Retry-After: 120 at %v", next, f.clock.Now())
		}
	})
}

// A Retry-After past the deadline neither extends the retry window nor ends
// delivery at once: the retry is made when a full-length attempt last fits
// before the deadline, and delivery fails after that final attempt.
func TestEngineRetryAfterPastDeadlineRetriesUntilIt(t *testing.T) {
	for name, c := range map[string]struct {
		retryAfter string
		window     time.Duration
	}{
		"date":    {"Thu, 01 Jan 2037 00:00:00 GMT", agentowl.RetentionAfterDecision},
		"seconds": {"120", 60 * time.Second},
	} {
		t.Run(name, func(t *testing.T) {
			forEach(t, func(t *testing.T, f *fixture) {
				r := newReceiver(t, f.clock, func(int) (int, http.Header) {
					return http.StatusServiceUnavailable, http.Header{"Retry-After": {c.retryAfter}}
				})
				f.point("d", r)
				e := f.engine(r.srv.Client(), delivery.Config{AttemptTimeout: 10 * time.Second})
				m := f.message("d", c.window)
				e.Wake()
				waitFor(t, "first attempt", func() bool { return len(f.attempts(m.ID)) == 1 }, e)
				last := m.DeadlineAt.Add(-10 * time.Second)
				if got := f.get(m.ID); got.State != agentowl.MessagePending || !got.NextAttempt.Equal(last) {
					t.Fatalf("after a Retry-After past the deadline: state %s, next attempt %v; want pending, retried at %v",
						got.State, got.NextAttempt, last)
				}
				f.clock.Advance(last.Sub(f.clock.Now()))
				waitFor(t, "the final attempt", func() bool { return f.get(m.ID).State != agentowl.MessagePending }, e)
				as := f.attempts(m.ID)
				if got := f.get(m.ID); got.State != agentowl.MessageFailed || len(as) != 2 || len(r.received()) != 2 {
					t.Fatalf("state %s after %d attempts (%d received); want failed after 2", got.State, len(as), len(r.received()))
				}
				if final := as[1]; !final.StartedAt.Equal(last) || final.EndedAt.After(m.DeadlineAt) {
					t.Fatalf("final attempt %v–%v, want from %v, ending by the deadline %v", final.StartedAt, final.EndedAt, last, m.DeadlineAt)
				}
			})
		})
	}
}

func TestEngineFailsWhenWindowEnds(t *testing.T) {
	forEach(t, func(t *testing.T, f *fixture) {
		r := newReceiver(t, f.clock, func(int) (int, http.Header) { return 503, nil })
		f.point("d", r)
		e := f.engine(r.srv.Client(), delivery.Config{})
		m := f.message("d", 30*time.Second)
		e.Wake()
		for f.get(m.ID).State == agentowl.MessagePending {
			n := len(f.attempts(m.ID))
			f.clock.Advance(5 * time.Second)
			waitFor(t, "an attempt or the end", func() bool {
				return len(f.attempts(m.ID)) > n || f.get(m.ID).State != agentowl.MessagePending || f.get(m.ID).NextAttempt.After(f.clock.Now())
			}, e)
		}
		got := f.get(m.ID)
		if got.State != agentowl.MessageFailed || got.EndedAt == nil {
			t.Fatalf("state %s", got.State)
		}
		for _, a := range f.attempts(m.ID) {
			if a.StartedAt.After(m.DeadlineAt) {
				t.Fatalf("attempt %d started after the deadline", a.N)
			}
		}
	})
}

func TestEngineDoesNotFollowRedirects(t *testing.T) {
	forEach(t, func(t *testing.T, f *fixture) {
		var hits atomic.Int32
		target := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { hits.Add(1) }))
		defer target.Close()
		r := newReceiver(t, f.clock, func(int) (int, http.Header) {
			return http.StatusFound, http.Header{"Location": {target.URL}}
		})
		f.point("d", r)
		client := r.srv.Client()
		client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
		e := f.engine(client, delivery.Config{})
		m := f.message("d", time.Hour)
		e.Wake()
		waitFor(t, "attempt", func() bool { return len(f.attempts(m.ID)) == 1 }, e)
		if a := f.attempts(m.ID)[0]; a.StatusCode != 302 || f.get(m.ID).State != agentowl.MessagePending || hits.Load() != 0 {
			t.Fatalf("redirect treated as %+v, state %s, target hits %d", a, f.get(m.ID).State, hits.Load())
		}
	})
}

func TestEngineUsesCurrentTargetAndCancelsRemoved(t *testing.T) {
	forEach(t, func(t *testing.T, f *fixture) {
		old := newReceiver(t, f.clock, func(int) (int, http.Header) { return 500, nil })
		repl := newReceiver(t, f.clock, nil)
		f.point("d", old)
		client := old.srv.Client()
		client.Transport.(*http.Transport).TLSClientConfig.RootCAs.AddCert(repl.srv.Certificate())
		e := f.engine(client, delivery.Config{})
		m := f.message("d", time.Hour)
		e.Wake()
		waitFor(t, "first attempt", func() bool { return len(f.attempts(m.ID)) == 1 }, e)
		f.point("d", repl) // the receiver was replaced: new URL and secret
		f.clock.Advance(5 * time.Second)
		waitFor(t, "delivery to the replacement", func() bool { return f.get(m.ID).State == agentowl.MessageDelivered }, e)
		if got := repl.received(); len(got) != 1 || got[0].id != m.ID || got[0].verifyErr != nil || string(got[0].body) != string(m.Body) {
			t.Fatalf("replacement received %+v", got)
		}
		f.point("gone", nil)
		gone := f.message("gone", time.Hour)
		e.Wake()
		waitFor(t, "cancellation", func() bool { return f.get(gone.ID).State == agentowl.MessageCancelled }, e)
	})
}

// TestEngineHoldsPausedDestination: a destination whose resolver says held
// (a paused endpoint) gets no attempt; its message is given back held,
// uncounted, and goes out once released.
func TestEngineHoldsPausedDestination(t *testing.T) {
	forEach(t, func(t *testing.T, f *fixture) {
		r := newReceiver(t, f.clock, nil)
		f.mu.Lock()
		f.targets["p"] = &outbox.Target{Held: true}
		f.mu.Unlock()
		e := f.engine(r.srv.Client(), delivery.Config{})
		m := f.message("p", time.Hour)
		e.Wake()
		waitFor(t, "the message held", func() bool { return f.get(m.ID).NextAttempt.Equal(agentowl.OutboxHeld) }, e)
		if got := f.get(m.ID); got.Attempts != 0 || got.LeaseOwner != "" || len(f.attempts(m.ID)) != 0 || len(r.received()) != 0 {
			t.Fatalf("held message: %+v, attempts %v, received %d", got, f.attempts(m.ID), len(r.received()))
		}
		f.point("p", r)
		ctx := context.Background()
		if err := f.store.Write(ctx, func(tx agentowl.Tx) error {
			_, err := tx.MessageReleaseDestination(ctx, "p", f.clock.Now())
			return err
		}); err != nil {
			t.Fatal(err)
		}
		e.Wake()
		waitFor(t, "delivery after release", func() bool { return f.get(m.ID).State == agentowl.MessageDelivered }, e)
		if got := f.get(m.ID); got.Attempts != 1 {
			t.Fatalf("attempts = %d, want 1", got.Attempts)
		}
	})
}

func TestEngineReclaimsAfterLeaseLapses(t *testing.T) {
	forEach(t, func(t *testing.T, f *fixture) {
		r := newReceiver(t, f.clock, nil)
		f.point("d", r)
		m := f.message("d", time.Hour)
		// A process claims the message and dies before finishing its attempt.
		ctx := context.Background()
		if err := f.store.Write(ctx, func(tx agentowl.Tx) error {
			ms, err := tx.MessageClaim(ctx, agentowl.ClaimParams{Now: f.clock.Now(), LeaseUntil: f.clock.Now().Add(30 * time.Second), Owner: "crashed", Limit: 10})
			if err == nil && len(ms) != 1 {
				err = errors.New("claim did not lease the message")
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		e := f.engine(r.srv.Client(), delivery.Config{Lease: 30 * time.Second})
		e.Wake()
		f.clock.Advance(10 * time.Second)
		if got := r.received(); len(got) != 0 {
			t.Fatalf("attempted while another owner held the lease: %+v", got)
		}
		f.clock.Advance(21 * time.Second)
		waitFor(t, "delivery after the lease lapsed", func() bool { return f.get(m.ID).State == agentowl.MessageDelivered }, e)
		if got := f.get(m.ID); got.Attempts != 2 {
			t.Fatalf("attempts = %d, want 2 (the lost one counts)", got.Attempts)
		}
	})
}

func TestEnginesShareQueueWithoutOverlap(t *testing.T) {
	forEach(t, func(t *testing.T, f *fixture) {
		r := newReceiver(t, f.clock, func(n int) (int, http.Header) {
			if n%3 == 0 {
				return 500, nil
			}
			return 204, nil
		})
		f.point("d", r)
		a := f.engine(r.srv.Client(), delivery.Config{Concurrency: 8})
		b := f.engine(r.srv.Client(), delivery.Config{Concurrency: 8})
		var ids []string
		for range 60 {
			ids = append(ids, f.message("d", time.Hour).ID)
		}
		a.Wake()
		b.Wake()
		f.deliverAll(t, ids, a, b)
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.overlap {
			t.Fatal("two attempts of one message were in flight at once")
		}
		if len(r.got) < len(ids) {
			t.Fatalf("received %d messages for %d events", len(r.got), len(ids))
		}
	})
}

func TestEngineLimitsDelayWithoutDropping(t *testing.T) {
	for name, cfg := range map[string]delivery.Config{
		"destination": {PerHostRate: ratelimit.Limit{Events: 2, Per: time.Minute}},
		"tenant":      {PerTenantRate: ratelimit.Limit{Events: 2, Per: time.Minute}},
	} {
		t.Run(name, func(t *testing.T) { testLimitDelays(t, cfg) })
	}
}

func testLimitDelays(t *testing.T, cfg delivery.Config) {
	forEach(t, func(t *testing.T, f *fixture) {
		r := newReceiver(t, f.clock, nil)
		f.point("d", r)
		e := f.engine(r.srv.Client(), cfg)
		var ms []*agentowl.OutboxMessage
		for range 3 {
			ms = append(ms, f.message("d", time.Hour))
		}
		e.Wake()
		delivered := func() int {
			n := 0
			for _, m := range ms {
				if f.get(m.ID).State == agentowl.MessageDelivered {
					n++
				}
			}
			return n
		}
		var held *agentowl.OutboxMessage
		waitFor(t, "two deliveries and the third given back", func() bool {
			held = nil
			for _, m := range ms {
				if got := f.get(m.ID); got.State == agentowl.MessagePending && got.LeaseOwner == "" {
					held = got
				}
			}
			return delivered() == 2 && held != nil
		})
		if held == nil || held.Attempts != 0 || !held.NextAttempt.After(f.clock.Now()) || len(f.attempts(held.ID)) != 0 {
			t.Fatalf("the limited message: %+v; want pending, uncounted, scheduled later", held)
		}
		if got := len(r.received()); got != 2 {
			t.Fatalf("receiver got %d messages within a limit of 2", got)
		}
		f.clock.Advance(time.Minute)
		waitFor(t, "the delayed delivery", func() bool { return delivered() == 3 }, e)
	})
}

type stubAddrs map[string][]netip.Addr

func (s stubAddrs) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := s[host]; ok {
		return a, nil
	}
	return nil, errors.New("no such host")
}

func TestEngineHostNamesShareTheirAddressLimit(t *testing.T) {
	forEach(t, func(t *testing.T, f *fixture) {
		r := newReceiver(t, f.clock, nil)
		_, port, _ := net.SplitHostPort(r.srv.Listener.Addr().String())
		shared := []netip.Addr{netip.MustParseAddr("203.0.113.7")}
		client := r.srv.Client()
		tr := client.Transport.(*http.Transport)
		tr.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, r.srv.Listener.Addr().String())
		}
		tr.TLSClientConfig.ServerName = "example.com" // in httptest's certificate
		f.mu.Lock()
		f.targets["a"] = &outbox.Target{URL: "https://a.test:" + port + "/hook", Secret: r.secret}
		f.targets["b"] = &outbox.Target{URL: "https://b.test:" + port + "/hook", Secret: r.secret}
		f.mu.Unlock()
		e := f.engine(client, delivery.Config{
			PerHostRate:  ratelimit.Limit{Events: 2, Per: time.Minute},
			AddrResolver: stubAddrs{"a.test": shared, "b.test": shared},
		})
		ms := []*agentowl.OutboxMessage{f.message("a", time.Hour), f.message("b", time.Hour), f.message("b", time.Hour)}
		e.Wake()
		waitFor(t, "two deliveries and one held back", func() bool {
			delivered, held := 0, 0
			for _, m := range ms {
				switch got := f.get(m.ID); {
				case got.State == agentowl.MessageDelivered:
					delivered++
				case got.LeaseOwner == "" && got.Attempts == 0 && got.NextAttempt.After(f.clock.Now()):
					held++
				}
			}
			return delivered == 2 && held == 1
		})
		if got := len(r.received()); got != 2 {
			t.Fatalf("the shared address received %d messages within a limit of 2", got)
		}
	})
}

func TestVerifierLimitsDestinationsAcrossHostNames(t *testing.T) {
	forEach(t, func(t *testing.T, f *fixture) {
		var hits atomic.Int32
		srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			hits.Add(1)
			w.WriteHeader(http.StatusNoContent)
		}))
		defer srv.Close()
		shared := []netip.Addr{netip.MustParseAddr("203.0.113.7")}
		v := delivery.NewVerifier(srv.Client(), f.clock, nil).LimitDestinations(
			ratelimit.New("register", ratelimit.Limit{Events: 2, Per: time.Minute}, f.store, f.clock),
			stubAddrs{"a.test": shared, "b.test": shared})
		_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
		try := func(host string) error {
			return v.Verify(context.Background(), &agentowl.Receiver{Type: "webhook", URL: "https://" + host + ":" + port + "/hook",
				RegistrationID: uuid.NewString(), SigningSecret: webhook.NewSecret()}, uuid.NewString())
		}
		for _, host := range []string{"a.test", "b.test"} {
			if err := try(host); agentowl.ErrorCode(err) != agentowl.ECodeWebhookVerificationFailed {
				t.Fatalf("%s: %v, want a failed verification (the names do not resolve for the dial)", host, err)
			}
		}
		err := try("a.test")
		var ae *agentowl.Error
		if !errors.As(err, &ae) || ae.Code != agentowl.ECodeRateLimited || ae.RetryAfter <= 0 {
			t.Fatalf("third registration to the shared address: %v, want rate_limited with a Retry-After", err)
		}
	})
}

// TestEnginesShareDestinationConcurrency: two engines on one database (two
// serve processes) together keep at most PerHostConcurrency attempts in
// flight to a destination; the attempts that find no free slot are delayed,
// not dropped.
func TestEnginesShareDestinationConcurrency(t *testing.T) {
	forEach(t, func(t *testing.T, f *fixture) {
		gate := make(chan struct{})
		var inflight, most atomic.Int32
		srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			n := inflight.Add(1)
			defer inflight.Add(-1)
			for {
				m := most.Load()
				if n <= m || most.CompareAndSwap(m, n) {
					break
				}
			}
			<-gate
			w.WriteHeader(http.StatusNoContent)
		}))
		t.Cleanup(srv.Close)
		release := releaseAtEnd(t, gate)
		f.mu.Lock()
		f.targets["d"] = &outbox.Target{URL: srv.URL + "/hook", Secret: webhook.NewSecret()}
		f.mu.Unlock()
		cfg := delivery.Config{PerHostConcurrency: 2, Concurrency: 8}
		a, b := f.engine(srv.Client(), cfg), f.engine(srv.Client(), cfg)
		var ids []string
		for range 12 {
			ids = append(ids, f.message("d", time.Hour).ID)
		}
		a.Wake()
		b.Wake()
		// Two attempts hold the two slots, and some other is given back for
		// later (sent away with a turn, or after waiting in vain).
		waitFor(t, "the limit reached and an attempt delayed for want of a slot", func() bool {
			if most.Load() < 2 {
				return false
			}
			for _, id := range ids {
				if m := f.get(id); m.State == agentowl.MessagePending && m.LeaseOwner == "" && m.NextAttempt.After(f.clock.Now()) {
					return true
				}
			}
			return false
		})
		if got := most.Load(); got != 2 {
			t.Fatalf("%d attempts in flight at once to one destination from two engines, limit 2", got)
		}
		release()
		f.deliverAll(t, ids, a, b)
		if got := most.Load(); got > 2 {
			t.Fatalf("%d attempts in flight at once to one destination, limit 2", got)
		}
	})
}

// TestEnginesShareAccountConcurrency: two engines on one database keep at
// most PerAccountConcurrency attempts of one provisioning account (tenant)
// in flight, to all its destinations together; another account's attempts
// go out meanwhile, up to its own limit.
func TestEnginesShareAccountConcurrency(t *testing.T) {
	forEach(t, func(t *testing.T, f *fixture) {
		other := uuid.NewString()
		if err := f.store.Write(context.Background(), func(tx agentowl.Tx) error {
			return tx.TenantCreate(context.Background(), &agentowl.Tenant{ID: other, Name: "t-" + other[:8], CreatedAt: f.clock.Now()})
		}); err != nil {
			t.Fatal(err)
		}
		gate := make(chan struct{})
		var mu sync.Mutex
		tenantOf := map[string]string{} // event ID -> tenant
		inflight, most := map[string]int{}, map[string]int{}
		handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			tenant := tenantOf[r.Header.Get(webhook.HeaderID)]
			inflight[tenant]++
			most[tenant] = max(most[tenant], inflight[tenant])
			mu.Unlock()
			if tenant == f.tenant {
				<-gate
			}
			mu.Lock()
			inflight[tenant]--
			mu.Unlock()
			w.WriteHeader(http.StatusNoContent)
		})
		srv1, srv2 := httptest.NewTLSServer(handler), httptest.NewTLSServer(handler)
		t.Cleanup(srv1.Close)
		t.Cleanup(srv2.Close)
		release := releaseAtEnd(t, gate)
		f.mu.Lock()
		f.targets["one"] = &outbox.Target{URL: srv1.URL + "/hook", Secret: webhook.NewSecret()}
		f.targets["two"] = &outbox.Target{URL: srv2.URL + "/hook", Secret: webhook.NewSecret()}
		f.mu.Unlock()
		client := srv1.Client()
		client.Transport.(*http.Transport).TLSClientConfig.RootCAs.AddCert(srv2.Certificate())
		cfg := delivery.Config{PerHostConcurrency: 8, PerAccountConcurrency: 3, Concurrency: 16}
		a, b := f.engine(client, cfg), f.engine(client, cfg)
		var mine, theirs []string
		mu.Lock()
		for i := range 12 {
			m := f.messageFor(f.tenant, []string{"one", "two"}[i%2], time.Hour)
			mine, tenantOf[m.ID] = append(mine, m.ID), f.tenant
		}
		mu.Unlock()
		a.Wake()
		b.Wake()
		waitFor(t, "three attempts of the account at the receivers", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return inflight[f.tenant] == 3
		}, a, b)
		mu.Lock()
		for i := range 6 {
			m := f.messageFor(other, []string{"one", "two"}[i%2], time.Hour)
			theirs, tenantOf[m.ID] = append(theirs, m.ID), other
		}
		mu.Unlock()
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("the other account's messages:\n%s\nthe blocked account's:\n%s", f.states(theirs), f.states(mine))
			}
		})
		a.Wake()
		b.Wake()
		// The other account's messages are delivered while this one's
		// three slots are held at the receivers. Those that found their
		// own account's three slots taken for a second of real time (a
		// loaded machine) were put back a little later on the test clock:
		// deliverAll moves it to them.
		f.deliverAll(t, theirs, a, b)
		mu.Lock()
		held, mostMine, mostTheirs := inflight[f.tenant], most[f.tenant], most[other]
		mu.Unlock()
		if held != 3 || mostMine != 3 || mostTheirs > 3 {
			t.Fatalf("in flight: %d of the blocked account (most %d), most %d of the other; want 3, 3, at most 3", held, mostMine, mostTheirs)
		}
		release()
		f.deliverAll(t, mine, a, b)
		mu.Lock()
		defer mu.Unlock()
		if most[f.tenant] > 3 || most[other] > 3 {
			t.Fatalf("most in flight per account: %d and %d, limit 3", most[f.tenant], most[other])
		}
	})
}

// leaseCheckingDoer sends through client and records, for every request,
// whether the attempt's deadline (its context's) could pass the point
// LeaseMargin before its message's lease, as recorded in the store, ends.
type leaseCheckingDoer struct {
	f      *fixture
	client *http.Client
	mu     sync.Mutex
	sent   int
	late   []string
}

func (d *leaseCheckingDoer) Do(req *http.Request) (*http.Response, error) {
	m := d.f.get(req.Header.Get(webhook.HeaderID))
	deadline, ok := req.Context().Deadline()
	end := d.f.clock.Now().Add(time.Until(deadline)) // the deadline on the engine's clock
	d.mu.Lock()
	d.sent++
	if !ok || m.LeaseUntil == nil || end.After(m.LeaseUntil.Add(-delivery.LeaseMargin)) {
		d.late = append(d.late, fmt.Sprintf("attempt may run to %v; lease until %v", end, m.LeaseUntil))
	}
	d.mu.Unlock()
	return d.client.Do(req)
}

// TestEngineAttemptEndsBeforeItsLease: an attempt never runs past the point
// LeaseMargin before its lease ends, so a live process cannot have a
// message's attempt in flight when another process may claim it. Here the
// claim is slow to reach its attempt (the lookup of the destination takes
// 16 of the lease's 30 seconds): the message is given back, uncounted, and
// attempted under a fresh lease. Timings that would let an attempt outlast
// its lease are refused.
func TestEngineAttemptEndsBeforeItsLease(t *testing.T) {
	forEach(t, func(t *testing.T, f *fixture) {
		r := newReceiver(t, f.clock, nil)
		f.point("d", r)
		var slow atomic.Bool
		slow.Store(true)
		resolve := func(ctx context.Context, tx agentowl.Tx, dest string) (*outbox.Target, error) {
			if slow.CompareAndSwap(true, false) {
				f.clock.Advance(16 * time.Second)
			}
			return f.resolve(ctx, tx, dest)
		}
		doer := &leaseCheckingDoer{f: f, client: r.srv.Client()}
		log := slog.New(slog.NewTextHandler(io.Discard, nil))
		if _, err := delivery.New(f.store, f.clock, doer, delivery.Config{AttemptTimeout: 10 * time.Second, Lease: 15 * time.Second}, log); err == nil {
			t.Fatal("a lease of 15s for attempts of 10s was accepted")
		}
		e, err := delivery.New(f.store, f.clock, doer, delivery.Config{AttemptTimeout: 10 * time.Second, Lease: 30 * time.Second}, log)
		if err != nil {
			t.Fatal(err)
		}
		e.Handle("*", resolve)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { e.Run(ctx); close(done) }()
		t.Cleanup(func() { cancel(); <-done })
		m := f.message("d", time.Hour)
		e.Wake()
		waitFor(t, "delivery", func() bool { return f.get(m.ID).State == agentowl.MessageDelivered }, e)
		doer.mu.Lock()
		defer doer.mu.Unlock()
		if len(doer.late) > 0 || doer.sent != 1 || len(r.received()) != 1 || len(f.attempts(m.ID)) != 1 {
			t.Fatalf("%d sent, %d received, %d attempts recorded; late: %v", doer.sent, len(r.received()), len(f.attempts(m.ID)), doer.late)
		}
	})
}

// TestEngineRateCountsOnlyAttemptsSent: the rate-token accounting under
// contention. With one attempt in flight allowed per destination, the
// attempts that wait for that slot in vain are put back; they must not
// spend the destination's rate, or the shared count reaches its limit while
// the receiver sees a fraction of it and events stall. At every step the
// count of the window equals what the receiver got.
func TestEngineRateCountsOnlyAttemptsSent(t *testing.T) {
	forEach(t, func(t *testing.T, f *fixture) {
		gate := make(chan struct{})
		var first sync.Once
		var got atomic.Int32
		srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			got.Add(1)
			first.Do(func() { <-gate }) // the first attempt holds the only slot
			w.WriteHeader(http.StatusNoContent)
		}))
		t.Cleanup(srv.Close)
		f.mu.Lock()
		f.targets["d"] = &outbox.Target{URL: srv.URL + "/hook", Secret: webhook.NewSecret()}
		f.mu.Unlock()
		e := f.engine(srv.Client(), delivery.Config{
			Concurrency: 8, PerHostConcurrency: 1, PerHostRate: ratelimit.Limit{Events: 3, Per: time.Minute},
		})
		release := releaseAtEnd(t, gate) // before the engine stops, which waits for the held attempt
		var ids []string
		for range 5 {
			ids = append(ids, f.message("d", time.Hour).ID)
		}
		hostPort := srv.Listener.Addr().String()
		counted := func(window time.Time) (host, addr int64) {
			ctx := context.Background()
			err := f.store.Write(ctx, func(tx agentowl.Tx) (err error) {
				if host, err = tx.CounterAdd(ctx, "deliver-host:host:"+hostPort, window, 0); err != nil {
					return err
				}
				addr, err = tx.CounterAdd(ctx, "deliver-host:addr:127.0.0.1", window, 0)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			return host, addr
		}
		count := func(state func(*agentowl.OutboxMessage) bool) int {
			n := 0
			for _, id := range ids {
				if state(f.get(id)) {
					n++
				}
			}
			return n
		}
		delivered := func(m *agentowl.OutboxMessage) bool { return m.State == agentowl.MessageDelivered }
		putBack := func(m *agentowl.OutboxMessage) bool {
			return m.State == agentowl.MessagePending && m.LeaseOwner == "" && m.NextAttempt.After(f.clock.Now())
		}
		agree := func(step string, window time.Time, sent int) {
			t.Helper()
			if host, addr := counted(window); host != int64(sent) || addr != int64(sent) {
				t.Fatalf("%s: the receiver got %d attempts in the window; the rate counted %d (host:port) and %d (address)", step, sent, host, addr)
			}
		}
		window := f.clock.Now().Truncate(time.Minute)
		e.Wake()

		// One attempt holds the slot; the four others wait for it in vain,
		// or are sent away at once with their turns, and are put back for
		// later.
		waitFor(t, "four attempts put back", func() bool { return got.Load() == 1 && count(putBack) == 4 })
		agree("while the slot was held", window, 1)
		release()
		waitFor(t, "the first delivery", func() bool { return count(delivered) == 1 })

		// Retried (every turn has come: turns follow the slot's pace, a
		// quarter of a second per attempt until one is measured, then the
		// hold measured, here the first attempt's long one), two more fit
		// the rate; the last two wait for the next window.
		// The clock moves to each turn before the end of window as it comes,
		// while no attempt is under way.
		nextTurn := func(window time.Time) {
			var next time.Time
			for _, id := range ids {
				m := f.get(id)
				if m.State == agentowl.MessagePending && m.LeaseOwner != "" {
					return
				}
				if m.State == agentowl.MessagePending && m.NextAttempt.Before(window.Add(time.Minute)) && (next.IsZero() || m.NextAttempt.Before(next)) {
					next = m.NextAttempt
				}
			}
			if next.After(f.clock.Now()) {
				f.clock.Advance(next.Sub(f.clock.Now()))
			}
		}
		waitFor(t, "three deliveries, two held to the next window", func() bool {
			nextTurn(window)
			return count(delivered) == 3 && count(func(m *agentowl.OutboxMessage) bool {
				return m.State == agentowl.MessagePending && m.LeaseOwner == "" && !m.NextAttempt.Before(window.Add(time.Minute))
			}) == 2
		}, e)
		agree("when the window was full", window, 3)

		// The next window, from its start: the turns come well within it.
		f.clock.Advance(window.Add(time.Minute).Sub(f.clock.Now()))
		waitFor(t, "every delivery", func() bool { nextTurn(window.Add(time.Minute)); return count(delivered) == 5 }, e)
		agree("in the next window", window.Add(time.Minute), 2)
		if n := got.Load(); n != 5 {
			t.Fatalf("the receiver got %d attempts for 5 events", n)
		}
	})
}

// Backlog counts how long messages have waited for the engine itself: not
// a message whose attempt is under way (however slow its receiver), but the
// due messages left in the store while the engine has no room to claim
// them. It is zero again once the engine has caught up. (It is real time,
// the engine's pace: the test checks when there is a backlog, not how
// long.) Each message wakes the engine once, as a commit does; the waits
// below do not wake it again, as a wake counts as a message committed.
func TestEngineBacklog(t *testing.T) {
	forEach(t, func(t *testing.T, f *fixture) {
		release := make(chan struct{})
		var once sync.Once
		open := func() { once.Do(func() { close(release) }) }
		t.Cleanup(open)
		r := newReceiver(t, f.clock, func(int) (int, http.Header) { <-release; return http.StatusNoContent, nil })
		f.point("d", r)
		e := f.engine(r.srv.Client(), delivery.Config{Concurrency: 2})
		if d := e.Backlog(); d != 0 {
			t.Fatalf("idle engine: backlog %s", d)
		}
		// Claimed and under way, with room for another: no backlog,
		// however long its receiver takes.
		ms := []*agentowl.OutboxMessage{f.message("d", time.Hour)}
		e.Wake()
		waitFor(t, "the first attempt", func() bool { return len(r.received()) == 1 })
		waitFor(t, "no backlog with one attempt under way", func() bool { return e.Backlog() == 0 })
		// The second takes the last room: its claim took all it asked
		// for, so more may wait in the store, and they count.
		ms = append(ms, f.message("d", time.Hour))
		e.Wake()
		waitFor(t, "the second attempt", func() bool { return len(r.received()) == 2 })
		ms = append(ms, f.message("d", time.Hour))
		e.Wake()
		if d := e.Backlog(); d <= 0 {
			t.Fatalf("engine full, a message waiting: backlog %s, want some", d)
		}
		open()
		ids := []string{ms[0].ID, ms[1].ID, ms[2].ID}
		waitFor(t, "every delivery", func() bool { return f.allDelivered(ids) }, e)
		waitFor(t, "no backlog once caught up", func() bool { return e.Backlog() == 0 })
	})
}
