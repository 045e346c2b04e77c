package httpapi

import (
	"net/http"

	"github.com/agentowl/agentowl"
)

// wireReceipt is the answer to every accepted callback.
type wireReceipt struct {
	CallbackID string `json:"callback_id"`
	WorkID     string `json:"work_id"`
	Sequence   int64  `json:"sequence"`
	Status     string `json:"status"`
	WorkStatus string `json:"work_status"`
	Stale      bool   `json:"stale"`
	Duplicate  bool   `json:"duplicate"`
	RecordedAt string `json:"recorded_at"`
}

// postCallback records one runtime callback. Authentication and the scope
// are checked by its route; here the rate limit of the credential's
// endpoint, the body bound, then the callback rules of internal/work.
func (s *Server) postCallback(r *http.Request, c *agentowl.RuntimeCredential) (int, any, error) {
	if err := s.work.AllowCallback(r.Context(), c); err != nil {
		return 0, nil, err
	}
	data, err := readBody(r, s.work.MaxCallbackBytes())
	if err != nil {
		return 0, nil, err
	}
	rc, err := s.work.RecordCallback(r.Context(), c, r.PathValue("work"), data)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, wireReceipt{CallbackID: rc.CallbackID, WorkID: rc.WorkID, Sequence: rc.Sequence,
		Status: string(rc.Status), WorkStatus: string(rc.WorkStatus), Stale: rc.Stale, Duplicate: rc.Duplicate,
		RecordedAt: timestamp(rc.RecordedAt)}, nil
}
