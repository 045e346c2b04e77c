package httpapi

import (
	"net/http"
)

// wireAccepted answers an inbound event.
type wireAccepted struct {
	EventID        string `json:"event_id"`
	ConversationID string `json:"conversation_id"`
	FollowUp       bool   `json:"follow_up"`
	Duplicate      bool   `json:"duplicate"`
}

// receiveWebhook is the generic webhook channel: POST /in/webhook/{token}.
// The address is checked before the body is read. The event and its
// handoff are committed before the answer: 202 for a new event, 200 for a
// retry the sender's idempotency key identified.
func (s *Server) receiveWebhook(w http.ResponseWriter, r *http.Request) {
	b, err := s.work.ingress.Admit(r.Context(), r.PathValue("token"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	data, err := readBody(r, s.work.ingress.MaxEventBytes())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	acc, err := s.work.ingress.AcceptWebhook(r.Context(), b, r.Header, data)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	status := http.StatusAccepted
	if acc.Duplicate {
		status = http.StatusOK
	}
	writeJSON(w, status, wireAccepted{EventID: acc.EventID, ConversationID: acc.ConversationID, FollowUp: acc.FollowUp,
		Duplicate: acc.Duplicate})
}
