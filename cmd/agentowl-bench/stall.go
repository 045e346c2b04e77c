package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// stallConfig is one run of `agentowl-bench stall`, issue 25's
// reproduction: a receiver that answers every notification 200 after a
// delay, N decided requests for it, a destination concurrency, and
// another tenant's requests and deliveries to a fast receiver meanwhile.
type stallConfig struct {
	servers
	Requests    int
	Delay       time.Duration
	Concurrency int
	OtherRate   float64 // the other tenant's create+decide operations per second
	Clients     int
	Out         io.Writer
}

// runStall is `agentowl-bench stall`.
func runStall(args []string) error {
	fs := flag.NewFlagSet("stall", flag.ExitOnError)
	cfg := stallConfig{Out: os.Stdout}
	cfg.addFlags(fs, "the run", 1, "serve replicas (PostgreSQL only); API calls go to them in turn")
	fs.IntVar(&cfg.Requests, "requests", 800, "the slow tenant's requests, created and then approved")
	fs.DurationVar(&cfg.Delay, "delay", 200*time.Millisecond, "how long the slow receiver takes to answer each notification 200")
	fs.IntVar(&cfg.Concurrency, "concurrency", 4, "AGENTOWL_DELIVERY_DESTINATION_CONCURRENCY")
	fs.Float64Var(&cfg.OtherRate, "other-rate", 20, "the other tenant's create+decide operations per second while the slow tenant's backlog drains (0: none)")
	fs.IntVar(&cfg.Clients, "clients", 32, "concurrent clients creating and approving the slow tenant's requests")
	return runInterruptible(fs, args, func(ctx context.Context) (*stallResult, error) { return stall(ctx, cfg) })
}

func (c *stallConfig) validate() error {
	switch {
	case c.Binary == "":
		return errors.New("-binary is required")
	case c.Requests < 1 || c.Delay <= 0 || c.Concurrency < 1 || c.Clients < 1 || c.OtherRate < 0:
		return errors.New("-requests, -delay, -concurrency and -clients must be positive, -other-rate not negative")
	case c.DatabaseURL != "" && c.Replicas < 1:
		return errors.New("-replicas must be at least 1")
	case c.DatabaseURL == "" && c.Replicas > 1:
		return errors.New("-replicas needs -database-url: SQLite is one process")
	}
	if c.DatabaseURL == "" {
		c.Replicas = 1
	}
	if c.Out == nil {
		c.Out = io.Discard
	}
	return nil
}

// bound is the shortest time the slow receiver can take all the requests
// in: Requests attempts of Delay each, Concurrency at a time.
func (c *stallConfig) bound() time.Duration {
	return time.Duration(c.Requests) * c.Delay / time.Duration(c.Concurrency)
}

// The tenants' receivers and their paths' tenant numbers (pathOf).
const (
	slowRecv, otherRecv = recvSlow200, recvFast
	slowT, otherT       = 0, 1
)

// stallRun is the state of one run.
type stallRun struct {
	cfg      stallConfig
	rec      *recorder
	rs       *receiverSet
	replicas []*replica
	http     *http.Client
	run      string // makes idempotency keys unique to the run
	start    time.Time

	slow, other *target
	// One fleet per kind of call, all over the same replicas, so that
	// each counts its own 503 refusals.
	slowCreate, slowDecide, otherCreate, otherDecide *fleet

	slowWant map[subject]bool
	// When, and from which replica, the slow tenant's decisions and the
	// other tenant's calls were answered 503.
	slowRefusals, otherRefusals refusalLog

	mu        sync.Mutex
	otherOps  []otherOp
	otherFail int
	otherErrs []string
	skipped   atomic.Int64
}

// otherOp is one of the other tenant's operations that succeeded: the
// message it leads to expect, and when its decision call began and was
// answered.
type otherOp struct {
	subj              subject
	decided, answered time.Time
}

