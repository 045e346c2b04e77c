package maintenance

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentowl/agentowl"
)

// Status is the scheduler as the database records it: the leader and every
// job's latest run, whichever replica ran it. Any replica answers the same.
type Status struct {
	// Self is this process's identity; Enabled is false when it never
	// leads (Config.Disabled).
	Self    string
	Enabled bool
	// Leader is the live leader, or nil when the lease is free or lapsed:
	// no replica runs the jobs now.
	Leader *Leader
	Jobs   []JobStatus
	// Delivery is how delivery fares on every replica.
	Delivery DeliveryStatus
	// Now is the time the status was read at.
	Now time.Time
}

// DeliveryStatus is the delivery engines' reports and the outbox's pending
// messages by surface, with what in them looks like a stall.
type DeliveryStatus struct {
	Engines []EngineStatus
	Queues  []*agentowl.QueueStats
	// Findings name each stall sign; none when delivery
	// is healthy.
	Findings []string
}

// EngineStatus is one engine's latest report; Live is false when it has
// not reported for engineSilence (killed, frozen, or cut off from the
// database: its leases lapse in their own time).
type EngineStatus struct {
	agentowl.EngineReport
	Live bool
}

// engineSilence is how long an engine may go without reporting (it does
// every 5 s) before it counts as gone; stuckAfter is how long a message may
// be due without an attempt before it is reported.
const (
	engineSilence = 30 * time.Second
	stuckAfter    = 5 * time.Minute
)

// deliveryFindings names the stall signs in d.
func deliveryFindings(d DeliveryStatus, now time.Time) []string {
	stalls, silent := engineFindings(d.Engines)
	out := append(stalls, silent...)
	for _, q := range d.Queues {
		if q.OldestDue != nil && now.Sub(*q.OldestDue) > stuckAfter {
			out = append(out, fmt.Sprintf("%s: a pending message has been due for %s without an attempt (over %s): no replica delivers "+
				"(AGENTOWL_DELIVERY=on), or destination limits hold a backlog back (agentowl_delivery_deferred_total).",
				q.Surface, now.Sub(*q.OldestDue).Round(time.Second), stuckAfter))
		}
	}
	return out
}

// engineFindings names the engines' stall signs: slots held without an
// attempt (stalls), and engines gone silent.
func engineFindings(engines []EngineStatus) (stalls, silent []string) {
	for _, e := range engines {
		switch {
		case e.Live && e.SlotsStale > 0:
			stalls = append(stalls, fmt.Sprintf("replica %s holds %d destination slots without an attempt (busy longer than any attempt lasts): "+
				"their destinations get fewer attempts until it reclaims them. This is a bug: report it with the replica's log.", e.Owner, e.SlotsStale))
		case e.SlotsReclaimed > 0:
			stalls = append(stalls, fmt.Sprintf("replica %s reclaimed %d destination slots held without an attempt since it started at %s. "+
				"This is a bug: report it with the replica's log.", e.Owner, e.SlotsReclaimed, e.StartedAt.UTC().Format(time.RFC3339)))
		}
		if !e.Live {
			silent = append(silent, fmt.Sprintf("replica %s stopped reporting at %s without stopping cleanly (killed, frozen or cut off "+
				"from the database): what it had claimed is delivered once its leases lapse.", e.Owner, e.SeenAt.UTC().Format(time.RFC3339)))
		}
	}
	return stalls, silent
}

// Leader is the holder of the leader lease.
type Leader struct {
	Owner string
	// Since is when it took the lease; Until is when the lease lapses
	// unless renewed.
	Since, Until time.Time
	// Self reports whether the leader is this process.
	Self bool
}

// JobStatus is one job: its schedule and its latest run.
type JobStatus struct {
	Name     string
	Interval time.Duration
	// LastRun is nil until the job first ran.
	LastRun *agentowl.JobRun
	// Late reports that a live leader exists but the job has not started
	// for three intervals (plus the lease): it is stuck or failing to
	// record.
	Late bool
}

