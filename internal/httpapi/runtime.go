package httpapi

import (
	"net/http"
	"strings"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/ingress"
	"github.com/agentowl/agentowl/internal/store"
	"github.com/agentowl/agentowl/internal/work"
)

// workAPI holds the agent-work use-cases behind the runtime (/runtime/v1),
// ingress (/in) and operator work routes.
type workAPI struct {
	work    *work.Service
	ingress *ingress.Service
}

// EnableWork turns on agent work: endpoints, runtime credentials, bindings
// and work under /api/v1, runtime callbacks under /runtime/v1 and the
// webhook channel under /in. Call it before Handler.
func (s *Server) EnableWork(w *work.Service, in *ingress.Service) {
	s.work = &workAPI{work: w, ingress: in}
}

// workRoutes registers the runtime and ingress surfaces.
func (s *Server) workRoutes(mux *http.ServeMux) {
	if s.work == nil {
		return
	}
	s.route(mux, "/runtime/v1/work/{work}/callbacks", map[string]http.HandlerFunc{http.MethodPost: s.postCallback})
	s.route(mux, "/in/webhook/{token}", map[string]http.HandlerFunc{http.MethodPost: s.receiveWebhook})
}

// bearer returns the Authorization header's bearer secret, or "".
func bearer(r *http.Request) string {
	h := r.Header.Get("Authorization")
	secret, ok := strings.CutPrefix(h, "Bearer ")
	if !ok {
		if scheme, rest, found := strings.Cut(h, " "); found && strings.EqualFold(scheme, "bearer") {
			secret, ok = rest, true
		}
	}
	if !ok {
		return ""
	}
	return strings.TrimSpace(secret)
}

// authenticateRuntime resolves a runtime credential. Another kind's valid
// token is forbidden here, as on the other surfaces; anything else that is
// not a live runtime credential is unauthenticated.
func (s *Server) authenticateRuntime(r *http.Request) (*store.RuntimeCredential, error) {
	secret := bearer(r)
	if secret == "" {
		return nil, agentowl.Errorf(agentowl.ECodeUnauthenticated, "A runtime credential is required in the Authorization header.")
	}
	c, err := s.work.work.AuthenticateRuntime(r.Context(), secret)
	if agentowl.ErrorCode(err) == agentowl.ECodeUnauthenticated {
		if other, known := agentowl.TokenKindOf(secret); known && other != agentowl.TokenRuntime {
			if _, oerr := s.access.Authenticate(r.Context(), secret, other); oerr == nil {
				return nil, agentowl.Errorf(agentowl.ECodeForbidden, "A %s credential cannot call the runtime API.", other)
			}
		}
	}
	return c, err
}

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

// postCallback records one runtime callback: authentication, the scope
// and rate limit of the credential's endpoint, the body bound, then the
// callback rules of internal/work.
func (s *Server) postCallback(w http.ResponseWriter, r *http.Request) {
	status, body, err := func() (int, any, error) {
		c, err := s.authenticateRuntime(r)
		if err != nil {
			return 0, nil, err
		}
		if err := s.work.work.AllowCallback(r.Context(), c); err != nil {
			return 0, nil, err
		}
		data, err := readBody(r, s.work.work.MaxCallbackBytes())
		if err != nil {
			return 0, nil, err
		}
		rc, err := s.work.work.RecordCallback(r.Context(), c, r.PathValue("work"), data)
		if err != nil {
			return 0, nil, err
		}
		return http.StatusOK, wireReceipt{CallbackID: rc.CallbackID, WorkID: rc.WorkID, Sequence: rc.Sequence,
			Status: string(rc.Status), WorkStatus: string(rc.WorkStatus), Stale: rc.Stale, Duplicate: rc.Duplicate,
			RecordedAt: timestamp(rc.RecordedAt)}, nil
	}()
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, status, body)
}
