package delivery

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentowl/agentowl"
)

// Metrics are the engine's Prometheus collectors.
type Metrics struct {
	engine         *Engine
	attempts       *prometheus.CounterVec
	outcomes       *prometheus.CounterVec
	decisionToAck  *prometheus.HistogramVec
	deferred       *prometheus.CounterVec
	slotsReclaimed prometheus.Counter
}

func newMetrics(e *Engine) *Metrics {
	return &Metrics{
		engine: e,
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentowl_delivery_attempts_total", Help: "Delivery attempts by message kind and result class.",
		}, []string{"kind", "result"}),
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentowl_delivery_outcomes_total", Help: "Messages that ended, by kind and final state.",
		}, []string{"kind", "state"}),
		deferred: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentowl_delivery_deferred_total", Help: "Attempts delayed by a destination limit.",
		}, []string{"kind"}),
		decisionToAck: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "agentowl_delivery_ack_latency_seconds", Help: "Time from message creation (the decision) to acknowledgement.",
			Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 5, 30, 300, 3600, 86400},
		}, []string{"kind"}),
		slotsReclaimed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "agentowl_delivery_slots_reclaimed_total",
			Help: "Destination slots this process took back from a holder that kept them longer than any attempt lasts (a bug).",
		}),
	}
}

// surfaces names the outbox's surfaces (the kinds of destination) in the
// metrics; every one is reported, zero when it has nothing pending.
var surfaces = map[string]string{"instance": "notifications", "endpoint": "handoffs", "decision": "pushes", "other": "other"}

var (
	descDepth = prometheus.NewDesc("agentowl_delivery_queue_depth",
		"Messages pending delivery, by surface (read from the database: every replica reports the same).", []string{"surface"}, nil)
	descOldest = prometheus.NewDesc("agentowl_delivery_oldest_pending_seconds",
		"Age of the oldest pending message, by surface (likewise).", []string{"surface"}, nil)
	descOldestDue = prometheus.NewDesc("agentowl_delivery_oldest_due_seconds",
		"Longest time a pending message has been due without an attempt, by surface (likewise).", []string{"surface"}, nil)
	descSlots = prometheus.NewDesc("agentowl_delivery_slots_held",
		"Destination slots this process holds, by kind of key (host, addr, account) and state (busy: an attempt uses it; "+
			"idle: handed back within a moment; stale: busy longer than any attempt lasts, held without an attempt).",
		[]string{"kind", "state"}, nil)
	descHolding = prometheus.NewDesc("agentowl_delivery_attempts_in_flight",
		"Attempts of this process holding destination slots (each holds one account slot).", nil, nil)
)

// Collectors returns the collectors plus the queue and slot gauges; the
// queue's are read from st at each scrape.
func (m *Metrics) Collectors(st agentowl.Store) []prometheus.Collector {
	return []prometheus.Collector{m.attempts, m.outcomes, m.decisionToAck, m.deferred, m.slotsReclaimed,
		&gauges{store: st, engine: m.engine}}
}

// gauges reads the outbox and the engine's slots once per scrape.
type gauges struct {
	store  agentowl.Store
	engine *Engine
}

func (g *gauges) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descDepth, descOldest, descOldestDue, descSlots, descHolding} {
		ch <- d
	}
}

func (g *gauges) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	now := g.engine.clock.Now()
	var qs []*agentowl.QueueStats
	err := g.store.Read(ctx, func(tx agentowl.Tx) (err error) {
		qs, err = tx.MessageStats(ctx, now)
		return err
	})
	if err == nil { // a store that cannot answer reports no queue rather than an empty one
		byName := map[string]*agentowl.QueueStats{}
		for _, q := range qs {
			byName[surfaces[q.Surface]] = q
		}
		for _, name := range surfaces {
			var depth, oldest, due float64
			if q := byName[name]; q != nil {
				depth, oldest = float64(q.Pending), max(now.Sub(q.OldestCreated), 0).Seconds()
				if q.OldestDue != nil {
					due = max(now.Sub(*q.OldestDue), 0).Seconds()
				}
			}
			ch <- prometheus.MustNewConstMetric(descDepth, prometheus.GaugeValue, depth, name)
			ch <- prometheus.MustNewConstMetric(descOldest, prometheus.GaugeValue, oldest, name)
			ch <- prometheus.MustNewConstMetric(descOldestDue, prometheus.GaugeValue, due, name)
		}
	}
	counts := g.engine.destSlots.counts(g.engine.maxHold())
	for _, kind := range []string{"host", "addr", "account"} {
		c := counts[kind]
		ch <- prometheus.MustNewConstMetric(descSlots, prometheus.GaugeValue, float64(c.Busy-c.Stale), kind, "busy")
		ch <- prometheus.MustNewConstMetric(descSlots, prometheus.GaugeValue, float64(c.Idle), kind, "idle")
		ch <- prometheus.MustNewConstMetric(descSlots, prometheus.GaugeValue, float64(c.Stale), kind, "stale")
	}
	ch <- prometheus.MustNewConstMetric(descHolding, prometheus.GaugeValue, float64(g.engine.holding.Load()))
}
