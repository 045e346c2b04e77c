// Package delivery is the outbound-message engine: a durable outbox row is
// written in the same transaction as the change that caused it; the engine
// leases due rows (at most one attempt in flight per message, across
// processes and crashes), signs each attempt with Standard Webhooks, sends it
// through the SSRF-safe egress client, and retries with backoff and full
// jitter until the message's deadline. It knows nothing about approval
// requests: an outbox.Resolver turns a message's destination into a URL and
// secret at every attempt. The use-cases write the rows (outbox.Enqueue).
package delivery

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/outbox"
	"github.com/agentowl/agentowl/internal/ratelimit"
	"github.com/agentowl/agentowl/webhook"
)

// Config tunes the engine. Every field has a default.
type Config struct {
	// RetryMinDelay is the first retry's delay bound. Defaults to 5s
	// (AGENTOWL_RETRY_MIN_DELAY).
	RetryMinDelay time.Duration
	// RetryMaxDelay caps the retry delay bound. Defaults to 1h
	// (AGENTOWL_RETRY_MAX_DELAY).
	RetryMaxDelay time.Duration
	// AttemptTimeout bounds one attempt (also by the time left to the
	// deadline and to the end of the message's lease). Defaults to 10s, the
	// most AAP allows (MaxAttemptTimeout).
	AttemptTimeout time.Duration
	// Lease is how long a claimed message stays reserved for its attempt;
	// after a crash another worker may claim it once it lapses. Defaults to
	// 30s; it must be longer than AttemptTimeout + LeaseMargin, so that an
	// attempt always ends before its lease could lapse.
	Lease time.Duration
	// PollInterval is how often the engine looks for due messages when not
	// woken. Defaults to 500ms.
	PollInterval time.Duration
	// Concurrency bounds attempts in flight in this process, across all
	// destinations. Defaults to 256.
	Concurrency int
	// DeliveredGrace is how long a message (and what it is about) is kept
	// after delivery ends. Defaults to 24h.
	DeliveredGrace time.Duration
	// Retention is the minimum time a message is kept after creation.
	// Defaults to 168h.
	Retention time.Duration
	// MaxResponseBytes is how much of a response body is read (and then
	// ignored). Defaults to 64 KiB.
	MaxResponseBytes int64
	// PerTenantRate bounds attempts of one provisioning account (tenant)
	// across every process sharing the database. Defaults to 600,000 per
	// minute.
	PerTenantRate ratelimit.Limit
	// AddrResolver resolves destination hosts for the per-address limits.
	// Defaults to net.DefaultResolver.
	AddrResolver AddrResolver
	// PerHostConcurrency bounds attempts in flight to one destination
	// host:port, and to one resolved address, across every process sharing
	// the database. Defaults to 32.
	PerHostConcurrency int
	// PerHostRate bounds attempts (first ones and retries) to one destination
	// host:port, and to one resolved address, across every process sharing
	// the database. Defaults to 360,000 per minute.
	PerHostRate ratelimit.Limit
	// PerAccountConcurrency bounds attempts in flight of one provisioning
	// account (tenant), to all its destinations together, across every
	// process sharing the database (AAP's per-account limit). Defaults to
	// 64; at most MaxPerHostConcurrency.
	PerAccountConcurrency int
}

func (c Config) withDefaults() Config {
	def := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.RetryMinDelay, 5*time.Second)
	def(&c.RetryMaxDelay, time.Hour)
	def(&c.AttemptTimeout, 10*time.Second)
	def(&c.Lease, 30*time.Second)
	def(&c.PollInterval, 500*time.Millisecond)
	def(&c.DeliveredGrace, 24*time.Hour)
	def(&c.Retention, agentowl.RetentionAfterDecision)
	if c.RetryMaxDelay < c.RetryMinDelay {
		c.RetryMaxDelay = c.RetryMinDelay
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 256
	}
	if c.MaxResponseBytes <= 0 {
		c.MaxResponseBytes = 64 << 10
	}
	if c.PerTenantRate.Per <= 0 {
		c.PerTenantRate = ratelimit.Limit{Events: 600_000, Per: time.Minute}
	}
	if c.AddrResolver == nil {
		c.AddrResolver = net.DefaultResolver
	}
	if c.PerHostConcurrency <= 0 {
		c.PerHostConcurrency = 32
	}
	c.PerHostConcurrency = min(c.PerHostConcurrency, MaxPerHostConcurrency)
	if c.PerHostRate.Per <= 0 {
		c.PerHostRate = ratelimit.Limit{Events: 360_000, Per: time.Minute}
	}
	if c.PerAccountConcurrency <= 0 {
		c.PerAccountConcurrency = 64
	}
	c.PerAccountConcurrency = min(c.PerAccountConcurrency, MaxPerHostConcurrency)
	return c
}