// stall runs cfg and returns its result; an error means it could not run.
func stall(ctx context.Context, cfg stallConfig) (*stallResult, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &stallRun{cfg: cfg, rec: newRecorder(), run: strconv.FormatInt(time.Now().UnixNano(), 36), slowWant: map[subject]bool{}}
	s.rec.slowDelay = cfg.Delay
	site, err := openSite(ctx, "agentowl-stall-", s.rec, cfg.DatabaseURL)
	if err != nil {
		return nil, err
	}
	defer site.close()
	s.rs = site.rs
	// The later of two settings of a variable is the one a process sees
	// (os/exec keeps the last).
	env := append(serverEnv(site.caFile), fmt.Sprintf("AGENTOWL_DELIVERY_DESTINATION_CONCURRENCY=%d", cfg.Concurrency))
	s.http = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2*cfg.Clients + 64}, Timeout: 30 * time.Second}
	defer s.terminate()
	if s.replicas, err = cfg.startReplicas(ctx, site, env); err != nil {
		return nil, err
	}
	newFleet := func(log *refusalLog) *fleet {
		c := *s.http
		if log != nil {
			log.next, c.Transport = c.Transport, log
		}
		return &fleet{replicas: s.replicas, http: &c}
	}
	s.slowCreate, s.slowDecide = newFleet(nil), newFleet(&s.slowRefusals)
	s.otherCreate, s.otherDecide = newFleet(&s.otherRefusals), newFleet(&s.otherRefusals)
	if err := s.setup(ctx, newFleet(nil)); err != nil {
		return nil, fmt.Errorf("set-up: %w", err)
	}
	s.say("stall: %s; slow tenant: %d requests to a receiver answering 200 after %s, destination concurrency %d "+
		"(bound %.1f/s, %s); other tenant: %g operations/s to a fast receiver; %d clients",
		s.describeServers(), cfg.Requests, cfg.Delay, cfg.Concurrency, float64(cfg.Concurrency)/cfg.Delay.Seconds(),
		cfg.bound().Round(100*time.Millisecond), cfg.OtherRate, cfg.Clients)

	ids, create := s.createSlow(ctx)
	create.print("create")
	if create.errs > 0 {
		return nil, fmt.Errorf("%d of the slow tenant's requests were not created: %v", create.errs, create.firstErr)
	}
	for _, id := range ids {
		s.slowWant[subject{msgNotification, "request.resolved " + id}] = true
	}

	s.start = time.Now()
	stopOther := make(chan struct{})
	var otherLoad sync.WaitGroup
	otherLoad.Go(func() { s.otherLoad(ctx, stopOther) })
	decide := s.approveSlow(ctx, ids)
	decide.print("decide")
	deadline := s.start.Add(3*cfg.bound() + time.Minute)
	s.waitSlow(ctx, deadline)
	close(stopOther)
	otherLoad.Wait()
	s.waitOther(ctx, 30*time.Second)
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	res := s.assess()
	s.drain(ctx, 30*time.Second)
	s.readMetrics(ctx, res)
	res.check()
	return finish(cfg.Out, res, s.replicas)
}

func (s *stallRun) say(format string, args ...any) {
	fmt.Fprintf(s.cfg.Out, format+"\n", args...)
}

func (s *stallRun) describeServers() string {
	if s.cfg.DatabaseURL == "" {
		return "SQLite, one process"
	}
	if s.cfg.Replicas == 1 {
		return "PostgreSQL, one replica"
	}
	return fmt.Sprintf("PostgreSQL, %d replicas", s.cfg.Replicas)
}

// setup creates the two tenants, each with one instance at its receiver.
func (s *stallRun) setup(ctx context.Context, f *fleet) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	tok, err := os.ReadFile(filepath.Join(s.replicas[0].dataDir, "operator-token"))
	if err != nil {
		return fmt.Errorf("bootstrap operator token: %w", err)
	}
	for _, tt := range []struct {
		name string
		recv behaviour
		t    int
		into **target
	}{{"slow", slowRecv, slowT, &s.slow}, {"other", otherRecv, otherT, &s.other}} {
		admin, prov, err := createTenant(ctx, f, strings.TrimSpace(string(tok)), tt.name)
		if err != nil {
			return err
		}
		tg := &target{tenant: tt.name, admin: admin, recv: tt.recv}
		if err := tg.provisionInstance(ctx, f, s.rs, tt.t, prov); err != nil {
			return fmt.Errorf("%s: %w", tt.name, err)
		}
		*tt.into = tg
	}
	return nil
}

// createRequest creates one AAP request of tg through f.
func (s *stallRun) createRequest(ctx context.Context, f *fleet, tg *target, key string) (string, error) {
	var req struct {
		ID string `json:"id"`
	}
	_, _, err := f.call(ctx, http.MethodPost, "/v1/requests", tg.instanceCred,
		map[string]any{"tool": "issue_refund", "timeout": "30m", "arguments": map[string]any{"key": key}},
		map[string]string{"Idempotency-Key": s.run + "-" + key}, &req)
	return req.ID, err
}

