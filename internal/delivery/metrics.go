package delivery

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentowl/agentowl/internal/store"
)

// Metrics are the engine's Prometheus collectors.
type Metrics struct {
	attempts      *prometheus.CounterVec
	outcomes      *prometheus.CounterVec
	decisionToAck *prometheus.HistogramVec
	deferred      *prometheus.CounterVec
}

func newMetrics() *Metrics {
	return &Metrics{
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
	}
}

// Collectors returns the collectors plus queue gauges read from st.
func (m *Metrics) Collectors(st store.Store) []prometheus.Collector {
	depth := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "agentowl_delivery_queue_depth", Help: "Messages pending delivery.",
	}, func() float64 { n, _ := queueStats(st); return float64(n) })
	oldest := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "agentowl_delivery_oldest_pending_seconds", Help: "Age of the oldest pending message.",
	}, func() float64 { _, age := queueStats(st); return age.Seconds() })
	return []prometheus.Collector{m.attempts, m.outcomes, m.decisionToAck, m.deferred, depth, oldest}
}

func queueStats(st store.Store) (int, time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var n int
	var oldest *time.Time
	_ = st.Read(ctx, func(tx store.Tx) (err error) {
		n, oldest, err = tx.MessageStats(ctx)
		return err
	})
	if oldest == nil {
		return n, 0
	}
	return n, time.Since(*oldest)
}
