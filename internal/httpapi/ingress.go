package httpapi

import (
	"net/http"

	"github.com/agentowl/agentowl/internal/store"
)

// wireAccepted answers an inbound event.
type wireAccepted struct {
	EventID        string `json:"event_id"`
	ConversationID string `json:"conversation_id"`
	FollowUp       bool   `json:"follow_up"`
	Duplicate      bool   `json:"duplicate"`
}

// receiveWebhook is the generic webhook channel: POST /in/webhook/{token}.
// The address is checked by its route, before the body is read. The event and its
// handoff are committed before the answer: 202 for a new event, 200 for a
// retry the sender's idempotency key identified.
func (s *Server) receiveWebhook(r *http.Request, b *store.Binding) (int, any, error) {
	data, err := readBody(r, s.work.ingress.MaxEventBytes())
	if err != nil {
		return 0, nil, err
	}
	acc, err := s.work.ingress.AcceptWebhook(r.Context(), b, r.Header, data)
	if err != nil {
		return 0, nil, err
	}
	status := http.StatusAccepted
	if acc.Duplicate {
		status = http.StatusOK
	}
	return status, wireAccepted{EventID: acc.EventID, ConversationID: acc.ConversationID, FollowUp: acc.FollowUp,
		Duplicate: acc.Duplicate}, nil
}