// approve approves request id of tg through f; every 503 overloaded is
// counted by f and sent again after its Retry-After.
func (s *stallRun) approve(ctx context.Context, f *fleet, tg *target, id string) error {
	_, uncertain, err := f.call(ctx, http.MethodPost, "/api/v1/tenants/"+tg.tenant+"/approvals/"+id+"/decision", tg.admin,
		map[string]any{"decision": "approve"}, nil, nil)
	// A decision sent again after its answer was lost finds itself made.
	var ae *apiError
	if err != nil && uncertain && errors.As(err, &ae) && ae.status == http.StatusConflict {
		return nil
	}
	return err
}

// createSlow creates the slow tenant's requests with Clients clients.
func (s *stallRun) createSlow(ctx context.Context) ([]string, *result) {
	ids := make([]string, s.cfg.Requests)
	res := phase(s.cfg.Clients, s.cfg.Requests, func(_, i int) error {
		ctx, cancel := context.WithTimeout(ctx, opTimeout)
		defer cancel()
		var err error
		ids[i], err = s.createRequest(ctx, s.slowCreate, s.slow, "slow-"+strconv.Itoa(i))
		return err
	})
	return ids, res
}

// approveSlow approves the slow tenant's requests as fast as Clients
// clients can.
func (s *stallRun) approveSlow(ctx context.Context, ids []string) *result {
	return phase(s.cfg.Clients, len(ids), func(_, i int) error {
		ctx, cancel := context.WithTimeout(ctx, opTimeout)
		defer cancel()
		return s.approve(ctx, s.slowDecide, s.slow, ids[i])
	})
}

// otherLoad creates and approves the other tenant's requests at OtherRate
// until stop is closed, then waits for the operations in flight.
func (s *stallRun) otherLoad(ctx context.Context, stop <-chan struct{}) {
	if s.cfg.OtherRate <= 0 {
		return
	}
	loop := newOpenLoop(&s.skipped)
	defer loop.wait()
	gap := time.Duration(float64(time.Second) / s.cfg.OtherRate)
	for n, next := 0, time.Now(); ; n++ {
		t := time.NewTimer(time.Until(next))
		select {
		case <-stop:
			t.Stop()
			return
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		next = loop.next(next, gap)
		loop.start(func() { s.otherOp(ctx, n) })
	}
}

// otherOp is one of the other tenant's operations: create, then approve.
func (s *stallRun) otherOp(ctx context.Context, n int) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	fail := func(err error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.otherFail++
		if len(s.otherErrs) < 3 {
			s.otherErrs = append(s.otherErrs, err.Error())
		}
	}
	id, err := s.createRequest(ctx, s.otherCreate, s.other, "other-"+strconv.Itoa(n))
	if err != nil {
		fail(fmt.Errorf("create: %w", err))
		return
	}
	decided := time.Now()
	if err := s.approve(ctx, s.otherDecide, s.other, id); err != nil {
		fail(fmt.Errorf("decide: %w", err))
		return
	}
	op := otherOp{subj: subject{msgNotification, "request.resolved " + id}, decided: decided, answered: time.Now()}
	s.mu.Lock()
	s.otherOps = append(s.otherOps, op)
	s.mu.Unlock()
}

// slowAcked counts the slow tenant's requests the slow receiver answered
// 2xx.
func (s *stallRun) slowAcked() int {
	n := 0
	for subj := range s.rec.acked() {
		if s.slowWant[subj] {
			n++
		}
	}
	return n
}

// waitSlow waits until the slow receiver has acknowledged every request,
// or deadline, saying how far it got every 5 s; it reports whether all
// arrived.
func (s *stallRun) waitSlow(ctx context.Context, deadline time.Time) bool {
	next := s.start.Add(5 * time.Second)
	for {
		got := s.slowAcked()
		if got == s.cfg.Requests {
			return true
		}
		if time.Now().After(deadline) {
			s.say("gave up waiting at %s: the slow receiver has %d of %d", time.Since(s.start).Round(time.Second), got, s.cfg.Requests)
			return false
		}
		if !time.Now().Before(next) {
			s.mu.Lock()
			ops := len(s.otherOps)
			s.mu.Unlock()
			s.say("%4s: slow receiver %4d/%d acknowledged, in flight at most %d; other tenant %d operations, %d refused 503",
				next.Sub(s.start).Round(time.Second), got, s.cfg.Requests, s.rec.peakInFlight(slowRecv), ops,
				s.otherCreate.refused.Load()+s.otherDecide.refused.Load())
			next = next.Add(5 * time.Second)
		}
		if !sleepCtx(ctx, 50*time.Millisecond) {
			return false
		}
	}
}

