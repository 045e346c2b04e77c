package httpapi

import (
	"net/http"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/access"
	"github.com/agentowl/agentowl/internal/approval"
	"github.com/agentowl/agentowl/internal/delivery"
)

type wireAttempt struct {
	N          int    `json:"n"`
	URL        string `json:"url"`
	StartedAt  string `json:"started_at"`
	EndedAt    string `json:"ended_at"`
	StatusCode int    `json:"status_code,omitempty"`
	Error      string `json:"error,omitempty"`
}

type wireMessage struct {
	ID          string        `json:"id"`
	Kind        string        `json:"kind"`
	Destination string        `json:"destination"`
	Subject     string        `json:"subject"`
	State       string        `json:"state"`
	Attempts    int           `json:"attempts"`
	CreatedAt   string        `json:"created_at"`
	DeadlineAt  string        `json:"deadline_at"`
	NextAttempt *string       `json:"next_attempt_at,omitempty"`
	LastStatus  int           `json:"last_status,omitempty"`
	LastError   string        `json:"last_error,omitempty"`
	EndedAt     *string       `json:"ended_at,omitempty"`
	History     []wireAttempt `json:"attempt_history,omitempty"`
}

func toWireMessage(m *agentowl.OutboxMessage) wireMessage {
	w := wireMessage{ID: m.ID, Kind: m.Kind, Destination: m.Destination, Subject: m.Subject, State: string(m.State),
		Attempts: m.Attempts, CreatedAt: timestamp(m.CreatedAt), DeadlineAt: timestamp(m.DeadlineAt),
		LastStatus: m.LastStatus, LastError: m.LastError, EndedAt: timestampPtr(m.EndedAt)}
	if m.State == agentowl.MessagePending {
		w.NextAttempt = timestampPtr(&m.NextAttempt)
	}
	return w
}

func (s *Server) listDeliveries(r *http.Request, p *access.Principal) (int, any, error) {
	m, err := s.tenant(r, p, agentowl.RoleMember)
	if err != nil {
		return 0, nil, err
	}
	limit, err := limitParam(r)
	if err != nil {
		return 0, nil, err
	}
	f := delivery.ListFilter{Limit: limit, Subject: r.URL.Query().Get("request")}
	if inst := r.URL.Query().Get("instance"); inst != "" {
		f.Destination = approval.InstanceDestination(inst)
	}
	switch st := agentowl.MessageState(r.URL.Query().Get("state")); st {
	case "", agentowl.MessagePending, agentowl.MessageDelivered, agentowl.MessageFailed, agentowl.MessageCancelled:
		f.State = st
	default:
		return 0, nil, agentowl.FieldError(agentowl.ECodeInvalidField, "state", "state must be pending, delivered, failed or cancelled.")
	}
	msgs, err := s.deliveries.List(r.Context(), m, f)
	return http.StatusOK, listOf(msgs, toWireMessage), err
}

func (s *Server) inspectDelivery(r *http.Request, p *access.Principal) (int, any, error) {
	m, err := s.tenant(r, p, agentowl.RoleMember)
	if err != nil {
		return 0, nil, err
	}
	msg, attempts, err := s.deliveries.Inspect(r.Context(), m, r.PathValue("id"))
	if err != nil {
		return 0, nil, err
	}
	w := toWireMessage(msg)
	for _, a := range attempts {
		w.History = append(w.History, wireAttempt{N: a.N, URL: a.URL, StartedAt: timestamp(a.StartedAt),
			EndedAt: timestamp(a.EndedAt), StatusCode: a.StatusCode, Error: a.Error})
	}
	return http.StatusOK, w, nil
}
