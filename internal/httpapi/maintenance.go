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

type wireMaintenance struct {
	Replica   string            `json:"replica"`
	Enabled   bool              `json:"enabled"`
	Leader    *wireLeader       `json:"leader"`
	Jobs      []wireJob         `json:"jobs"`
	Overdue   wireExpectations  `json:"overdue_defaults"`
	Retention map[string]string `json:"retention"`
}

// durationOrOff shows a duration of an expectation, "off" for zero.
func durationOrOff(d time.Duration) string {
	if d <= 0 {
		return "off"
	}
	return d.String()
}

// maintenanceStatus is GET /api/v1/maintenance: the scheduler's leader and
// every job's latest run, as the database records them (any replica
// answers the same). It is server-wide: admins of the system tenant only.
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
	return http.StatusOK, out, nil
}
