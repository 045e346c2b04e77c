package httpapi

import (
	"net/http"

	"github.com/agentowl/agentowl/internal/access"
	"github.com/agentowl/agentowl/internal/doctor"
)

// The tenant health report of `agentowl work-doctor` (docs/operating.md).

type wireFinding struct {
	Check    string `json:"check"`
	Severity string `json:"severity"`
	Subject  string `json:"subject"`
	Message  string `json:"message"`
	Command  string `json:"command"`
}

type wireReport struct {
	Tenant    string `json:"tenant"`
	CheckedAt string `json:"checked_at"`
	// Status is error or warning when a finding has that severity, else ok.
	Status string `json:"status"`
	// Counts holds the number of findings of each severity.
	Counts   map[string]int `json:"counts"`
	Findings []wireFinding  `json:"findings"`
}

func (s *Server) tenantDoctor(r *http.Request, p *access.Principal) (int, any, error) {
	rep, err := s.doctor.Check(r.Context(), p, r.PathValue("tenant"))
	if err != nil {
		return 0, nil, err
	}
	out := wireReport{Tenant: rep.Tenant, CheckedAt: timestamp(rep.CheckedAt), Status: rep.Status(),
		Counts:   map[string]int{string(doctor.Error): 0, string(doctor.Warning): 0, string(doctor.Note): 0},
		Findings: []wireFinding{}}
	for _, f := range rep.Findings {
		out.Counts[string(f.Severity)]++
		out.Findings = append(out.Findings, wireFinding{Check: f.Check, Severity: string(f.Severity), Subject: f.Subject,
			Message: f.Message, Command: f.Command})
	}
	return http.StatusOK, out, nil
}