// accountKey is the in-flight slot key of a provisioning account's
// attempts; destination keys start with "host:" or "addr:".
func accountKey(tenantID string) string { return "account:" + tenantID }

// validate refuses timings under which one process could have two attempts
// of a message in flight: an attempt that could outlast its lease.
func (c Config) validate() error {
	if c.AttemptTimeout > MaxAttemptTimeout {
		return fmt.Errorf("delivery: attempt timeout %s is longer than %s, the most AAP allows", c.AttemptTimeout, MaxAttemptTimeout)
	}
	if c.Lease <= c.AttemptTimeout+LeaseMargin {
		return fmt.Errorf("delivery: lease %s must be longer than the attempt timeout %s plus %s", c.Lease, c.AttemptTimeout, LeaseMargin)
	}
	return nil
}

// MaxAttemptTimeout is the longest attempt AAP allows.
const MaxAttemptTimeout = 10 * time.Second

// LeaseMargin is the lease an attempt leaves unused: it must end that long
// before its message's lease (as this process counts it) could lapse, which
// covers closing the connection and the clock difference between replicas
// that compare the lease.
const LeaseMargin = 5 * time.Second

// MaxPerHostConcurrency caps Config.PerHostConcurrency and
// PerAccountConcurrency: each slot is a row in the store.
const MaxPerHostConcurrency = 1024

// Doer sends one HTTP request; the egress client in production.
type Doer interface {
	Do(*http.Request) (*http.Response, error)
}

// Engine delivers outbox messages.
type Engine struct {
	store      agentowl.Store
	clock      agentowl.Clock
	client     Doer
	routes     map[string]outbox.Resolver[agentowl.Tx] // by destination kind; see Handle
	cfg        Config
	log        *slog.Logger
	owner      string
	wake       chan struct{}
	slots      chan struct{} // attempts exchanging with their receiver
	unrecorded chan struct{} // claimed messages whose outcome is not recorded yet
	inflight   sync.WaitGroup
	metrics    *Metrics
	hostRate   *ratelimit.Limiter
	tenantRate *ratelimit.Limiter
	dests      *destinations
	finishes   chan finishReq
	destSlots  *sharedSlots
	lag        lag
	// holding counts the attempts holding destination slots; reclaimed
	// the slots taken back from holders that kept them past maxHold.
	holding   atomic.Int64
	reclaimed atomic.Int64
	started   time.Time
	// heartbeat is the const heartbeat; a test of the report shortens it
	// rather than wait seconds of real time.
	heartbeat time.Duration
	// paced holds the messages this engine sent away with a turn (see
	// sharedSlots.acquire) and when: the turn is this process's estimate,
	// so a stopping engine makes those whose turn has not come due again
	// for whoever delivers next. A turn that has come is of no more use:
	// such entries are dropped when the map grows, never one by one on the
	// attempt's path.
	pacedMu sync.Mutex
	paced   map[string]time.Time
}

// maxHold is longer than any attempt holds its slots: an attempt starts
// only while its message's lease has an attempt timeout and LeaseMargin
// left, and ends by then. A slot busy for longer was lost by its holder.
func (e *Engine) maxHold() time.Duration { return e.cfg.Lease + LeaseMargin }

// heartbeat is how often a running engine records its report
// (agentowl.EngineReport); reports not renewed for forgetReports (an engine
// killed or frozen) are deleted: maintenance status shows a silent engine
// that long.
const (
	heartbeat     = 5 * time.Second
	forgetReports = 10 * time.Minute
)