// waitOther waits, at most limit, until the fast receiver has answered
// every one of the other tenant's requests 2xx.
func (s *stallRun) waitOther(ctx context.Context, limit time.Duration) {
	s.mu.Lock()
	ops := slices.Clone(s.otherOps)
	s.mu.Unlock()
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); {
		acked, all := s.rec.acked(), true
		for _, op := range ops {
			all = all && acked[op.subj]
		}
		if all || !sleepCtx(ctx, 100*time.Millisecond) {
			return
		}
	}
}

// drain waits, at most limit, until the outbox has nothing pending.
func (s *stallRun) drain(ctx context.Context, limit time.Duration) {
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); {
		m, err := s.replicas[0].metrics(ctx, s.http, "agentowl_delivery_queue_depth")
		if v, ok := m["agentowl_delivery_queue_depth"]; err == nil && ok && v == 0 {
			return
		}
		if !sleepCtx(ctx, 250*time.Millisecond) {
			return
		}
	}
}

// terminate SIGTERMs every replica at once and waits for them to exit.
func (s *stallRun) terminate() {
	var wg sync.WaitGroup
	for _, p := range s.replicas {
		wg.Go(func() {
			if p.running() {
				_, _ = p.terminate(time.Minute)
			}
		})
	}
	wg.Wait()
}

// refusalLog is an http.RoundTripper that records when, and from which
// server, each 503 answer came.
type refusalLog struct {
	next http.RoundTripper
	mu   sync.Mutex
	at   []refusal
}

type refusal struct {
	at   time.Time
	host string
}

func (l *refusalLog) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := l.next.RoundTrip(req)
	if err == nil && resp.StatusCode == http.StatusServiceUnavailable {
		l.mu.Lock()
		l.at = append(l.at, refusal{at: time.Now(), host: req.URL.Host})
		l.mu.Unlock()
	}
	return resp, err
}

// describe says where and when (from start) the refusals came, e.g.
// "replica-2 ×8, +0.84s…+1.31s after the first approval"; "" for none.
func (l *refusalLog) describe(start time.Time, replicas []*replica) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.at) == 0 {
		return ""
	}
	by := map[string]int{}
	first, last := l.at[0].at, l.at[0].at
	for _, r := range l.at {
		name := r.host
		for _, p := range replicas {
			if strings.TrimPrefix(p.url, "http://") == r.host {
				name = p.name
			}
		}
		by[name]++
		if r.at.Before(first) {
			first = r.at
		}
		if r.at.After(last) {
			last = r.at
		}
	}
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(by)) {
		parts = append(parts, fmt.Sprintf("%s ×%d", name, by[name]))
	}
	return fmt.Sprintf("%s, %+.2fs…%+.2fs after the first approval", strings.Join(parts, ", "), first.Sub(start).Seconds(), last.Sub(start).Seconds())
}

// stallResult is what a run found.
type stallResult struct {
	cfg stallConfig

	// The slow tenant.
	createRefused, decRefused  int64
	decRefusedWhen             string // where and when, for the report
	delivered                  int
	elapsed                    time.Duration // first approval → last first 2xx
	attempts, duplicates, peak int
	// The other tenant.
	otherOps, otherFail, otherSkipped   int
	otherErrs                           []string
	otherCreateRefused, otherDecRefused int64
	otherRefusedWhen                    string
	otherDelivered                      int
	otherLatency, otherCall             []time.Duration
	resent                              int64 // calls sent again after a lost connection or another 5xx
	replicas                            []stallMetrics
	verdict
}

// stallMetrics is what one replica's /metrics said after the drain.
type stallMetrics struct {
	name                                string
	err                                 string
	slots                               map[string]float64 // by state, summed over kinds
	inFlight, oldestDue, depth          float64
	reclaimed, admissionRefused, behind float64
	deferred                            float64 // attempts sent away (a busy destination's turn, a rate)
}

