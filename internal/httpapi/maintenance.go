package httpapi

import (
	"net/http"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/access"
)

// ---- maintenance (docs/maintenance.md)

type wireLeader struct {
	Replica    string `json:"replica"`
	Since      string `json:"since"`
	LeaseUntil string `json:"lease_until"`
	Self       bool   `json:"self"`
}

type wireJobRun struct {
	Replica    string  `json:"replica"`
	StartedAt  string  `json:"started_at"`
	DurationMS float64 `json:"duration_ms"`
	Outcome    string  `json:"outcome"`
	Error      string  `json:"error,omitempty"`
	Affected   int64   `json:"affected"`
	Runs       int64   `json:"runs"`
	Failures   int64   `json:"failures"`
	LastOKAt   *string `json:"last_ok_at,omitempty"`
}

type wireJob struct {
	Name     string      `json:"name"`
	Interval string      `json:"interval"`
	Late     bool        `json:"late"`
	LastRun  *wireJobRun `json:"last_run,omitempty"`
}

type wireExpectations struct {
	AcceptWithin   string `json:"accept_within"`
	ReportInterval string `json:"report_interval"`
	InputExpiry    bool   `json:"input_expiry"`
}

type wireEngine struct {
	Replica        string `json:"replica"`
	StartedAt      string `json:"started_at"`
	SeenAt         string `json:"seen_at"`
	Live           bool   `json:"live"`
	Attempts       int    `json:"attempts_in_flight"`
	SlotsBusy      int    `json:"slots_busy"`
	SlotsIdle      int    `json:"slots_idle"`
	SlotsStale     int    `json:"slots_without_attempt"`
	SlotsReclaimed int64  `json:"slots_reclaimed"`
}

type wireQueue struct {
	Surface         string  `json:"surface"`
	Pending         int     `json:"pending"`
	OldestCreatedAt string  `json:"oldest_created_at"`
	OldestDueAt     *string `json:"oldest_due_at"`
}

type wireDeliveryHealth struct {
	Engines  []wireEngine `json:"engines"`
	Queues   []wireQueue  `json:"queues"`
	Findings []string     `json:"findings"`
}

type wireMaintenance struct {
	Replica   string             `json:"replica"`
	Enabled   bool               `json:"enabled"`
	Leader    *wireLeader        `json:"leader"`
	Jobs      []wireJob          `json:"jobs"`
	Delivery  wireDeliveryHealth `json:"delivery"`
	Overdue   wireExpectations   `json:"overdue_defaults"`
	Retention map[string]string  `json:"retention"`
}

// durationOrOff shows a duration of an expectation, "off" for zero.
func durationOrOff(d time.Duration) string {
	if d <= 0 {
		return "off"
	}
	return d.String()
}

// maintenanceStatus is GET /api/v1/maintenance: the scheduler's leader,
// every job's latest run and how delivery fares (each engine's report, the
// pending messages by surface and the stall findings), as the database
// records them (any replica answers the same). It is server-wide: admins of the system tenant only.
func (s *Server) maintenanceStatus(r *http.Request, p *access.Principal) (int, any, error) {
	if err := s.access.SystemAdmin(r.Context(), p); err != nil {
		return 0, nil, err
	}
	if s.maintenance == nil {
		return 0, nil, agentowl.Errorf(agentowl.ECodeUnavailable, "This server runs no maintenance scheduler.")
	}
	st, err := s.maintenance.Status(r.Context())
	if err != nil {
		return 0, nil, err
	}
	def := s.maintenance.Defaults()
	ret := s.maintenance.Retention()
	out := wireMaintenance{Replica: st.Self, Enabled: st.Enabled, Jobs: []wireJob{},
		Overdue: wireExpectations{AcceptWithin: durationOrOff(def.AcceptWithin), ReportInterval: durationOrOff(def.ReportInterval),
			InputExpiry: !def.InputExpiryOff},
		Retention: map[string]string{"events": ret.Events.String(), "conversations": ret.Conversations.String(),
			"work": ret.Work.String(), "callbacks": ret.Callbacks.String(), "attention": ret.Attention.String(), "audit": ret.Audit.String()}}
	if l := st.Leader; l != nil {
		out.Leader = &wireLeader{Replica: l.Owner, Since: timestamp(l.Since), LeaseUntil: timestamp(l.Until), Self: l.Self}
	}
	for _, j := range st.Jobs {
		wj := wireJob{Name: j.Name, Interval: j.Interval.String(), Late: j.Late}
		if r := j.LastRun; r != nil {
			wj.LastRun = &wireJobRun{Replica: r.Owner, StartedAt: timestamp(r.StartedAt), DurationMS: float64(r.Duration.Microseconds()) / 1000,
				Outcome: r.Outcome, Error: r.Error, Affected: r.Affected, Runs: r.Runs, Failures: r.Failures, LastOKAt: timestampPtr(r.LastOKAt)}
		}
		out.Jobs = append(out.Jobs, wj)
	}
	out.Delivery = wireDeliveryHealth{Engines: []wireEngine{}, Queues: []wireQueue{}, Findings: append([]string{}, st.Delivery.Findings...)}
	for _, e := range st.Delivery.Engines {
		out.Delivery.Engines = append(out.Delivery.Engines, wireEngine{Replica: e.Owner, StartedAt: timestamp(e.StartedAt),
			SeenAt: timestamp(e.SeenAt), Live: e.Live, Attempts: e.Attempts, SlotsBusy: e.SlotsBusy, SlotsIdle: e.SlotsIdle,
			SlotsStale: e.SlotsStale, SlotsReclaimed: e.SlotsReclaimed})
	}
	for _, q := range st.Delivery.Queues {
		out.Delivery.Queues = append(out.Delivery.Queues, wireQueue{Surface: q.Surface, Pending: q.Pending,
			OldestCreatedAt: timestamp(q.OldestCreated), OldestDueAt: timestampPtr(q.OldestDue)})
	}
	return http.StatusOK, out, nil
}
