// Package maintenance runs AgentOwl's periodic jobs (docs/maintenance.md)
// in exactly one replica at a time: the replica that holds the scheduler's
// leader lease, a row in the database that the leader renews and another
// replica takes over once it lapses. The jobs expire requests, open
// incidents for failed deliveries and for overdue work (never changing the
// work's runtime status), free leases lapsed by dead processes, purge
// records past their retention in bounded batches, and delete retained
// attachment bytes through a hook. Every job's last run is recorded in the
// database, so any replica reports it (Status, /metrics).
package maintenance

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/approval"
	"github.com/agentowl/agentowl/internal/ingress"
	"github.com/agentowl/agentowl/internal/work"
)

// LeaseName is the scheduler's leader lease in the store.
const LeaseName = "scheduler"

// Config tunes the scheduler. Every field has a default.
type Config struct {
	// Disabled keeps this process out of the leadership: it never runs a
	// job, though it still reports their status (AGENTOWL_SCHEDULER=off,
	// for replicas that only serve). Defaults to false.
	Disabled bool
	// Lease is how long the leader's lease lasts unrenewed: when the leader
	// dies, another replica takes over within about this long
	// (AGENTOWL_SCHEDULER_LEASE). Defaults to 15s; at least 3 Ticks.
	Lease time.Duration
	// Tick is how often the leader starts due jobs (and renews its lease
	// once a third of it has passed) and a follower looks for a lapsed
	// lease. Defaults to 1s.
	Tick time.Duration
	// Intervals between the starts of a job's runs, by job name (JobExpiry
	// …); a missing job keeps its default (DefaultIntervals).
	Intervals map[string]time.Duration
	// Overdue holds the server's default expectations of agent work;
	// endpoints may override each (agentowl.EndpointOverdue).
	Overdue Expectations
	// Retention holds how long records are kept.
	Retention Retention
	// PurgeBatch bounds the rows one purge transaction deletes per table.
	// Defaults to 1000.
	PurgeBatch int
	// RetainedBytes deletes expired attachment bytes and releases their
	// quota; nil leaves the job with nothing to do (it reports skipped).
	// The server always wires the attachments service in.
	RetainedBytes RetainedBytes
	// AuditCheckpoints configures the signed checkpoints of the audit
	// chain (auditchain.go).
	AuditCheckpoints AuditCheckpoints
}

// Job names, as Status, /metrics and `agentowl maintenance status` show them.
const (
	// JobExpiry records the expiry of AAP approval requests and of agent
	// work's questions and approvals past their deadline.
	JobExpiry = "request_expiry"
	// JobDeliveryIncidents opens an incident for each handoff or decision
	// push that exhausted its retries.
	JobDeliveryIncidents = "delivery_incidents"
	// JobOverdue opens a work_overdue incident for each work that broke an
	// expectation of its endpoint.
	JobOverdue = "overdue_work"
	// JobLeaseRecovery frees outbox message and destination slot leases
	// whose holder died.
	JobLeaseRecovery = "lease_recovery"
	// JobRetention purges records past their retention.
	JobRetention = "retention"
	// JobRetainedBytes deletes attachment bytes past their retention and
	// releases their quota (RetainedBytes).
	JobRetainedBytes = "retained_bytes"
	// JobConversationWindows ends the SMS conversations whose 24-hour
	// window has passed.
	JobConversationWindows = "conversation_windows"
)

// DefaultIntervals are the jobs' default intervals.
var DefaultIntervals = map[string]time.Duration{
	JobExpiry:            time.Second,
	JobDeliveryIncidents: 5 * time.Second,
	JobOverdue:           time.Minute,
	JobLeaseRecovery:     30 * time.Second,
	JobRetention:         10 * time.Minute,
	JobRetainedBytes:     5 * time.Minute,
	// A conversation shows ended within a minute of its window closing.
	JobConversationWindows: time.Minute,
	JobAuditCheckpoints:    DefaultAuditCheckpointInterval,
}