// Status reads the scheduler's status.
func (s *Scheduler) Status(ctx context.Context) (*Status, error) {
	st, err := s.schedulerStatus(ctx)
	if err != nil {
		return nil, err
	}
	var reports []*agentowl.EngineReport
	err = s.store.Read(ctx, func(tx agentowl.Tx) (err error) {
		if reports, err = tx.EngineList(ctx); err != nil {
			return err
		}
		st.Delivery.Queues, err = tx.MessageStats(ctx, st.Now)
		return err
	})
	if err != nil {
		return nil, err
	}
	st.Delivery.Engines = engineStatuses(reports, st.Now)
	st.Delivery.Findings = deliveryFindings(st.Delivery, st.Now)
	return st, nil
}

// engineStatuses are the engines' reports as of now.
func engineStatuses(reports []*agentowl.EngineReport, now time.Time) []EngineStatus {
	var out []EngineStatus
	for _, r := range reports {
		out = append(out, EngineStatus{EngineReport: *r, Live: now.Sub(r.SeenAt) <= engineSilence})
	}
	return out
}

// schedulerStatus is Status without its delivery part: what the
// scheduler's metrics and its leader check read at every scrape.
func (s *Scheduler) schedulerStatus(ctx context.Context) (*Status, error) {
	var lease *agentowl.Lease
	var runs []*agentowl.JobRun
	err := s.store.Read(ctx, func(tx agentowl.Tx) (err error) {
		if lease, err = tx.LeaseGet(ctx, LeaseName); errors.Is(err, agentowl.ErrNotFound) {
			lease, err = nil, nil
		}
		if err != nil {
			return err
		}
		runs, err = tx.JobList(ctx)
		return err
	})
	if err != nil {
		return nil, err
	}
	now := s.clock.Now()
	st := &Status{Self: s.owner, Enabled: !s.cfg.Disabled, Now: now}
	if lease != nil && now.Before(lease.Until) {
		st.Leader = &Leader{Owner: lease.Owner, Since: lease.AcquiredAt, Until: lease.Until, Self: lease.Owner == s.owner}
	}
	byName := map[string]*agentowl.JobRun{}
	for _, r := range runs {
		byName[r.Name] = r
	}
	for _, j := range s.jobs {
		js := JobStatus{Name: j.name, Interval: j.interval, LastRun: byName[j.name]}
		if st.Leader != nil {
			since := st.Leader.Since
			if js.LastRun != nil && js.LastRun.StartedAt.After(since) {
				since = js.LastRun.StartedAt
			}
			js.Late = now.Sub(since) > 3*j.interval+s.cfg.Lease
		}
		st.Jobs = append(st.Jobs, js)
	}
	return st, nil
}

// metrics are the scheduler's in-process collectors.
type metrics struct {
	leader        prometheus.Gauge
	leaderChanges prometheus.Counter
	runs          *prometheus.CounterVec
	affected      *prometheus.CounterVec
	purged        *prometheus.CounterVec
	recovered     prometheus.Counter
}

func newMetrics() *metrics {
	return &metrics{
		leader: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "agentowl_maintenance_leader", Help: "1 while this process leads the maintenance scheduler.",
		}),
		leaderChanges: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "agentowl_maintenance_leader_acquired_total", Help: "Times this process took the scheduler's leader lease.",
		}),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentowl_maintenance_job_runs_total", Help: "Maintenance job runs in this process, by job and outcome.",
		}, []string{"job", "outcome"}),
		affected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentowl_maintenance_job_affected_total", Help: "Rows or items maintenance jobs in this process changed, by job.",
		}, []string{"job"}),
		purged: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentowl_retention_purged_rows_total", Help: "Rows retention purged in this process, by class.",
		}, []string{"class"}),
		recovered: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "agentowl_maintenance_recovered_leases_total", Help: "Lapsed message and slot leases freed in this process.",
		}),
	}
}

// Collectors returns the scheduler's Prometheus collectors: this process's
// counters and the cluster's job records, read from the database at each
// scrape (agentowl_maintenance_job_last_*), so every replica reports the
// leader's runs.
func (s *Scheduler) Collectors() []prometheus.Collector {
	return []prometheus.Collector{s.m.leader, s.m.leaderChanges, s.m.runs, s.m.affected, s.m.purged, s.m.recovered,
		&jobCollector{s: s}}
}

