package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// soakConfig is one soak run; runSoak fills it from flags, the test sets it.
type soakConfig struct {
	servers
	Duration time.Duration
	// Kill SIGKILLs a replica (SQLite: the process) at a third of the
	// duration and starts it again; Freeze SIGSTOPs another for FreezeFor
	// at half the duration (PostgreSQL, two replicas or more).
	Kill, Freeze bool
	FreezeFor    time.Duration
	// Term SIGTERMs the busiest replica (SQLite: the process) at two
	// thirds of the duration, under load, requires it to exit within
	// exitLimit, and starts it again.
	Term    bool
	Rate    float64 // operations per second, all receivers together
	Tenants int
	// AssertIsolation runs a baseline with only the fast receiver for the
	// first fifth of the duration, and requires the fast receiver's p99 in
	// the mix to stay within twice the baseline's.
	AssertIsolation bool
	Drain           time.Duration // longest wait for every message after the load
	Out             io.Writer
}

// Limits the soak holds the server to.
const (
	// exitLimit is the attempt timeout (10 s) plus 5 s: a SIGTERMed server
	// finishes its attempts in flight, and none should be left after the
	// drain.
	exitLimit = 15 * time.Second
	// chaosMargin is how far from a kill or freeze a duplicate may be
	// answered and still be put down to it: the attempt timeout plus 5 s.
	chaosMargin    = 15 * time.Second
	maxOpsInFlight = 256
)

// runSoak is `agentowl-bench soak`.
func runSoak(args []string) error {
	fs := flag.NewFlagSet("soak", flag.ExitOnError)
	cfg := soakConfig{Out: os.Stdout, FreezeFor: 40 * time.Second}
	cfg.addFlags(fs, "the soak", 3, "serve replicas (PostgreSQL only)")
	fs.DurationVar(&cfg.Duration, "duration", 2*time.Minute, "how long the load runs")
	fs.BoolVar(&cfg.Kill, "kill", false, "SIGKILL a replica at a third of the duration and start it again")
	fs.BoolVar(&cfg.Freeze, "freeze", false, "SIGSTOP a replica at half the duration for 40s (PostgreSQL, 2+ replicas)")
	fs.BoolVar(&cfg.Term, "term", false, "SIGTERM the busiest replica at two thirds of the duration, under load; it must exit within 15s; start it again")
	fs.Float64Var(&cfg.Rate, "rate", 20, "operations per second overall (each causes a notification, a handoff, or a handoff and a decision push)")
	fs.IntVar(&cfg.Tenants, "tenants", 3, "tenants, each with an instance and an endpoint at every receiver")
	fs.BoolVar(&cfg.AssertIsolation, "assert-isolation", false, "baseline with the fast receiver alone first; fail if its p99 in the mix is over twice the baseline's")
	fs.DurationVar(&cfg.Drain, "drain", 3*time.Minute, "longest wait for every message to be acknowledged after the load")
	return runInterruptible(fs, args, func(ctx context.Context) (*soakResult, error) { return soak(ctx, cfg) })
}

func (c *soakConfig) validate() error {
	switch {
	case c.Binary == "":
		return errors.New("-binary is required")
	case c.Duration <= 0 || c.Rate <= 0 || c.Tenants < 1 || c.Drain <= 0:
		return errors.New("-duration, -rate, -tenants and -drain must be positive")
	case c.DatabaseURL == "" && c.Freeze:
		return errors.New("-freeze needs PostgreSQL replicas: a frozen single process is an outage, not a replica fault")
	case c.DatabaseURL != "" && c.Replicas < 1:
		return errors.New("-replicas must be at least 1")
	case c.Freeze && c.Replicas < 2:
		return errors.New("-freeze needs at least 2 replicas")
	}
	if c.DatabaseURL == "" {
		c.Replicas = 1
	}
	if c.FreezeFor <= 0 {
		c.FreezeFor = 40 * time.Second
	}
	if c.Out == nil {
		c.Out = io.Discard
	}
	return nil
}

// chaosWindow is when a replica was killed (from = to) or frozen.
type chaosWindow struct {
	what     string
	from, to time.Time
}

// soakRun is the state of one run.
type soakRun struct {
	cfg     soakConfig
	rec     *recorder
	rs      *receiverSet
	fleet   *fleet
	ledger  *ledger
	targets [][numBehaviours]*target

	mu        sync.Mutex
	windows   []chaosWindow
	chaosErrs []string
	skipped   atomic.Int64
	// termExits are how long replicas SIGTERMed under load took to exit.
	termExits []time.Duration
}