// New returns an Engine, or an error for a configuration it refuses (see
// Config.Lease). The use-cases that send messages register their
// destination kinds with Handle; then call Run to start delivering.
func New(st agentowl.Store, clock agentowl.Clock, client Doer, cfg Config, log *slog.Logger) (*Engine, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	e := &Engine{
		store: st, clock: clock, client: client, routes: map[string]outbox.Resolver[agentowl.Tx]{}, cfg: cfg, log: log,
		owner:      agentowl.NewID(""),
		started:    clock.Now(),
		heartbeat:  heartbeat,
		paced:      map[string]time.Time{},
		wake:       make(chan struct{}, 1),
		slots:      make(chan struct{}, cfg.Concurrency),
		unrecorded: make(chan struct{}, 2*cfg.Concurrency),
		finishes:   make(chan finishReq, 256),
		hostRate:   ratelimit.New("deliver-host", cfg.PerHostRate, st, clock),
		tenantRate: ratelimit.New("deliver-tenant", cfg.PerTenantRate, st, clock),
		dests:      &destinations{resolver: cfg.AddrResolver, cache: map[string]cachedAddrs{}},
		lag:        lag{starting: map[string]time.Time{}},
	}
	// A slot must outlast any attempt started on it (its wait for a slot
	// included), with room to spare.
	limit := func(key string) int {
		if strings.HasPrefix(key, accountKey("")) {
			return cfg.PerAccountConcurrency
		}
		return cfg.PerHostConcurrency
	}
	e.metrics = newMetrics(e)
	e.destSlots = newSharedSlots(st, clock, log, e.owner, limit, cfg.Lease, cfg.AttemptTimeout+LeaseMargin)
	return e, nil
}

// Metrics returns the engine's Prometheus collectors.
func (e *Engine) Metrics() *Metrics { return e.metrics }

// Wake asks the engine to look for due messages now; call it after
// committing a new message so the first attempt is prompt. Until the
// engine's next claim begins, that message counts in Backlog.
func (e *Engine) Wake() {
	e.lag.woke()
	e.poke()
}

// poke makes the engine look for due messages now.
func (e *Engine) poke() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// Run claims and attempts due messages until ctx ends. Then it stops
// claiming, lets the attempts exchanging with receivers finish (each within
// its timeout) and record their outcome, gives back the claimed messages
// that had not begun (due at once, for another replica or the next start)
// and hands back every destination slot, so nothing it held waits for a
// lease to lapse.
func (e *Engine) Run(ctx context.Context) {
	finishing := make(chan struct{})
	go func() { e.recordFinishes(); close(finishing) }()
	slotsCtx, stopSlots := context.WithCancel(context.WithoutCancel(ctx))
	slotsDone := make(chan struct{})
	go func() {
		e.destSlots.run(slotsCtx, e.maxHold(), func(key string, held time.Duration) {
			e.reclaimed.Add(1)
			e.metrics.slotsReclaimed.Inc()
			e.log.Error("destination slot held without an attempt: reclaimed", "key", key, "held", held.Round(time.Second))
		})
		close(slotsDone)
	}()
	reporting := make(chan struct{})
	go func() { e.report(ctx); close(reporting) }()
	defer func() {
		e.inflight.Wait() // attempts in flight still record their outcome
		e.undeferPaced()  // turns given here end with this engine
		stopSlots()       // and then every destination slot is handed back
		<-slotsDone
		close(e.finishes)
		<-finishing
		<-reporting
		gone := context.Background()
		if err := e.store.Write(gone, func(tx agentowl.Tx) error { return tx.EngineGone(gone, e.owner) }); err != nil {
			e.log.Error("remove delivery engine report", "err", err)
		}
	}()
	for {
		n, err := e.claimAndStart(ctx)
		if err != nil && ctx.Err() == nil {
			e.log.Error("outbox claim failed", "err", err)
		}
		if n > 0 && e.free() > 0 {
			continue // there may be more due right now
		}
		select {
		case <-ctx.Done():
			return
		case <-e.wake:
		case <-e.clock.After(e.cfg.PollInterval):
		}
	}
}

// free is how many more messages may be claimed now: attempts exchanging
// with receivers are bounded by Concurrency, and outcomes waiting to be
// recorded by twice that, so a slow database slows claims rather than
// letting leases lapse.
func (e *Engine) free() int {
	return min(cap(e.slots)-len(e.slots), cap(e.unrecorded)-len(e.unrecorded))
}