// tally is what the receivers got of a set of subjects: how many were
// answered 2xx, each one's first 2xx, the attempts, and the duplicates
// (a message answered 2xx more than once, or a subject answered 2xx under
// more than one webhook-id).
type tally struct {
	first      map[subject]time.Time
	attempts   int
	duplicates int
}

func tallyOf(msgs map[string]message, want func(subject) bool) tally {
	t := tally{first: map[subject]time.Time{}}
	for _, m := range msgs {
		if !want(m.subj) {
			continue
		}
		t.attempts += len(m.attempts)
		acks := m.acks()
		if len(acks) == 0 {
			continue
		}
		t.duplicates += len(acks) - 1
		if f, ok := t.first[m.subj]; ok {
			t.duplicates++
			if acks[0].Before(f) {
				t.first[m.subj] = acks[0]
			}
		} else {
			t.first[m.subj] = acks[0]
		}
	}
	return t
}

// assess compares what the receivers got with what was sent.
func (s *stallRun) assess() *stallResult {
	msgs, problems := s.rec.snapshot()
	res := &stallResult{cfg: s.cfg, verdict: verdict{problems: problems},
		createRefused: s.slowCreate.refused.Load(), decRefused: s.slowDecide.refused.Load(),
		otherCreateRefused: s.otherCreate.refused.Load(), otherDecRefused: s.otherDecide.refused.Load(),
		peak:           s.rec.peakInFlight(slowRecv),
		decRefusedWhen: s.slowRefusals.describe(s.start, s.replicas), otherRefusedWhen: s.otherRefusals.describe(s.start, s.replicas)}
	for _, f := range []*fleet{s.slowCreate, s.slowDecide, s.otherCreate, s.otherDecide} {
		res.resent += f.lost.Load()
	}
	slow := tallyOf(msgs, func(subj subject) bool { return s.slowWant[subj] })
	res.delivered, res.attempts, res.duplicates = len(slow.first), slow.attempts, slow.duplicates
	var last time.Time
	for _, at := range slow.first {
		if at.After(last) {
			last = at
		}
	}
	res.elapsed = last.Sub(s.start)

	s.mu.Lock()
	ops := slices.Clone(s.otherOps)
	res.otherOps, res.otherFail, res.otherSkipped = len(ops)+s.otherFail, s.otherFail, int(s.skipped.Load())
	res.otherErrs = slices.Clone(s.otherErrs)
	s.mu.Unlock()
	want := map[subject]bool{}
	for _, op := range ops {
		want[op.subj] = true
	}
	other := tallyOf(msgs, func(subj subject) bool { return want[subj] })
	res.duplicates += other.duplicates
	for _, op := range ops {
		if at, ok := other.first[op.subj]; ok {
			res.otherDelivered++
			res.otherLatency = append(res.otherLatency, max(at.Sub(op.decided), 0))
			res.otherCall = append(res.otherCall, op.answered.Sub(op.decided))
		}
	}
	return res
}

// readMetrics reads every replica's slots, attempts in flight, oldest due
// message and admission refusals. Slots are handed back 200 ms after their
// last use, so it reads again for up to 5 s until each replica holds no
// more slots than it has attempts in flight.
func (s *stallRun) readMetrics(ctx context.Context, res *stallResult) {
	names := []string{"agentowl_delivery_slots_held", "agentowl_delivery_attempts_in_flight", "agentowl_delivery_oldest_due_seconds",
		"agentowl_delivery_queue_depth", "agentowl_delivery_slots_reclaimed_total", "agentowl_delivery_deferred_total",
		"agentowl_admission_rejected_total", "agentowl_admission_backlog_rejected_total"}
	for deadline := time.Now().Add(5 * time.Second); ; {
		res.replicas = res.replicas[:0]
		settled := true
		for _, p := range s.replicas {
			sm := stallMetrics{name: p.name, slots: map[string]float64{}}
			samples, err := p.samples(ctx, s.http, names...)
			if err != nil {
				sm.err = err.Error()
			}
			held := 0.0
			for _, x := range samples {
				switch x.name {
				case "agentowl_delivery_slots_held":
					sm.slots[x.labels["state"]] += x.value
					held += x.value
				case "agentowl_delivery_attempts_in_flight":
					sm.inFlight += x.value
				case "agentowl_delivery_oldest_due_seconds":
					sm.oldestDue = max(sm.oldestDue, x.value)
				case "agentowl_delivery_queue_depth":
					sm.depth += x.value
				case "agentowl_delivery_slots_reclaimed_total":
					sm.reclaimed += x.value
				case "agentowl_delivery_deferred_total":
					sm.deferred += x.value
				case "agentowl_admission_rejected_total":
					sm.admissionRefused += x.value
				case "agentowl_admission_backlog_rejected_total":
					sm.behind += x.value
				}
			}
			settled = settled && held == sm.inFlight
			res.replicas = append(res.replicas, sm)
		}
		if settled || time.Now().After(deadline) || !sleepCtx(ctx, 250*time.Millisecond) {
			return
		}
	}
}