// soak runs the soak described by cfg and returns its result; an error
// means it could not run (the servers did not start, set-up failed).
func soak(ctx context.Context, cfg soakConfig) (*soakResult, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &soakRun{cfg: cfg, rec: newRecorder(), ledger: &ledger{want: map[subject]expectation{}}}
	site, err := openSite(ctx, "agentowl-soak-", s.rec, cfg.DatabaseURL)
	if err != nil {
		return nil, err
	}
	defer site.close()
	s.rs = site.rs
	s.fleet = &fleet{http: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 15 * time.Second}}
	defer func() {
		for _, p := range s.fleet.replicas {
			p.stop()
		}
	}()
	if s.fleet.replicas, err = cfg.startReplicas(ctx, site, serverEnv(site.caFile)); err != nil {
		return nil, err
	}
	tok, err := os.ReadFile(filepath.Join(s.fleet.replicas[0].dataDir, "operator-token"))
	if err != nil {
		return nil, fmt.Errorf("bootstrap operator token: %w", err)
	}
	setupCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	s.targets, err = setupTenants(setupCtx, s.fleet, s.rs, strings.TrimSpace(string(tok)), cfg.Tenants)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("set-up: %w", err)
	}
	s.say("soak: %s, %d tenants × %d receivers, %s of load at %.1f operations/s%s",
		s.describeServers(), cfg.Tenants, numBehaviours, cfg.Duration, cfg.Rate, s.describeChaos())

	start := time.Now()
	var chaos sync.WaitGroup
	s.startChaos(ctx, start, &chaos)
	ld := &load{f: s.fleet, ledger: s.ledger, run: strconv.FormatInt(start.UnixNano(), 36)}
	s.generate(ctx, ld, start)
	loadEnd := time.Now()
	s.say("load done after %s; waiting for kills and freezes to end", loadEnd.Sub(start).Round(time.Second))
	chaos.Wait()
	drained := s.drain(ctx)
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	res := &soakResult{cfg: cfg, loadTime: loadEnd.Sub(start)}
	if !drained {
		res.pending = s.pendingMessages(ctx)
	}
	s.snapshotMetrics(ctx, res)
	s.terminate(res)
	s.assess(res)
	return finish(cfg.Out, res, s.fleet.replicas)
}

func (s *soakRun) say(format string, args ...any) {
	fmt.Fprintf(s.cfg.Out, format+"\n", args...)
}

func (s *soakRun) describeServers() string {
	if s.cfg.DatabaseURL == "" {
		return "SQLite, one process"
	}
	return fmt.Sprintf("PostgreSQL, %d replicas", s.cfg.Replicas)
}

func (s *soakRun) describeChaos() string {
	var parts []string
	if s.cfg.AssertIsolation {
		parts = append(parts, fmt.Sprintf("fast-only baseline for the first %s", s.cfg.Duration/5))
	}
	if s.cfg.Kill {
		parts = append(parts, fmt.Sprintf("SIGKILL at %s", s.cfg.Duration/3))
	}
	if s.cfg.Freeze {
		parts = append(parts, fmt.Sprintf("SIGSTOP at %s for %s", s.cfg.Duration/2, s.cfg.FreezeFor))
	}
	if s.cfg.Term {
		parts = append(parts, fmt.Sprintf("SIGTERM under load at %s", s.cfg.Duration*2/3))
	}
	if len(parts) == 0 {
		return ""
	}
	return "; " + strings.Join(parts, ", ")
}

// generate starts operations at the configured rate until the duration
// has passed, then waits for those in flight. In the baseline it runs only
// the fast receiver's share of the rate, so that the fast receiver sees
// the same load in both phases.
func (s *soakRun) generate(ctx context.Context, ld *load, start time.Time) {
	end := start.Add(s.cfg.Duration)
	baselineEnd := start
	if s.cfg.AssertIsolation {
		baselineEnd = start.Add(s.cfg.Duration / 5)
	}
	loop := newOpenLoop(&s.skipped)
	ch := &chooser{tenants: s.cfg.Tenants}
	for next := start; next.Before(end); {
		if !sleepCtx(ctx, time.Until(next)) {
			break
		}
		ph, rate := phaseMix, s.cfg.Rate
		if next.Before(baselineEnd) {
			ph, rate = phaseBaseline, s.cfg.Rate/float64(numBehaviours)
		}
		next = loop.next(next, time.Duration(float64(time.Second)/rate))
		b, kind, t := ch.pick(time.Now(), ph)
		tg := s.targets[t][b]
		if loop.start(func() { ld.do(ctx, kind, tg, ph) }) {
			s.ledger.mu.Lock()
			s.ledger.ops[kind]++
			s.ledger.mu.Unlock()
		}
	}
	loop.wait()
}