// claimAndStart leases as many due messages as there are free slots and
// starts an attempt for each.
func (e *Engine) claimAndStart(ctx context.Context) (int, error) {
	free := e.free()
	if free == 0 {
		return 0, nil
	}
	l := e.newLease()
	e.lag.claiming()
	var msgs []*agentowl.OutboxMessage
	// The claim runs to its end even when the engine stops meanwhile: a
	// claim cut off at its COMMIT may have leased messages that no attempt
	// then gives back, and another process would wait out their lease. The
	// attempts see the stop and give the messages back at once.
	claim := context.WithoutCancel(ctx)
	err := e.store.Write(claim, func(tx agentowl.Tx) (err error) {
		msgs, err = tx.MessageClaim(claim, agentowl.ClaimParams{Now: l.clockStart, LeaseUntil: l.clockStart.Add(l.length), Owner: e.owner, Limit: free})
		return err
	})
	if err != nil {
		e.lag.claimed(nil, true) // what it was to take still waits
		return 0, err
	}
	e.lag.claimed(msgs, len(msgs) == free)
	targets := e.resolveAll(context.WithoutCancel(ctx), msgs) // claimed messages are attempted even at shutdown
	for _, m := range msgs {
		e.slots <- struct{}{}
		e.unrecorded <- struct{}{}
		e.inflight.Add(1)
		// The slot frees once the exchange with the receiver is over; the
		// outcome is then recorded in the next batch while other attempts go
		// out. The message stays leased until its outcome is recorded.
		freeSlot := sync.OnceFunc(func() { <-e.slots; e.poke() }) // a free slot may take the next due message
		go func() {
			defer e.inflight.Done()
			defer func() { <-e.unrecorded }()
			defer freeSlot()
			defer func() {
				// A panic in one attempt (a resolver's or Accept's bug) must
				// not end every other: its message is left leased, and
				// maintenance recovers it when the lease lapses.
				if v := recover(); v != nil {
					e.log.Error("delivery attempt panicked", "event_id", m.ID, "panic", v, "stack", string(debug.Stack()))
				}
			}()
			r := targets[m.Destination]
			e.attempt(context.WithoutCancel(ctx), ctx, m, l, r.target, r.err, freeSlot)
		}()
	}
	return len(msgs), nil
}

// lease is a claimed message's lease as this process counts it: from just
// before the claim, by the engine's clock and by the process's monotonic
// clock, whichever has run further. The lease in the store cannot end
// sooner, and neither a driven clock (tests) nor a step of the wall clock
// makes an attempt outlive it.
type lease struct {
	clockStart, monoStart time.Time
	length                time.Duration
}

func (e *Engine) newLease() lease {
	return lease{clockStart: e.clock.Now(), monoStart: time.Now(), length: e.cfg.Lease}
}

// left is how much of the lease remains at now (by the engine's clock).
func (l lease) left(now time.Time) time.Duration {
	return l.length - max(now.Sub(l.clockStart), time.Since(l.monoStart))
}

type resolved struct {
	target *outbox.Target
	err    error
}

// resolveAll looks up the current target of every destination of a claim
// in one read: a busy destination's messages cost one lookup per claim.
func (e *Engine) resolveAll(ctx context.Context, msgs []*agentowl.OutboxMessage) map[string]resolved {
	out := make(map[string]resolved, len(msgs))
	err := e.store.Read(ctx, func(tx agentowl.Tx) error {
		for _, m := range msgs {
			if _, done := out[m.Destination]; !done {
				t, err := e.resolve(ctx, tx, m.Destination)
				out[m.Destination] = resolved{target: t, err: err}
			}
		}
		return nil
	})
	if err != nil {
		for _, m := range msgs {
			out[m.Destination] = resolved{err: err}
		}
	}
	return out
}