// Expectations are when agent work counts as overdue, by default: each
// endpoint may set its own (agentowl.EndpointOverdue).
type Expectations struct {
	// AcceptWithin: a first callback is due this long after the handoff
	// was delivered (rule accept_within). Defaults to 5m; Off turns the
	// rule off.
	AcceptWithin time.Duration
	// ReportInterval: while accepted or running, a callback is due at least
	// this often (rule report_interval). Defaults to 30m; Off turns the
	// rule off.
	ReportInterval time.Duration
	// InputExpiryOff turns off the rule that, while needs_input, every
	// request is answered before its expiry (rule input_expiry). Defaults
	// to false: the rule is on.
	InputExpiryOff bool
}

// Off, as an Expectations duration, turns its rule off.
const Off time.Duration = -1

// Retention is how long records are kept after they end (docs/maintenance.md).
// Deliveries keep the AAP's own windows (delivery.Config.Retention and
// DeliveredGrace, recorded on each message), as do AAP requests and
// idempotency keys.
type Retention struct {
	// Events: inbound events, from receipt, once no work refers to them.
	// Defaults to 30 days.
	Events time.Duration
	// Conversations: from their last event, once no event or work refers
	// to them. Defaults to 30 days.
	Conversations time.Duration
	// Work: from its end (completed, failed, cancelled), once its
	// callbacks and attention items are gone. Defaults to 30 days.
	Work time.Duration
	// Callbacks: from the end of their work. Defaults to 30 days.
	Callbacks time.Duration
	// Attention: resolved items of ended work, from their resolution, with
	// their decisions. Defaults to 30 days.
	Attention time.Duration
	// Audit: audit log entries, from when they were recorded. Defaults to
	// 365 days; at least MinAuditRetention.
	Audit time.Duration
}

// MinAuditRetention is the least the audit log is kept.
const MinAuditRetention = 30 * 24 * time.Hour

// RetainedBytes is the hook of retained attachment bytes (attachments,
// issue #13): the retained_bytes job calls it on the leader.
type RetainedBytes interface {
	// DeleteExpired deletes up to limit retained files whose retention
	// ended at or before now, releases the quota they held and reports how
	// many it deleted. The scheduler calls it again while it returns limit.
	DeleteExpired(ctx context.Context, now time.Time, limit int) (int, error)
}

const day = 24 * time.Hour

func (c Config) withDefaults() Config {
	def := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.Lease, 15*time.Second)
	def(&c.Tick, time.Second)
	intervals := map[string]time.Duration{}
	for name, d := range c.Intervals {
		intervals[name] = d // unknown names too: validate refuses them
	}
	for name, d := range DefaultIntervals {
		if intervals[name] <= 0 {
			intervals[name] = d
		}
	}
	c.Intervals = intervals
	for _, e := range []struct {
		v   *time.Duration
		def time.Duration
	}{{&c.Overdue.AcceptWithin, 5 * time.Minute}, {&c.Overdue.ReportInterval, 30 * time.Minute}} {
		switch {
		case *e.v == 0:
			*e.v = e.def
		case *e.v < 0:
			*e.v = 0 // off, as an endpoint's zero is
		}
	}
	def(&c.Retention.Events, 30*day)
	def(&c.Retention.Conversations, 30*day)
	def(&c.Retention.Work, 30*day)
	def(&c.Retention.Callbacks, 30*day)
	def(&c.Retention.Attention, 30*day)
	def(&c.Retention.Audit, 365*day)
	if c.PurgeBatch <= 0 {
		c.PurgeBatch = 1000
	}
	return c
}

func (c Config) validate() error {
	if c.Lease < 3*c.Tick {
		return fmt.Errorf("maintenance: the lease %s must be at least three ticks (%s)", c.Lease, 3*c.Tick)
	}
	if c.Retention.Audit < MinAuditRetention {
		return fmt.Errorf("maintenance: audit retention %s is shorter than the least, %s", c.Retention.Audit, MinAuditRetention)
	}
	for name := range c.Intervals {
		if _, ok := DefaultIntervals[name]; !ok {
			return fmt.Errorf("maintenance: unknown job %q", name)
		}
	}
	return nil
}

// Services are the use-cases whose sweeps the scheduler runs.
type Services struct {
	Approval *approval.Service
	Work     *work.Service
	// Ingress ends idle windowed conversations; nil leaves the job with
	// nothing to do.
	Ingress *ingress.Service
}

