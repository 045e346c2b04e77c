package maintenance

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentowl/agentowl/internal/store"
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
	// Now is the time the status was read at.
	Now time.Time
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
	LastRun *store.JobRun
	// Late reports that a live leader exists but the job has not started
	// for three intervals (plus the lease): it is stuck or failing to
	// record.
	Late bool
}

// Status reads the scheduler's status.
func (s *Scheduler) Status(ctx context.Context) (*Status, error) {
	var lease *store.Lease
	var runs []*store.JobRun
	err := s.store.Read(ctx, func(tx store.Tx) (err error) {
		if lease, err = tx.LeaseGet(ctx, LeaseName); errors.Is(err, store.ErrNotFound) {
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
	byName := map[string]*store.JobRun{}
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
	st, err := c.s.Status(ctx)
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
	st, err := s.Status(ctx)
	if err != nil || st.Leader == nil {
		return "", time.Time{}, false, err
	}
	return st.Leader.Owner, st.Leader.Until, true, nil
}

// overdueCountLimit bounds the incidents OverdueCount reads: past it the
// count is a lower bound, which is all a health report needs.
const overdueCountLimit = 1000

// OverdueCount counts a tenant's unresolved work_overdue incidents, up to
// overdueCountLimit per status (work-doctor's doctor.OverdueWork).
func (s *Scheduler) OverdueCount(ctx context.Context, tenantID string) (int, error) {
	n := 0
	err := s.store.Read(ctx, func(tx store.Tx) error {
		for _, status := range []store.AttentionStatus{store.AttentionOpen, store.AttentionAcknowledged} {
			items, err := tx.AttentionList(ctx, store.AttentionListParams{TenantID: tenantID, Status: status, Limit: overdueCountLimit})
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