// attempt makes one delivery attempt of a message leased by l to its target
// (nil when the destination no longer exists) and records it; sent is
// called once the exchange with the receiver is over. Once stop ends (the
// engine stops), an attempt that has not begun its exchange gives its
// message back instead.
func (e *Engine) attempt(ctx, stop context.Context, m *agentowl.OutboxMessage, l lease, target *outbox.Target, err error, sent func()) {
	e.lag.started(m.ID)
	start := e.clock.Now()
	a := agentowl.Attempt{EventID: m.ID, N: m.Attempts, StartedAt: start}
	if err != nil {
		e.log.Error("resolve destination", "event_id", m.ID, "err", err)
		a.EndedAt, a.Error = e.clock.Now(), "destination lookup failed"
		e.finish(ctx, m, a, agentowl.MessagePending, start.Add(e.cfg.RetryMinDelay))
		return
	}
	if target == nil {
		a.EndedAt, a.Error = e.clock.Now(), "destination removed"
		e.finish(ctx, m, a, agentowl.MessageCancelled, time.Time{})
		return
	}
	if target.Held {
		e.hold(ctx, m)
		return
	}
	a.URL = target.URL
	if !start.Before(m.DeadlineAt) {
		a.EndedAt, a.Error = start, "retry window ended"
		e.finish(ctx, m, a, agentowl.MessageFailed, time.Time{})
		return
	}
	// Destination limits (host:port and each resolved address), the
	// account's in-flight limit and the tenant's rate delay an attempt;
	// they never drop it. The slots come first: rates are taken only by an
	// attempt that has its slots and will be sent, so they count what
	// receivers see.
	keys := e.dests.keys(ctx, target.URL, start)
	held, ok, turn := e.acquireDestinations(stop, append(slices.Clip(keys), accountKey(m.TenantID)))
	if !ok {
		next := e.clock.Now().Add(max(turn, 250*time.Millisecond))
		switch {
		case stop.Err() != nil:
			next = e.clock.Now() // stopping: another replica may take it at once
		case turn > 0:
			e.pace(m.ID, next)
		}
		e.deferMessage(ctx, m, next)
		return
	}
	// Every path from here hands the slots back, a panic's too; the
	// exchange's end hands them back at once.
	e.holding.Add(1)
	release := sync.OnceFunc(func() { e.releaseDestinations(held); e.holding.Add(-1) })
	defer release()
	// An attempt starts only while its lease outlasts it with LeaseMargin
	// to spare; otherwise (the claim was slow to get here) the message is
	// given back, to be claimed again with a fresh lease.
	now := e.clock.Now()
	if !now.Before(m.DeadlineAt) {
		release()
		a.EndedAt, a.Error = now, "retry window ended"
		e.finish(ctx, m, a, agentowl.MessageFailed, time.Time{})
		return
	}
	if l.left(now)-LeaseMargin < min(e.cfg.AttemptTimeout, m.DeadlineAt.Sub(now)) || stop.Err() != nil {
		release()
		e.deferMessage(ctx, m, now)
		return
	}
	if ok, wait := e.takeRates(ctx, m.TenantID, keys); !ok {
		release()
		e.deferMessage(ctx, m, e.clock.Now().Add(max(wait, 100*time.Millisecond)))
		return
	}
	now = e.clock.Now()
	if !now.Before(m.DeadlineAt) || l.left(now)-LeaseMargin < min(e.cfg.AttemptTimeout, m.DeadlineAt.Sub(now)) {
		// Taking the rate tokens stalled (a slow counter write): the lease
		// or the window no longer has room for a whole attempt. The tokens
		// stay spent; the attempt is not started.
		release()
		e.deferMessage(ctx, m, now)
		return
	}
	status, retryAfter, sendErr := e.send(ctx, m, target, min(e.cfg.AttemptTimeout, m.DeadlineAt.Sub(now), l.left(now)-LeaseMargin))
	release()
	sent()
	a.EndedAt, a.StatusCode = e.clock.Now(), status
	e.metrics.attempts.WithLabelValues(m.Kind, outcomeLabel(status, sendErr)).Inc()
	if sendErr == nil && status >= 200 && status < 300 {
		e.metrics.decisionToAck.WithLabelValues(m.Kind).Observe(a.EndedAt.Sub(m.CreatedAt).Seconds())
		e.finish(ctx, m, a, agentowl.MessageDelivered, time.Time{})
		return
	}
	if sendErr != nil {
		a.Error = sendErr.Error()
	} else {
		a.Error = "HTTP " + strconv.Itoa(status)
	}
	// A redriven message's backoff starts over with its new series.
	next := e.nextAttempt(m, a.EndedAt, max(e.backoff(m.Attempts-m.AttemptBase), retryAfter))
	if !next.Before(m.DeadlineAt) {
		e.finish(ctx, m, a, agentowl.MessageFailed, time.Time{})
		return
	}
	e.finish(ctx, m, a, agentowl.MessagePending, next)
}

// pace records that message id was sent away until next.
func (e *Engine) pace(id string, next time.Time) {
	e.pacedMu.Lock()
	defer e.pacedMu.Unlock()
	e.paced[id] = next
	if len(e.paced) > 100_000 { // bound the memory: forget the turns that have come
		now := e.clock.Now()
		maps.DeleteFunc(e.paced, func(_ string, at time.Time) bool { return !at.After(now) })
	}
}