// startChaos kills and freezes replicas as configured, each on its own
// goroutine, which wg waits for.
func (s *soakRun) startChaos(ctx context.Context, start time.Time, wg *sync.WaitGroup) {
	var killed atomic.Pointer[replica] // not the one to freeze
	if s.cfg.Kill {
		wg.Go(func() {
			if !sleepCtx(ctx, time.Until(start.Add(s.cfg.Duration/3))) {
				return
			}
			victim := s.busiest(ctx, nil)
			killed.Store(victim)
			at := time.Now()
			victim.kill()
			s.addWindow(chaosWindow{what: "SIGKILL " + victim.name, from: at, to: at})
			s.say("%s: SIGKILLed %s, starting it again", at.Sub(start).Round(time.Second), victim.name)
			if err := victim.start(ctx); err != nil {
				s.chaosError(fmt.Errorf("restart after SIGKILL: %w", err))
				return
			}
			s.say("%s: %s is back", time.Since(start).Round(time.Second), victim.name)
		})
	}
	if s.cfg.Term {
		wg.Go(func() {
			if !sleepCtx(ctx, time.Until(start.Add(s.cfg.Duration*2/3))) {
				return
			}
			victim := s.busiest(ctx, nil)
			took, err := victim.terminate(time.Minute)
			if err != nil {
				s.chaosError(fmt.Errorf("SIGTERM under load: %w", err))
				return
			}
			s.mu.Lock()
			s.termExits = append(s.termExits, took)
			s.mu.Unlock()
			s.say("%s: SIGTERMed %s under load: it exited in %s; starting it again", time.Since(start).Round(time.Second), victim.name,
				took.Round(10*time.Millisecond))
			if err := victim.start(ctx); err != nil {
				s.chaosError(fmt.Errorf("restart after SIGTERM: %w", err))
			}
		})
	}
	if s.cfg.Freeze {
		wg.Go(func() {
			if !sleepCtx(ctx, time.Until(start.Add(s.cfg.Duration/2))) {
				return
			}
			victim := s.busiest(ctx, killed.Load())
			victim.up.Store(false)
			at := time.Now()
			if err := victim.signal(syscall.SIGSTOP); err != nil {
				s.chaosError(fmt.Errorf("SIGSTOP: %w", err))
				return
			}
			s.say("%s: SIGSTOPped %s for %s", at.Sub(start).Round(time.Second), victim.name, s.cfg.FreezeFor)
			sleepCtx(ctx, s.cfg.FreezeFor)
			if err := victim.signal(syscall.SIGCONT); err != nil {
				s.chaosError(fmt.Errorf("SIGCONT: %w", err))
				return
			}
			s.addWindow(chaosWindow{what: "SIGSTOP " + victim.name, from: at, to: time.Now()})
			victim.up.Store(true)
			s.say("%s: SIGCONTed %s", time.Since(start).Round(time.Second), victim.name)
		})
	}
}

// busiest returns the live replica other than except with the most
// delivery attempts in flight, by its /metrics, so that a kill or a
// freeze interrupts deliveries; the last such replica when none says.
func (s *soakRun) busiest(ctx context.Context, except *replica) *replica {
	var pick *replica
	most := -1.0
	for _, p := range s.fleet.replicas {
		if p == except || !p.up.Load() {
			continue
		}
		m, _ := p.metrics(ctx, s.fleet.http, "agentowl_delivery_attempts_in_flight")
		if n := m["agentowl_delivery_attempts_in_flight"]; n >= most {
			pick, most = p, n
		}
	}
	if pick == nil {
		pick = s.fleet.replicas[0]
	}
	return pick
}

func (s *soakRun) addWindow(w chaosWindow) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.windows = append(s.windows, w)
}

func (s *soakRun) chaosError(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.chaosErrs = append(s.chaosErrs, err.Error())
}

// outstanding counts the expected messages no receiver has answered 2xx.
func (s *soakRun) outstanding() int {
	acked := s.rec.acked()
	s.ledger.mu.Lock()
	defer s.ledger.mu.Unlock()
	n := 0
	for subj := range s.ledger.want {
		if !acked[subj] {
			n++
		}
	}
	return n
}

// queueDepth reads agentowl_delivery_queue_depth from a live replica (the
// outbox is shared, so any one will do).
func (s *soakRun) queueDepth(ctx context.Context) (float64, bool) {
	for _, p := range s.fleet.replicas {
		if !p.up.Load() {
			continue
		}
		m, err := p.metrics(ctx, s.fleet.http, "agentowl_delivery_queue_depth")
		if v, ok := m["agentowl_delivery_queue_depth"]; err == nil && ok {
			return v, true
		}
	}
	return 0, false
}