// check records the failed assertions: the slow tenant's requests all
// delivered, never more attempts in flight at its receiver than the
// destination concurrency, and the other tenant's operations neither
// refused nor failed and all delivered.
func (r *stallResult) check() {
	n := r.cfg.Requests
	if r.delivered < n {
		r.fail("the slow receiver acknowledged %d of %d requests", r.delivered, n)
	}
	if r.peak > r.cfg.Concurrency {
		r.fail("the slow receiver had %d attempts in flight at once, over the destination concurrency %d", r.peak, r.cfg.Concurrency)
	}
	if refused := r.otherCreateRefused + r.otherDecRefused; refused > 0 {
		r.fail("the other tenant's calls were refused 503 %d times (%d creations, %d decisions)", refused, r.otherCreateRefused, r.otherDecRefused)
	}
	if r.otherFail > 0 {
		r.fail("%d of the other tenant's operations failed, e.g. %s", r.otherFail, strings.Join(r.otherErrs, "; "))
	}
	if ok := r.otherOps - r.otherFail; r.otherDelivered < ok {
		r.fail("the fast receiver acknowledged %d of the other tenant's %d decided requests", r.otherDelivered, ok)
	}
}

func paren(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}

// print writes the report.
func (r *stallResult) print(w io.Writer) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	bound := float64(r.cfg.Concurrency) / r.cfg.Delay.Seconds()
	rate := 0.0
	if r.elapsed > 0 {
		rate = float64(r.delivered) / r.elapsed.Seconds()
	}
	p("")
	p("slow tenant:  delivered %d/%d in %.2fs (first approval → last arrival): %.1f/s, bound %.1f/s (%.0f%%); "+
		"max in flight at the receiver %d (limit %d); %d attempts; duplicates %d",
		r.delivered, r.cfg.Requests, r.elapsed.Seconds(), rate, bound, 100*rate/bound, r.peak, r.cfg.Concurrency, r.attempts, r.duplicates)
	p("              refused 503: %d decisions%s, %d creations (each sent again after Retry-After)", r.decRefused, paren(r.decRefusedWhen), r.createRefused)
	p("other tenant: %d operations (%d failed, %d not started: %d in flight already), refused 503: %d (%d creations, %d decisions)%s; delivered %d",
		r.otherOps, r.otherFail, r.otherSkipped, maxOpsInFlight, r.otherCreateRefused+r.otherDecRefused, r.otherCreateRefused, r.otherDecRefused,
		paren(r.otherRefusedWhen), r.otherDelivered)
	if len(r.otherLatency) > 0 {
		p("              decision→ack p50 %s  p99 %s  max %s; the decision call p50 %s  p99 %s",
			ms2(percentile(r.otherLatency, 0.5)), ms2(percentile(r.otherLatency, 0.99)), ms2(percentile(r.otherLatency, 1)),
			ms2(percentile(r.otherCall, 0.5)), ms2(percentile(r.otherCall, 0.99)))
	}
	if r.resent > 0 {
		p("calls sent again after a lost connection or another 5xx: %d", r.resent)
	}
	for _, m := range r.replicas {
		if m.err != "" {
			p("%s: metrics: %s", m.name, m.err)
			continue
		}
		p("%s after the drain: slots held busy %g idle %g stale %g, attempts in flight %g, oldest due %gs, queue depth %g, slots reclaimed %g; "+
			"attempts deferred %g; admission refused %g writes (%g for the delivery backlog)",
			m.name, m.slots["busy"], m.slots["idle"], m.slots["stale"], m.inFlight, m.oldestDue, m.depth, m.reclaimed, m.deferred, m.admissionRefused, m.behind)
	}
	r.printVerdict(p)
}