// undeferPaced makes due now the messages this engine sent away whose turn
// has not come: a turn is this engine's estimate of a destination's pace,
// and the process that delivers next should not wait for it.
func (e *Engine) undeferPaced() {
	now := e.clock.Now()
	e.pacedMu.Lock()
	var ids []string
	for id, at := range e.paced {
		if at.After(now) {
			ids = append(ids, id)
		}
	}
	e.paced = map[string]time.Time{}
	e.pacedMu.Unlock()
	ctx := context.Background()
	for len(ids) > 0 {
		batch := ids[:min(len(ids), 500)]
		ids = ids[len(batch):]
		err := e.store.Write(ctx, func(tx agentowl.Tx) error {
			_, err := tx.MessageUndefer(ctx, batch, now, len(batch))
			return err
		})
		if err != nil {
			e.log.Error("give back paced deliveries", "err", err)
			return
		}
	}
}

// TakeOverLeases frees every message and destination slot lease in the
// store, and makes its deferred messages due, so that what a dead
// predecessor had claimed or paced is delivered now, not when its lease
// lapses or its turn comes. Call it before Run, and only when no other process
// can be delivering from the store (a SQLite file under its serve lock): a
// live holder would then overlap with this engine.
func (e *Engine) TakeOverLeases(ctx context.Context) error {
	// Every lease ends before this far future: "lapsed by then" is all of
	// them.
	horizon := e.clock.Now().Add(100 * 365 * 24 * time.Hour)
	for {
		var msgs, slots, paced int
		err := e.store.Write(ctx, func(tx agentowl.Tx) (err error) {
			if msgs, err = tx.MessageRecoverLapsed(ctx, horizon, 1000); err != nil {
				return err
			}
			if slots, err = tx.SlotRecoverLapsed(ctx, horizon, 1000); err != nil {
				return err
			}
			// Its deferrals too: turns paced by a process that is gone.
			paced, err = tx.MessageUndefer(ctx, nil, e.clock.Now(), 1000)
			return err
		})
		if err != nil || msgs+slots+paced == 0 {
			return err
		}
		e.log.Info("took over delivery leases of a stopped process", "messages", msgs, "slots", slots, "deferred", paced)
	}
}

// report records the engine's report (agentowl.EngineReport) every heartbeat
// until ctx ends, for work-doctor and maintenance status on any replica.
func (e *Engine) report(ctx context.Context) {
	tick := time.NewTicker(e.heartbeat) // real time: housekeeping, not a schedule
	defer tick.Stop()
	for {
		r := e.Report()
		err := e.store.Write(ctx, func(tx agentowl.Tx) error { return tx.EngineReport(ctx, &r, r.SeenAt.Add(-forgetReports)) })
		if err != nil && ctx.Err() == nil {
			e.log.Error("record delivery engine report", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// Report is the engine's view of itself now: its attempts holding slots and
// the slots it holds (account slots: one per attempt).
func (e *Engine) Report() agentowl.EngineReport {
	c := e.destSlots.counts(e.maxHold())["account"]
	return agentowl.EngineReport{Owner: e.owner, StartedAt: e.started, SeenAt: e.clock.Now(), Attempts: int(e.holding.Load()),
		SlotsBusy: c.Busy, SlotsIdle: c.Idle, SlotsStale: c.Stale, SlotsReclaimed: e.reclaimed.Load()}
}

// nextAttempt is when to retry a message whose attempt ended at ended and
// that must wait delay (backoff, or a longer Retry-After). The wait is kept
// while the window allows, and it never lengthens the window: a retry it
// would push past the last moment a full-length attempt still fits before
// the deadline is made at that moment instead. So a far Retry-After (or a
// long backoff) leads to one final attempt that ends by the deadline, not to
// giving up days early. A time at or past the deadline ends delivery.
func (e *Engine) nextAttempt(m *agentowl.OutboxMessage, ended time.Time, delay time.Duration) time.Time {
	next := ended.Add(delay)
	if last := m.DeadlineAt.Add(-e.cfg.AttemptTimeout); next.After(last) && last.After(ended.Add(e.retryFloor())) {
		return last
	}
	return next
}

// send posts the exact body bytes, freshly signed, and reports the status
// and any Retry-After of a 429 or 503.
func (e *Engine) send(ctx context.Context, m *agentowl.OutboxMessage, t *outbox.Target, timeout time.Duration) (int, time.Duration, error) {
	key, err := webhook.ParseSecret(t.Secret)
	if err != nil {
		return 0, 0, errors.New("invalid signing secret")
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.URL, bytes.NewReader(m.Body))
	if err != nil {
		return 0, 0, errors.New("invalid URL")
	}
	for k, vs := range t.Header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "AgentOwl-Webhooks/1")
	key.SetHeaders(req.Header, m.ID, e.clock.Now(), m.Body)
	resp, err := e.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return 0, 0, fmt.Errorf("timed out after %s", timeout)
		}
		return 0, 0, err
	}
	defer resp.Body.Close()
	if t.Accept != nil && resp.StatusCode >= 200 && resp.StatusCode < 300 {
		body, err := io.ReadAll(io.LimitReader(resp.Body, e.cfg.MaxResponseBytes))
		if err != nil {
			return resp.StatusCode, 0, fmt.Errorf("reading the answer: %w", err)
		}
		if err := t.Accept(resp.StatusCode, body); err != nil {
			return resp.StatusCode, 0, fmt.Errorf("answer refused: %w", err)
		}
		return resp.StatusCode, 0, nil
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, e.cfg.MaxResponseBytes))
	var retryAfter time.Duration
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
		retryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), e.clock.Now())
	}
	return resp.StatusCode, retryAfter, nil
}