// drain waits, at most cfg.Drain, until every expected message has been
// answered 2xx and the outbox has had nothing pending for 2 s (a replica
// just let go after a freeze may still record what it was doing).
func (s *soakRun) drain(ctx context.Context) bool {
	start := time.Now()
	deadline := start.Add(s.cfg.Drain)
	lastSaid := start
	var quietSince time.Time
	for {
		out := s.outstanding()
		depth, known := s.queueDepth(ctx)
		switch {
		case out != 0 || !known || depth != 0:
			quietSince = time.Time{}
		case quietSince.IsZero():
			quietSince = time.Now()
		case time.Since(quietSince) >= 2*time.Second:
			s.say("drained in %s", quietSince.Sub(start).Round(100*time.Millisecond))
			return true
		}
		if time.Now().After(deadline) {
			s.say("drain gave up after %s: %d messages unacknowledged, queue depth %s", s.cfg.Drain, out, depthText(depth, known))
			return false
		}
		if time.Since(lastSaid) >= 10*time.Second {
			s.say("draining: %d messages unacknowledged, queue depth %s", out, depthText(depth, known))
			lastSaid = time.Now()
		}
		if !sleepCtx(ctx, 500*time.Millisecond) {
			return false
		}
	}
}

func depthText(v float64, known bool) string {
	if !known {
		return "unknown"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// pendingMessages describes a few of each tenant's messages still pending
// in the outbox, from the deliveries API, to show where delivery stalled.
func (s *soakRun) pendingMessages(ctx context.Context) []string {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var out []string
	for _, tgs := range s.targets {
		tg := tgs[0]
		var list struct {
			Items []struct {
				ID          string `json:"id"`
				Kind        string `json:"kind"`
				Attempts    int    `json:"attempts"`
				CreatedAt   string `json:"created_at"`
				NextAttempt string `json:"next_attempt_at"`
				LastStatus  int    `json:"last_status"`
				LastError   string `json:"last_error"`
			} `json:"items"`
		}
		if _, _, err := s.fleet.call(ctx, http.MethodGet, "/api/v1/tenants/"+tg.tenant+"/deliveries?state=pending&limit=5", tg.admin, nil, nil, &list); err != nil {
			out = append(out, fmt.Sprintf("%s: %v", tg.tenant, err))
			continue
		}
		for _, m := range list.Items {
			out = append(out, fmt.Sprintf("%s %s %s: created %s, %d attempts, next %s, last status %d %s",
				tg.tenant, m.Kind, m.ID, m.CreatedAt, m.Attempts, m.NextAttempt, m.LastStatus, m.LastError))
		}
	}
	return out
}

// snapshotMetrics reads, from every live replica, the queue depth and the
// engine's slots held and attempts in flight. Slots are handed back 200 ms
// after their last use, so it reads again for up to 5 s until they match.
func (s *soakRun) snapshotMetrics(ctx context.Context, res *soakResult) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		res.replicas = res.replicas[:0]
		settled := true
		for _, p := range s.fleet.replicas {
			rm := replicaMetrics{name: p.name, err: "not up"}
			if p.up.Load() {
				rm.err = ""
				m, err := p.metrics(ctx, s.fleet.http, "agentowl_delivery_queue_depth", "agentowl_delivery_slots_held", "agentowl_delivery_attempts_in_flight")
				if err != nil {
					rm.err = err.Error()
				}
				rm.depth, rm.hasDepth = m["agentowl_delivery_queue_depth"]
				rm.slots, rm.hasSlots = m["agentowl_delivery_slots_held"]
				rm.inFlight, rm.hasInFlight = m["agentowl_delivery_attempts_in_flight"]
			}
			settled = settled && (!rm.hasSlots || !rm.hasInFlight || rm.slots == rm.inFlight)
			res.replicas = append(res.replicas, rm)
		}
		if settled || time.Now().After(deadline) || !sleepCtx(ctx, 250*time.Millisecond) {
			return
		}
	}
}

// terminate SIGTERMs every replica at once and records how long each took
// to exit.
func (s *soakRun) terminate(res *soakResult) {
	var wg sync.WaitGroup
	for i, p := range s.fleet.replicas {
		wg.Go(func() {
			took, err := p.terminate(time.Minute)
			res.replicas[i].exit = took
			if err != nil {
				res.replicas[i].exitErr = err.Error()
			}
		})
	}
	wg.Wait()
}