// Scheduler runs the jobs while this process holds the leader lease.
type Scheduler struct {
	store agentowl.Store
	clock agentowl.Clock
	cfg   Config
	svc   Services
	log   *slog.Logger
	owner string
	jobs  []*job
	m     *metrics

	mu      sync.Mutex
	leading bool      // this process holds the lease
	until   time.Time // the end of its lease, as recorded
	renewed time.Time // when it last took or renewed it
	running map[string]bool
	wg      sync.WaitGroup
}

// job is one periodic job.
type job struct {
	name     string
	interval time.Duration
	run      func(ctx context.Context) (affected int64, outcome string, err error)
}

// New returns a Scheduler; Run starts it. Services' sweeps must be set.
func New(st agentowl.Store, clock agentowl.Clock, cfg Config, svc Services, log *slog.Logger) (*Scheduler, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if svc.Approval == nil || svc.Work == nil {
		return nil, errors.New("maintenance: the approval and work services are required")
	}
	s := &Scheduler{store: st, clock: clock, cfg: cfg, svc: svc, log: log, owner: agentowl.NewID(""),
		running: map[string]bool{}, m: newMetrics()}
	s.jobs = []*job{
		{name: JobExpiry, run: s.expire},
		{name: JobDeliveryIncidents, run: s.deliveryIncidents},
		{name: JobOverdue, run: s.overdue},
		{name: JobLeaseRecovery, run: s.recoverLeases},
		{name: JobRetention, run: s.retain},
		{name: JobRetainedBytes, run: s.deleteRetainedBytes},
		{name: JobConversationWindows, run: s.endConversationWindows},
		{name: JobAuditCheckpoints, run: s.auditCheckpoints},
	}
	for _, j := range s.jobs {
		j.interval = cfg.Intervals[j.name]
	}
	return s, nil
}

// Retention returns the retention windows in force.
func (s *Scheduler) Retention() Retention { return s.cfg.Retention }

// Leading reports whether this process holds the leader lease now.
func (s *Scheduler) Leading() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.leading && s.clock.Now().Before(s.until)
}

// Run takes part in the leadership and, while leading, starts each job
// when due, until ctx ends; it then waits for the jobs running here and
// hands the lease back so another replica takes over at once.
func (s *Scheduler) Run(ctx context.Context) {
	if s.cfg.Disabled {
		return
	}
	defer s.stop()
	for {
		s.tick(ctx)
		select {
		case <-ctx.Done():
			return
		case <-s.clock.After(s.cfg.Tick):
		}
	}
}

// tick renews or takes the lease and starts the jobs that are due.
func (s *Scheduler) tick(ctx context.Context) {
	if !s.lead(ctx) {
		return
	}
	var runs []*agentowl.JobRun
	if err := s.store.Read(ctx, func(tx agentowl.Tx) (err error) {
		runs, err = tx.JobList(ctx)
		return err
	}); err != nil {
		if ctx.Err() == nil {
			s.log.Error("maintenance: read job records", "err", err)
		}
		return
	}
	last := map[string]time.Time{}
	for _, r := range runs {
		last[r.Name] = r.StartedAt
	}
	now := s.clock.Now()
	for _, j := range s.jobs {
		// The schedule continues from the last run recorded by any
		// replica, so a new leader does not repeat a job just run.
		if at, ok := last[j.name]; ok && now.Before(at.Add(j.interval)) {
			continue
		}
		s.start(ctx, j)
	}
}

// lead takes the lease when it is free or lapsed and renews it once a
// third of it has passed; it reports whether this process leads.
func (s *Scheduler) lead(ctx context.Context) bool {
	now := s.clock.Now()
	s.mu.Lock()
	leading, renewed, until := s.leading, s.renewed, s.until
	s.mu.Unlock()
	if leading && now.Before(until) && now.Sub(renewed) < s.cfg.Lease/3 {
		return true
	}
	var l *agentowl.Lease
	err := s.store.Read(ctx, func(tx agentowl.Tx) (err error) {
		l, err = tx.LeaseGet(ctx, LeaseName)
		return err
	})
	if err != nil && !errors.Is(err, agentowl.ErrNotFound) {
		s.leaseFailed(ctx, err)
		return false
	}
	if l != nil && l.Owner != s.owner && now.Before(l.Until) {
		s.setLeading(false, time.Time{}, time.Time{})
		return false // another replica leads; a read costs less than a write each tick
	}
	err = s.store.Write(ctx, func(tx agentowl.Tx) (err error) {
		l, err = tx.LeaseAcquire(ctx, LeaseName, s.owner, now, now.Add(s.cfg.Lease))
		return err
	})
	if err != nil {
		s.leaseFailed(ctx, err)
		return false
	}
	mine := l.Owner == s.owner
	if mine && !leading {
		s.log.Info("maintenance: this process leads the scheduler", "owner", s.owner)
		s.m.leaderChanges.Inc()
	}
	s.setLeading(mine, now, l.Until)
	return mine
}