// parseRetryAfter reads seconds or an HTTP date; anything else is zero.
func parseRetryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil && s >= 0 {
		return time.Duration(min(s, 7*24*3600)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// backoff is exponential with full jitter: uniform in [0, bound] where the
// bound doubles from RetryMinDelay up to RetryMaxDelay, never below a tenth
// of RetryMinDelay so a receiver is not hammered.
func (e *Engine) backoff(attempts int) time.Duration {
	bound := e.cfg.RetryMinDelay
	for i := 1; i < attempts && bound < e.cfg.RetryMaxDelay; i++ {
		bound *= 2
	}
	bound = min(bound, e.cfg.RetryMaxDelay)
	var b [8]byte
	_, _ = rand.Read(b[:])
	d := time.Duration(binary.LittleEndian.Uint64(b[:]) % uint64(bound+1))
	return max(d, e.retryFloor())
}

// retryFloor is the least time between two attempts of one message.
func (e *Engine) retryFloor() time.Duration { return e.cfg.RetryMinDelay / 10 }

// acquireDestinations takes one in-flight slot of every key (in sorted
// order, so two attempts cannot wait on each other), waiting up to a second
// in all (attempts usually take milliseconds), and not past stop. The wait
// is a context, not a timer's channel: it ends every key's wait once over,
// however many keys a wait took. Without them, it reports the turn the
// busy key gave the attempt (sharedSlots.acquire).
func (e *Engine) acquireDestinations(stop context.Context, keys []string) ([]heldSlot, bool, time.Duration) {
	sorted := slices.Sorted(slices.Values(keys))
	ctx, cancel := context.WithTimeout(stop, time.Second) // real time: a wait for a slot, not a schedule
	defer cancel()
	held := make([]heldSlot, 0, len(sorted))
	for _, k := range sorted {
		h, ok, turn := e.destSlots.acquire(ctx, k)
		if !ok {
			e.releaseDestinations(held)
			return nil, false, turn
		}
		held = append(held, h)
	}
	return held, true, 0
}

// takeRates takes one event of the tenant's rate and of every key's rate,
// or none of them: what it took before a refusal is given back. It reports
// how long until the refusing window ends.
func (e *Engine) takeRates(ctx context.Context, tenant string, keys []string) (bool, time.Duration) {
	t, ok, wait := e.tenantRate.Take(ctx, tenant)
	if !ok {
		return false, wait
	}
	taken := []ratelimit.Token{t}
	for _, k := range keys {
		if t, ok, wait = e.hostRate.Take(ctx, k); !ok {
			for _, t := range taken {
				t.Return(ctx)
			}
			return false, wait
		}
		taken = append(taken, t)
	}
	return true, 0
}

func (e *Engine) releaseDestinations(held []heldSlot) {
	for _, h := range held {
		e.destSlots.release(h)
	}
}

// deferMessage gives a claimed message back, uncounted, for later.
func (e *Engine) deferMessage(ctx context.Context, m *agentowl.OutboxMessage, next time.Time) {
	e.metrics.deferred.WithLabelValues(m.Kind).Inc()
	err := e.store.Write(ctx, func(tx agentowl.Tx) error { return tx.MessageDefer(ctx, m.ID, e.owner, m.Attempts, next) })
	if err != nil && !errors.Is(err, agentowl.ErrConflict) {
		e.log.Error("defer delivery", "event_id", m.ID, "err", err)
	}
}

// hold gives a claimed message back, uncounted, held until its destination
// is resumed (outbox.Target.Held).
func (e *Engine) hold(ctx context.Context, m *agentowl.OutboxMessage) {
	err := e.store.Write(ctx, func(tx agentowl.Tx) error { return tx.MessageHold(ctx, m.ID, e.owner, m.Attempts) })
	if err != nil && !errors.Is(err, agentowl.ErrConflict) {
		e.log.Error("hold delivery", "event_id", m.ID, "err", err)
	}
}

// finish records the attempt; a lost lease means another worker owns the
// message now, and this outcome is dropped.
func (e *Engine) finish(ctx context.Context, m *agentowl.OutboxMessage, a agentowl.Attempt, state agentowl.MessageState, next time.Time) {
	p := agentowl.FinishParams{ID: m.ID, Owner: e.owner, Attempt: a, State: state, NextAttempt: next}
	if state != agentowl.MessagePending {
		retain := m.CreatedAt.Add(e.cfg.Retention)
		if grace := a.EndedAt.Add(e.cfg.DeliveredGrace); grace.After(retain) {
			retain = grace
		}
		p.RetainUntil, p.NextAttempt = &retain, a.EndedAt
		e.metrics.outcomes.WithLabelValues(m.Kind, string(state)).Inc()
	}
	done := make(chan error, 1)
	e.finishes <- finishReq{p: p, done: done}
	err := <-done
	if errors.Is(err, agentowl.ErrConflict) {
		e.log.Warn("delivery lease lost; attempt outcome dropped", "event_id", m.ID, "attempt", a.N)
		return
	}
	if err != nil {
		e.log.Error("record delivery attempt", "event_id", m.ID, "err", err)
	}
}

type finishReq struct {
	p    agentowl.FinishParams
	done chan error
}

// recordFinishes writes attempt outcomes in batches: all outcomes that
// arrive while one batch commits go into the next transaction, so a busy
// engine pays one commit (one fsync) per batch rather than per attempt. A
// lost lease fails only its own outcome.
func (e *Engine) recordFinishes() {
	for first := range e.finishes {
		batch := []finishReq{first}
	fill:
		for len(batch) < 128 {
			select {
			case r, ok := <-e.finishes:
				if !ok {
					break fill
				}
				batch = append(batch, r)
			default:
				break fill
			}
		}
		ps := make([]agentowl.FinishParams, len(batch))
		for i, r := range batch {
			ps[i] = r.p
		}
		var lost []bool
		ctx := context.Background()
		err := e.store.Write(ctx, func(tx agentowl.Tx) (err error) {
			lost, err = tx.MessageFinishAll(ctx, ps)
			return err
		})
		for i, r := range batch {
			switch {
			case err != nil:
				r.done <- err
			case lost[i]:
				r.done <- agentowl.ErrConflict
			default:
				r.done <- nil
			}
		}
	}
}

func outcomeLabel(status int, err error) string {
	switch {
	case err != nil:
		return "error"
	case status >= 200 && status < 300:
		return "2xx"
	case status >= 300 && status < 400:
		return "3xx"
	case status >= 400 && status < 500:
		return "4xx"
	}
	return "5xx"
}

// Handle registers the resolver of the destinations of kind: the text
// before the first ':' of a destination ("instance", "endpoint",
// "decision"), or "*" for every destination of a kind with no resolver of
// its own. A destination no resolver takes has no target, which ends its
// message. Register before Run; the use-cases register their own kinds.
func (e *Engine) Handle(kind string, r outbox.Resolver[agentowl.Tx]) { e.routes[kind] = r }

// resolve hands a destination to the resolver of its kind.
func (e *Engine) resolve(ctx context.Context, tx agentowl.Tx, destination string) (*outbox.Target, error) {
	kind, _, _ := strings.Cut(destination, ":")
	r, ok := e.routes[kind]
	if !ok {
		r, ok = e.routes["*"]
	}
	if !ok {
		return nil, nil
	}
	return r(ctx, tx, destination)
}