var (
	descLastRun = prometheus.NewDesc("agentowl_maintenance_job_last_run_timestamp_seconds",
		"Start of the job's latest run (any replica), Unix seconds.", []string{"job"}, nil)
	descLastDuration = prometheus.NewDesc("agentowl_maintenance_job_last_duration_seconds",
		"Duration of the job's latest run (any replica).", []string{"job"}, nil)
	descLastSuccess = prometheus.NewDesc("agentowl_maintenance_job_last_success",
		"1 if the job's latest run ended ok or skipped, 0 if it failed.", []string{"job"}, nil)
	descLastOK = prometheus.NewDesc("agentowl_maintenance_job_last_ok_timestamp_seconds",
		"Start of the job's latest run that ended ok, Unix seconds.", []string{"job"}, nil)
	descHasLeader = prometheus.NewDesc("agentowl_maintenance_has_leader",
		"1 while some replica holds a live scheduler lease.", nil, nil)
)

// jobCollector reads the job records at scrape time.
type jobCollector struct{ s *Scheduler }

func (c *jobCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descLastRun, descLastDuration, descLastSuccess, descLastOK, descHasLeader} {
		ch <- d
	}
}

func (c *jobCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	st, err := c.s.schedulerStatus(ctx)
	if err != nil {
		return // the scrape goes on without them; /readyz reports the database
	}
	leader := 0.0
	if st.Leader != nil {
		leader = 1
	}
	ch <- prometheus.MustNewConstMetric(descHasLeader, prometheus.GaugeValue, leader)
	for _, j := range st.Jobs {
		r := j.LastRun
		if r == nil {
			continue
		}
		ok := 0.0
		if r.Outcome != outcomeError {
			ok = 1
		}
		ch <- prometheus.MustNewConstMetric(descLastRun, prometheus.GaugeValue, float64(r.StartedAt.UnixMilli())/1000, j.Name)
		ch <- prometheus.MustNewConstMetric(descLastDuration, prometheus.GaugeValue, r.Duration.Seconds(), j.Name)
		ch <- prometheus.MustNewConstMetric(descLastSuccess, prometheus.GaugeValue, ok, j.Name)
		if r.LastOKAt != nil {
			ch <- prometheus.MustNewConstMetric(descLastOK, prometheus.GaugeValue, float64(r.LastOKAt.UnixMilli())/1000, j.Name)
		}
	}
}

// Leader reports the live holder of the leader lease and when it lapses
// unless renewed; ok is false when no replica leads (work-doctor's
// doctor.SchedulerStatus).
func (s *Scheduler) Leader(ctx context.Context) (id string, until time.Time, ok bool, err error) {
	st, err := s.schedulerStatus(ctx)
	if err != nil || st.Leader == nil {
		return "", time.Time{}, false, err
	}
	return st.Leader.Owner, st.Leader.Until, true, nil
}

// EngineFindings names the delivery engines' stall signs on every replica
// (work-doctor's doctor.DeliveryEngines): slots held without an attempt
// (stalls), and engines that went silent without stopping cleanly.
func (s *Scheduler) EngineFindings(ctx context.Context) (stalls, silent []string, err error) {
	var reports []*agentowl.EngineReport
	if err := s.store.Read(ctx, func(tx agentowl.Tx) (err error) { reports, err = tx.EngineList(ctx); return err }); err != nil {
		return nil, nil, err
	}
	stalls, silent = engineFindings(engineStatuses(reports, s.clock.Now()))
	return stalls, silent, nil
}

// overdueCountLimit bounds the incidents OverdueCount reads: past it the
// count is a lower bound, which is all a health report needs.
const overdueCountLimit = 1000

// OverdueCount counts a tenant's unresolved work_overdue incidents, up to
// overdueCountLimit per status (work-doctor's doctor.OverdueWork).
func (s *Scheduler) OverdueCount(ctx context.Context, tenantID string) (int, error) {
	n := 0
	err := s.store.Read(ctx, func(tx agentowl.Tx) error {
		for _, status := range []agentowl.AttentionStatus{agentowl.AttentionOpen, agentowl.AttentionAcknowledged} {
			items, err := tx.AttentionList(ctx, agentowl.AttentionListParams{TenantID: tenantID, Status: status, Limit: overdueCountLimit})
			if err != nil {
				return err
			}
			for _, it := range items {
				if it.OverdueRule != "" {
					n++
				}
			}
		}
		return nil
	})
	return n, err
}