// leaseFailed logs a failed read or write of the lease. This process may
// still lead until its lease ends (Leading checks that end); it starts no
// job on this tick.
func (s *Scheduler) leaseFailed(ctx context.Context, err error) {
	if ctx.Err() == nil {
		s.log.Error("maintenance: leader lease", "err", err)
	}
}

func (s *Scheduler) setLeading(leading bool, renewed, until time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.leading, s.renewed, s.until = leading, renewed, until
	if leading {
		s.m.leader.Set(1)
	} else {
		s.m.leader.Set(0)
	}
}

// start runs j in its own goroutine unless it is still running here.
func (s *Scheduler) start(ctx context.Context, j *job) {
	s.mu.Lock()
	if s.running[j.name] {
		s.mu.Unlock()
		return
	}
	s.running[j.name] = true
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		defer func() {
			s.mu.Lock()
			delete(s.running, j.name)
			s.mu.Unlock()
		}()
		s.runJob(ctx, j)
	}()
}

// runJob runs j once and records the run.
func (s *Scheduler) runJob(ctx context.Context, j *job) {
	started := s.clock.Now()
	mono := time.Now()
	affected, outcome, err := j.run(ctx)
	if ctx.Err() != nil {
		return // stopped midway: the next leader runs it again
	}
	r := &agentowl.JobRun{Name: j.name, Owner: s.owner, StartedAt: started, Duration: time.Since(mono), Outcome: outcome, Affected: affected}
	if err != nil {
		r.Outcome, r.Error = outcomeError, err.Error()
		s.log.Error("maintenance job failed", "job", j.name, "err", err)
	} else if affected > 0 {
		s.log.Info("maintenance job", "job", j.name, "affected", affected, "duration", r.Duration)
	}
	s.m.runs.WithLabelValues(j.name, r.Outcome).Inc()
	s.m.affected.WithLabelValues(j.name).Add(float64(affected))
	if err := s.store.Write(ctx, func(tx agentowl.Tx) error { return tx.JobRecord(ctx, r) }); err != nil && ctx.Err() == nil {
		s.log.Error("maintenance: record job run", "job", j.name, "err", err)
	}
}

// Job outcomes.
const (
	outcomeOK      = "ok"
	outcomeError   = "error"
	outcomeSkipped = "skipped"
)

// stop waits for the jobs running here and hands the lease back.
func (s *Scheduler) stop() {
	s.wg.Wait()
	s.mu.Lock()
	leading := s.leading
	s.mu.Unlock()
	if !leading {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.store.Write(ctx, func(tx agentowl.Tx) error {
		return tx.LeaseRelease(ctx, LeaseName, s.owner, s.clock.Now())
	}); err != nil {
		s.log.Error("maintenance: hand back the leader lease", "err", err)
	}
	s.setLeading(false, time.Time{}, time.Time{})
}

// RunJob runs the job called name once in this process now, leader or
// not, and records it: for tests and benchmarks (every job is safe to run
// in several replicas at once; the leader only keeps them from repeating
// each other's work).
func (s *Scheduler) RunJob(ctx context.Context, name string) (*agentowl.JobRun, error) {
	for _, j := range s.jobs {
		if j.name == name {
			s.runJob(ctx, j)
			var runs []*agentowl.JobRun
			err := s.store.Read(ctx, func(tx agentowl.Tx) (err error) {
				runs, err = tx.JobList(ctx)
				return err
			})
			for _, r := range runs {
				if r.Name == name {
					return r, err
				}
			}
			return nil, err
		}
	}
	return nil, fmt.Errorf("maintenance: no job %q", name)
}
