// Package admission bounds how long a write waits before the store takes
// it. Each surface (approval requests created, decisions, runtime callbacks,
// inbound events) has a queue: at most Concurrency of its writes run at
// once, the others wait in line, and a write that would wait longer than
// MaxWait is refused at once with 503 overloaded and Retry-After, so that
// latency stays bounded when writes arrive faster than the store commits
// them, and the caller (an AAP client, an SDK, a provider's webhook) retries
// later instead of piling onto a queue that only grows.
//
// A queue also sees the delivery engine's backlog (Config.Backlog): a write
// is admitted only while the backlog and its own wait together stay within
// MaxWait, so that what a decision or an event starts (its delivery) is
// bounded end to end, not only its write. While the engine lags, new writes
// would take the CPU and the database it needs to catch up.
//
// A refused write was never started: nothing of it is stored, and a retry
// with the same idempotency key (or event ID) is safe. An admitted write
// runs to its end; the queue never abandons one it took.
package admission

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentowl/agentowl"
)

// The surfaces that have a queue; they label the metrics.
const (
	Requests  = "requests"  // AAP approval requests created (POST /v1/requests)
	Decisions = "decisions" // operator decisions on approvals and Needs attention items
	Callbacks = "callbacks" // runtime callbacks
	Events    = "events"    // inbound events on /in/… (webhook, Cloudflare email)
	// Providers are the SMS and voice webhooks of Twilio-compatible
	// providers. Twilio does not send a refused webhook again unless its
	// URL asks it to (a connection override), so a refusal would lose the
	// message: these writes wait up to ProviderMaxWait for their turn,
	// within Twilio's 15-second read timeout, and are not refused for the
	// delivery backlog.
	Providers = "provider_events"
)

// Surfaces lists every surface with a queue.
var Surfaces = []string{Requests, Decisions, Callbacks, Events, Providers}

// Defaults of Config.
const (
	DefaultMaxWait     = 250 * time.Millisecond
	DefaultConcurrency = 64
	// RetryAfter is the Retry-After of a refused write: the queue drains
	// within MaxWait, so the next second finds room unless the overload
	// goes on.
	RetryAfter = time.Second
	// ProviderMaxWait is the Providers queue's wait, unless MaxWait is
	// longer.
	ProviderMaxWait = 10 * time.Second
)

// Config configures every surface's queue.
type Config struct {
	// MaxWait is the longest a write waits for its turn; one that would
	// wait longer is refused. Defaults to DefaultMaxWait.
	MaxWait time.Duration
	// Concurrency is how many writes of a surface run at once in this
	// process. Defaults to DefaultConcurrency.
	Concurrency int
	// Backlog, when set, reports how long the delivery engine is behind:
	// how long the oldest message it has not begun to attempt has waited
	// for it (delivery.Engine.Backlog). A write's wait for its turn is
	// bounded by MaxWait less the backlog, and a write is refused at once
	// while the backlog is MaxWait or more. Nil (no engine in this
	// process) counts no backlog.
	Backlog func() time.Duration
}

func (c Config) withDefaults() Config {
	if c.MaxWait <= 0 {
		c.MaxWait = DefaultMaxWait
	}
	if c.Concurrency <= 0 {
		c.Concurrency = DefaultConcurrency
	}
	return c
}

// MaxWait is the longest a write of surface waits for its turn under cfg.
func MaxWait(cfg Config, surface string) time.Duration {
	cfg = cfg.withDefaults()
	if surface == Providers {
		return max(cfg.MaxWait, ProviderMaxWait)
	}
	return cfg.MaxWait
}

// Set holds one queue per surface and their metrics.
type Set struct {
	queues   map[string]*Queue
	rejected *prometheus.CounterVec
	behind   *prometheus.CounterVec
	waiting  *prometheus.GaugeVec
}

// New returns the queues of every surface; clock times the waits.
func New(cfg Config, clock agentowl.Clock) *Set {
	cfg = cfg.withDefaults()
	if clock == nil {
		clock = agentowl.SystemClock{}
	}
	s := &Set{queues: map[string]*Queue{},
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentowl_admission_rejected_total",
			Help: "Writes refused with 503 overloaded because they would have waited longer than the admission queue's maximum wait (delivery backlog included), by surface.",
		}, []string{"surface"}),
		behind: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentowl_admission_backlog_rejected_total",
			Help: "Of agentowl_admission_rejected_total, the writes refused because the delivery engine's backlog left no wait: the backlog was the admission queue's maximum wait or more, by surface.",
		}, []string{"surface"}),
		waiting: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "agentowl_admission_waiting",
			Help: "Writes waiting in the admission queue for their turn, by surface.",
		}, []string{"surface"}),
	}
	for _, name := range Surfaces {
		cfg := cfg
		if name == Providers {
			cfg.MaxWait, cfg.Backlog = MaxWait(cfg, name), nil
		}
		s.queues[name] = &Queue{surface: name, cfg: cfg, clock: clock, slots: make(chan struct{}, cfg.Concurrency),
			rejected: s.rejected.WithLabelValues(name), behind: s.behind.WithLabelValues(name), waitingGauge: s.waiting.WithLabelValues(name)}
	}
	return s
}

