package httpapi

import (
	"net/http"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/access"
	"github.com/agentowl/agentowl/internal/work"
)

// The work outbox (handoffs and decision pushes) and ingress publications
// (events routed to endpoints): list, inspect and redrive
// (docs/operating.md).

// wireOutboxEntry is a message with what it delivers.
type wireOutboxEntry struct {
	wireMessage
	Redrives int `json:"redrives"`
	// SeriesFirstAttempt is the number of the current attempt series' first
	// attempt (1 until a redrive).
	SeriesFirstAttempt int    `json:"series_first_attempt"`
	EndpointID         string `json:"endpoint_id,omitempty"`
	WorkID             string `json:"work_id,omitempty"`
	EventID            string `json:"event_id,omitempty"`
	BindingID          string `json:"binding_id,omitempty"`
	Channel            string `json:"channel,omitempty"`
	DecisionID         string `json:"decision_id,omitempty"`
	IncidentID         string `json:"incident_id,omitempty"`
}

func toWireOutboxEntry(e *work.OutboxEntry) wireOutboxEntry {
	w := wireOutboxEntry{wireMessage: toWireMessage(e.Message), Redrives: e.Message.Redrives,
		SeriesFirstAttempt: e.Message.AttemptBase + 1, EndpointID: e.EndpointID, WorkID: e.WorkID, EventID: e.EventID,
		BindingID: e.BindingID, Channel: e.Channel, DecisionID: e.DecisionID, IncidentID: e.IncidentID}
	for _, a := range e.Attempts {
		w.History = append(w.History, wireAttempt{N: a.N, URL: a.URL, StartedAt: timestamp(a.StartedAt),
			EndedAt: timestamp(a.EndedAt), StatusCode: a.StatusCode, Error: a.Error})
	}
	return w
}

// outboxFilter reads a queue list's query: limit, state, older_than (a Go
// duration such as 90m or 24h) and the ID filters the queue takes.
func outboxFilter(r *http.Request, ids ...string) (work.OutboxFilter, error) {
	var f work.OutboxFilter
	var err error
	if f.Limit, err = limitParam(r); err != nil {
		return f, err
	}
	q := r.URL.Query()
	if f.State, err = work.ParseMessageState(q.Get("state")); err != nil {
		return f, err
	}
	if v := q.Get("older_than"); v != "" {
		if f.OlderThan, err = time.ParseDuration(v); err != nil || f.OlderThan < 0 {
			return f, agentowl.FieldError(agentowl.ECodeInvalidField, "older_than", "older_than must be a duration such as 90m or 24h.")
		}
	}
	for _, name := range ids {
		v := q.Get(name)
		switch name {
		case "endpoint":
			f.EndpointID = v
		case "work":
			f.WorkID = v
		case "event":
			f.EventID = v
		case "binding":
			f.BindingID = v
		}
	}
	return f, nil
}

func (s *Server) listQueue(q work.Queue, ids ...string) handler[*access.Principal] {
	return func(r *http.Request, p *access.Principal) (int, any, error) {
		f, err := outboxFilter(r, ids...)
		if err != nil {
			return 0, nil, err
		}
		es, err := s.work.ListQueue(r.Context(), p, r.PathValue("tenant"), q, f)
		return http.StatusOK, listOf(es, toWireOutboxEntry), err
	}
}

func (s *Server) inspectQueue(q work.Queue) handler[*access.Principal] {
	return func(r *http.Request, p *access.Principal) (int, any, error) {
		e, err := s.work.InspectQueue(r.Context(), p, r.PathValue("tenant"), q, r.PathValue("id"))
		return reply(http.StatusOK, e, err, toWireOutboxEntry)
	}
}

func (s *Server) redriveQueue(q work.Queue) handler[*access.Principal] {
	return func(r *http.Request, p *access.Principal) (int, any, error) {
		e, err := s.work.Redrive(r.Context(), p, r.PathValue("tenant"), q, r.PathValue("id"))
		return reply(http.StatusOK, e, err, toWireOutboxEntry)
	}
}