// Queue returns surface's queue; it panics on a surface not in Surfaces (a
// defect in the caller's wiring).
func (s *Set) Queue(surface string) *Queue {
	q, ok := s.queues[surface]
	if !ok {
		panic("admission: no queue for surface " + surface)
	}
	return q
}

// Collectors are the metrics to register on /metrics.
func (s *Set) Collectors() []prometheus.Collector {
	return []prometheus.Collector{s.rejected, s.behind, s.waiting}
}

// Queue admits the writes of one surface.
type Queue struct {
	surface      string
	cfg          Config
	clock        agentowl.Clock
	slots        chan struct{} // one token per running write
	waiting      atomic.Int64
	serviceNanos atomic.Int64 // moving average of a write's duration
	rejected     prometheus.Counter
	behind       prometheus.Counter
	waitingGauge prometheus.Gauge
}

// Admit waits for the write's turn and returns the function that ends it
// (call it once, when the write is done), or an *agentowl.Error with code
// overloaded when the write would wait longer than its budget, or ctx's
// error when the caller went away first.
//
// MaxWait bounds what a write spends queued, in this queue and then, for
// what it hands to the delivery engine, in the engine's backlog: the
// budget of its wait is MaxWait less the backlog. None is left (the write
// is refused at once, even with a turn free) while the engine is MaxWait
// or more behind. A write that finds a turn free runs at once; one that
// must wait is admitted only if it can also be done within the budget: it
// is refused at once when the writes already waiting, at the average pace
// of the last writes, and its own write (that average) need longer, and
// once its budget less that average passes when its turn has not come by
// then (the pace changed, or none is known yet).
func (q *Queue) Admit(ctx context.Context) (func(), error) {
	budget := q.cfg.MaxWait
	if q.cfg.Backlog != nil {
		if budget -= q.cfg.Backlog(); budget <= 0 {
			q.behind.Inc()
			return nil, q.refuse()
		}
	}
	select {
	case q.slots <- struct{}{}:
		return q.started(), nil
	default:
	}
	service := q.serviceNanos.Load()
	budget -= time.Duration(service)
	ahead := q.waiting.Load() + 1
	if est := time.Duration(service * ahead / int64(cap(q.slots))); est > budget {
		return nil, q.refuse()
	}
	q.waiting.Add(1)
	q.waitingGauge.Inc()
	defer func() {
		q.waiting.Add(-1)
		q.waitingGauge.Dec()
	}()
	select {
	case q.slots <- struct{}{}:
		return q.started(), nil
	case <-q.clock.After(budget):
		// The turn may have come together with the deadline: take it
		// rather than refuse a write that can run now.
		select {
		case q.slots <- struct{}{}:
			return q.started(), nil
		default:
		}
		return nil, q.refuse()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Waiting reports how many writes wait for their turn, so that a test can
// tell that its write has queued.
func (q *Queue) Waiting() int { return int(q.waiting.Load()) }

func (q *Queue) started() func() {
	start := q.clock.Now()
	var done atomic.Bool
	return func() {
		if !done.CompareAndSwap(false, true) {
			return
		}
		d := int64(q.clock.Now().Sub(start))
		if d < 0 {
			d = 0
		}
		// An exponentially weighted average with weight 1/8: a few slow
		// writes move it, one outlier does not.
		for {
			old := q.serviceNanos.Load()
			next := old + (d-old)/8
			if old == 0 {
				next = d
			}
			if q.serviceNanos.CompareAndSwap(old, next) {
				break
			}
		}
		<-q.slots
	}
}

func (q *Queue) refuse() error {
	q.rejected.Inc()
	return &agentowl.Error{Code: agentowl.ECodeOverloaded, RetryAfter: RetryAfter,
		Message: "The server is taking writes more slowly than they arrive; retry after the Retry-After delay."}
}
