package httpapi

import (
	"encoding/json"
	"net/http"
	"net/url"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/access"
	"github.com/agentowl/agentowl/internal/ingress"
	"github.com/agentowl/agentowl/internal/work"
)

// ---- endpoints

// wireEndpointConfig is an endpoint's behaviour switches; agent_work is the
// protocol's config.agent_work.
type wireEndpointConfig struct {
	AgentWork bool `json:"agent_work"`
}

type wireEndpoint struct {
	ID                 string                   `json:"id"`
	Name               string                   `json:"name"`
	URL                string                   `json:"url"`
	Config             wireEndpointConfig       `json:"config"`
	DecisionURL        string                   `json:"decision_url,omitempty"`
	DecisionSecretSet  bool                     `json:"decision_secret_set"`
	CreatedAt          string                   `json:"created_at"`
	UpdatedAt          string                   `json:"updated_at"`
	PausedAt           *string                  `json:"paused_at,omitempty"`
	SigningSecret      string                   `json:"signing_secret,omitempty"`
	Overdue            map[string]any           `json:"overdue,omitempty"`
	Bindings           *int                     `json:"bindings,omitempty"`
	RuntimeCredentials *[]wireRuntimeCredential `json:"runtime_credentials,omitempty"`
}

func toWireEndpoint(ep *agentowl.Endpoint) wireEndpoint {
	return wireEndpoint{ID: ep.ID, Name: ep.Name, URL: ep.URL, Config: wireEndpointConfig{AgentWork: ep.AgentWork}, DecisionURL: ep.DecisionURL,
		DecisionSecretSet: ep.DecisionSecret != nil, CreatedAt: timestamp(ep.CreatedAt), UpdatedAt: timestamp(ep.UpdatedAt),
		Overdue: work.OverdueDetails(ep.Overdue), PausedAt: timestampPtr(ep.PausedAt)}
}

// readEndpointInput reads an endpoint body; on update, decision_url null
// removes the decision settings.
func readEndpointInput(r *http.Request, update bool) (work.EndpointInput, error) {
	var in work.EndpointInput
	fields, err := readObject(r, "name", "url", "config", "decision_url", "decision_secret", "overdue")
	if err != nil {
		return in, err
	}
	if update && len(fields) == 0 {
		return in, agentowl.Errorf(agentowl.ECodeInvalidRequest, "Send at least one field to change.")
	}
	if raw, ok := fields["decision_url"]; ok && string(raw) == "null" && update {
		empty := ""
		in.DecisionURL = &empty
		delete(fields, "decision_url")
	}
	str := func(name string) (*string, error) {
		var v string
		present, err := field(fields, name, &v)
		if err != nil || !present {
			return nil, err
		}
		return &v, nil
	}
	if in.Name, err = str("name"); err != nil {
		return in, err
	}
	if in.URL, err = str("url"); err != nil {
		return in, err
	}
	if in.DecisionURL == nil {
		if in.DecisionURL, err = str("decision_url"); err != nil {
			return in, err
		}
	}
	if in.DecisionSecret, err = str("decision_secret"); err != nil {
		return in, err
	}
	if raw, ok := fields["overdue"]; ok {
		if in.Overdue, err = readOverdue(raw, update); err != nil {
			return in, err
		}
	}
	if raw, ok := fields["config"]; ok {
		var cfg map[string]json.RawMessage
		if err := json.Unmarshal(raw, &cfg); err != nil || cfg == nil {
			return in, agentowl.FieldError(agentowl.ECodeInvalidField, "config", "config must be an object.")
		}
		for k := range cfg {
			if k != "agent_work" {
				return in, agentowl.FieldError(agentowl.ECodeUnknownField, "config."+k, "Unknown field %q in config.", k)
			}
		}
		if raw, ok := cfg["agent_work"]; ok {
			var agentWork bool
			if err := json.Unmarshal(raw, &agentWork); err != nil || string(raw) == "null" {
				return in, agentowl.FieldError(agentowl.ECodeInvalidField, "config.agent_work", "config.agent_work must be true or false.")
			}
			in.AgentWork = &agentWork
		}
	}
	return in, nil
}

func (s *Server) listEndpoints(r *http.Request, p *access.Principal) (int, any, error) {
	eps, err := s.work.ListEndpoints(r.Context(), p, r.PathValue("tenant"))
	return http.StatusOK, listOf(eps, toWireEndpoint), err
}

func (s *Server) createEndpoint(r *http.Request, p *access.Principal) (int, any, error) {
	in, err := readEndpointInput(r, false)
	if err != nil {
		return 0, nil, err
	}
	res, err := s.work.CreateEndpoint(r.Context(), p, r.PathValue("tenant"), in)
	if err != nil {
		return 0, nil, err
	}
	w := toWireEndpoint(res.Endpoint)
	w.SigningSecret = res.SigningSecret
	return http.StatusCreated, w, nil
}

func (s *Server) inspectEndpoint(r *http.Request, p *access.Principal) (int, any, error) {
	v, err := s.work.InspectEndpoint(r.Context(), p, r.PathValue("tenant"), r.PathValue("id"))
	if err != nil {
		return 0, nil, err
	}
	w := toWireEndpoint(v.Endpoint)
	creds := listOf(v.Credentials, s.toWireRuntimeCredential).Items
	w.Bindings, w.RuntimeCredentials = &v.Bindings, &creds
	return http.StatusOK, w, nil
}

func (s *Server) updateEndpoint(r *http.Request, p *access.Principal) (int, any, error) {
	in, err := readEndpointInput(r, true)
	if err != nil {
		return 0, nil, err
	}
	ep, err := s.work.UpdateEndpoint(r.Context(), p, r.PathValue("tenant"), r.PathValue("id"), in)
	return reply(http.StatusOK, ep, err, toWireEndpoint)
}

func (s *Server) deleteEndpoint(r *http.Request, p *access.Principal) (int, any, error) {
	return http.StatusNoContent, nil, s.work.DeleteEndpoint(r.Context(), p, r.PathValue("tenant"), r.PathValue("id"))
}

func (s *Server) pauseEndpoint(r *http.Request, p *access.Principal) (int, any, error) {
	ep, err := s.work.PauseEndpoint(r.Context(), p, r.PathValue("tenant"), r.PathValue("id"))
	return reply(http.StatusOK, ep, err, toWireEndpoint)
}

func (s *Server) resumeEndpoint(r *http.Request, p *access.Principal) (int, any, error) {
	ep, err := s.work.ResumeEndpoint(r.Context(), p, r.PathValue("tenant"), r.PathValue("id"))
	return reply(http.StatusOK, ep, err, toWireEndpoint)
}

func (s *Server) rotateEndpointSecret(r *http.Request, p *access.Principal) (int, any, error) {
	res, err := s.work.RotateSigningSecret(r.Context(), p, r.PathValue("tenant"), r.PathValue("id"))
	if err != nil {
		return 0, nil, err
	}
	w := toWireEndpoint(res.Endpoint)
	w.SigningSecret = res.SigningSecret
	return http.StatusOK, w, nil
}

// ---- runtime credentials

type wireRuntimeCredential struct {
	ID         string   `json:"id"`
	EndpointID string   `json:"endpoint_id"`
	Label      string   `json:"label"`
	Scopes     []string `json:"scopes"`
	Status     string   `json:"status"`
	CreatedAt  string   `json:"created_at"`
	ExpiresAt  string   `json:"expires_at"`
	RevokedAt  *string  `json:"revoked_at,omitempty"`
	Token      string   `json:"token,omitempty"`
}

func (s *Server) toWireRuntimeCredential(c *agentowl.RuntimeCredential) wireRuntimeCredential {
	status := credentialStatus(c.RevokedAt != nil, c.Active(s.clock.Now()))
	scopes := c.Scopes
	if scopes == nil {
		scopes = []string{}
	}
	return wireRuntimeCredential{ID: c.ID, EndpointID: c.EndpointID, Label: c.Label, Scopes: scopes, Status: status,
		CreatedAt: timestamp(c.CreatedAt), ExpiresAt: timestamp(c.ExpiresAt), RevokedAt: timestampPtr(c.RevokedAt)}
}

func (s *Server) listRuntimeCredentials(r *http.Request, p *access.Principal) (int, any, error) {
	cs, err := s.work.ListCredentials(r.Context(), p, r.PathValue("tenant"), r.PathValue("id"))
	return http.StatusOK, listOf(cs, s.toWireRuntimeCredential), err
}

func (s *Server) createRuntimeCredential(r *http.Request, p *access.Principal) (int, any, error) {
	fields, err := readObject(r, "label", "days", "scopes")
	if err != nil {
		return 0, nil, err
	}
	var label string
	var days *int // absent: the default lifetime
	var scopes []string
	for name, dst := range map[string]any{"label": &label, "days": &days, "scopes": &scopes} {
		if _, err := field(fields, name, dst); err != nil {
			return 0, nil, err
		}
	}
	ic, err := s.work.CreateCredential(r.Context(), p, r.PathValue("tenant"), r.PathValue("id"), label, days, scopes)
	if err != nil {
		return 0, nil, err
	}
	w := s.toWireRuntimeCredential(ic.Credential)
	w.Token = ic.Secret
	return http.StatusCreated, w, nil
}

func (s *Server) revokeRuntimeCredential(r *http.Request, p *access.Principal) (int, any, error) {
	c, err := s.work.RevokeCredential(r.Context(), p, r.PathValue("tenant"), r.PathValue("id"))
	return reply(http.StatusOK, c, err, s.toWireRuntimeCredential)
}

// ---- bindings

type wireBinding struct {
	ID         string `json:"id"`
	Channel    string `json:"channel"`
	Name       string `json:"name"`
	EndpointID string `json:"endpoint_id"`
	Signed     bool   `json:"signed"`
	Address    string `json:"address,omitempty"`
	// HandoffDelay is shown when set.
	HandoffDelay int    `json:"handoff_delay_seconds,omitempty"`
	CreatedAt    string `json:"created_at"`
	// Shown once, on creation.
	IngressURL string `json:"ingress_url,omitempty"`
	Secret     string `json:"secret,omitempty"`
}

func toWireBinding(b *agentowl.Binding) wireBinding {
	return wireBinding{ID: b.ID, Channel: b.Channel, Name: b.Name, EndpointID: b.EndpointID, Signed: b.SigningSecret != nil,
		Address: b.Address, HandoffDelay: int(b.HandoffDelay / time.Second), CreatedAt: timestamp(b.CreatedAt)}
}

func (s *Server) listBindings(r *http.Request, p *access.Principal) (int, any, error) {
	bs, err := s.ingress.ListBindings(r.Context(), p, r.PathValue("tenant"))
	return http.StatusOK, listOf(bs, toWireBinding), err
}

func (s *Server) createBinding(r *http.Request, p *access.Principal) (int, any, error) {
	fields, err := readObject(r, "channel", "name", "endpoint_id", "signing_secret", "address", "auth_token", "handoff_delay_seconds")
	if err != nil {
		return 0, nil, err
	}
	var in ingress.BindingInput
	if err := requiredField(fields, "channel", &in.Channel); err != nil {
		return 0, nil, err
	}
	if err := requiredField(fields, "endpoint_id", &in.EndpointID); err != nil {
		return 0, nil, err
	}
	for name, dst := range map[string]any{"name": &in.Name, "signing_secret": &in.SigningSecret, "address": &in.Address,
		"auth_token": &in.AuthToken, "handoff_delay_seconds": &in.HandoffDelaySeconds} {
		if _, err := field(fields, name, dst); err != nil {
			return 0, nil, err
		}
	}
	ib, err := s.ingress.CreateBinding(r.Context(), p, r.PathValue("tenant"), in)
	if err != nil {
		return 0, nil, err
	}
	w := toWireBinding(ib.Binding)
	w.IngressURL, w.Secret = ib.URL, ib.Secret
	return http.StatusCreated, w, nil
}

func (s *Server) inspectBinding(r *http.Request, p *access.Principal) (int, any, error) {
	b, err := s.ingress.InspectBinding(r.Context(), p, r.PathValue("tenant"), r.PathValue("id"))
	return reply(http.StatusOK, b, err, toWireBinding)
}

func (s *Server) deleteBinding(r *http.Request, p *access.Principal) (int, any, error) {
	return http.StatusNoContent, nil, s.ingress.DeleteBinding(r.Context(), p, r.PathValue("tenant"), r.PathValue("id"))
}

// ---- work

// wireWorkDelivery is the handoff's delivery acknowledgement state.
type wireWorkDelivery struct {
	ID          string  `json:"id"`
	State       string  `json:"state"`
	Attempts    int     `json:"attempts"`
	LastStatus  int     `json:"last_status,omitempty"`
	LastError   string  `json:"last_error,omitempty"`
	NextAttempt *string `json:"next_attempt_at,omitempty"`
	EndedAt     *string `json:"ended_at,omitempty"`
}

// toWireWorkDelivery is the delivery state of one outbox message, as a
// work's handoff and an attention item's decision push both show it.
func toWireWorkDelivery(m *agentowl.OutboxMessage) *wireWorkDelivery {
	d := &wireWorkDelivery{ID: m.ID, State: string(m.State), Attempts: m.Attempts, LastStatus: m.LastStatus,
		LastError: m.LastError, EndedAt: timestampPtr(m.EndedAt)}
	if m.State == agentowl.MessagePending {
		d.NextAttempt = timestampPtr(&m.NextAttempt)
	}
	return d
}

type wireResult struct {
	Summary string `json:"summary,omitempty"`
	URL     string `json:"url,omitempty"`
}

// wireRuntime is the runtime's reported progress or outcome.
type wireRuntime struct {
	Status           string          `json:"status"`
	Sequence         int64           `json:"sequence"`
	RuntimeSessionID string          `json:"runtime_session_id,omitempty"`
	Callbacks        int             `json:"callbacks"`
	Result           *wireResult     `json:"result,omitempty"`
	Requests         json.RawMessage `json:"requests,omitempty"`
	Error            json.RawMessage `json:"error,omitempty"`
	EndedAt          *string         `json:"ended_at,omitempty"`
}

// wireWorkDecision is the third status: human decisions and their receipts,
// kept apart from delivery and runtime progress. Status is "requested" while
// the runtime waits for input (needs_input), else "none"; Decisions lists
// each decision with its receipt, if the runtime has confirmed one.
type wireWorkDecision struct {
	Status    string               `json:"status"`
	Decisions []wireDecisionStatus `json:"decisions,omitempty"`
}

type wireDecisionStatus struct {
	DecisionID  string  `json:"decision_id"`
	AttentionID string  `json:"attention_id"`
	RequestID   string  `json:"request_id"`
	Revision    int64   `json:"revision"`
	Decision    string  `json:"decision"`
	DecidedAt   string  `json:"decided_at"`
	ReceiptAt   *string `json:"receipt_at,omitempty"`
	ReceiptVia  string  `json:"receipt_via,omitempty"`
}

type wireWork struct {
	ID             string            `json:"id"`
	EndpointID     string            `json:"endpoint_id"`
	ConversationID string            `json:"conversation_id"`
	EventID        string            `json:"event_id"`
	Generation     int               `json:"generation"`
	ReplayOf       string            `json:"replay_of,omitempty"`
	CredentialID   string            `json:"credential_id,omitempty"`
	CreatedAt      string            `json:"created_at"`
	UpdatedAt      string            `json:"updated_at"`
	Delivery       *wireWorkDelivery `json:"delivery,omitempty"`
	Runtime        wireRuntime       `json:"runtime"`
	Decision       wireWorkDecision  `json:"decision"`
	Timeline       []wireTimeline    `json:"timeline,omitempty"`
	// CallbacksOmitted counts older callbacks the timeline leaves out.
	CallbacksOmitted int `json:"callbacks_omitted,omitempty"`
	// AttachmentsURL links the event's retained files (inspection only).
	AttachmentsURL string `json:"attachments_url,omitempty"`
}

type wireTimeline struct {
	At       string        `json:"at"`
	Kind     string        `json:"kind"`
	Quiet    bool          `json:"quiet,omitempty"`
	Attempt  *wireAttempt  `json:"attempt,omitempty"`
	Callback *wireCallback `json:"callback,omitempty"`
}

type wireCallback struct {
	CallbackID       string          `json:"callback_id"`
	Sequence         int64           `json:"sequence"`
	Status           string          `json:"status"`
	OccurredAt       string          `json:"occurred_at"`
	RuntimeSessionID string          `json:"runtime_session_id,omitempty"`
	Stale            bool            `json:"stale"`
	WorkStatus       string          `json:"work_status"`
	CredentialID     string          `json:"credential_id"`
	RecordedAt       string          `json:"recorded_at"`
	Body             json.RawMessage `json:"body"`
}

func toWireWork(sum *work.Summary) wireWork {
	w := sum.Work
	out := wireWork{ID: w.ID, EndpointID: w.EndpointID, ConversationID: w.ConversationID, EventID: w.EventID,
		Generation: w.Generation, ReplayOf: w.ReplayOf, CredentialID: w.CredentialID, CreatedAt: timestamp(w.CreatedAt),
		UpdatedAt: timestamp(w.UpdatedAt),
		Runtime: wireRuntime{Status: string(w.Status), Sequence: w.Sequence, RuntimeSessionID: w.RuntimeSessionID,
			Callbacks: w.Callbacks, Requests: w.Requests, Error: w.Error, EndedAt: timestampPtr(w.EndedAt)},
		Decision: wireWorkDecision{Status: "none"},
	}
	if w.ResultSummary != "" || w.ResultURL != "" {
		out.Runtime.Result = &wireResult{Summary: w.ResultSummary, URL: w.ResultURL}
	}
	if w.Status == agentowl.WorkNeedsInput {
		out.Decision.Status = "requested"
	}
	for _, d := range sum.Decisions {
		out.Decision.Decisions = append(out.Decision.Decisions, wireDecisionStatus{DecisionID: d.ID, AttentionID: d.AttentionID,
			RequestID: d.RequestID, Revision: d.Revision, Decision: d.Decision, DecidedAt: timestamp(d.DecidedAt),
			ReceiptAt: timestampPtr(d.ReceiptAt), ReceiptVia: d.ReceiptVia})
	}
	if sum.Handoff != nil {
		out.Delivery = toWireWorkDelivery(sum.Handoff)
	}
	return out
}

func (s *Server) listWork(r *http.Request, p *access.Principal) (int, any, error) {
	limit, err := limitParam(r)
	if err != nil {
		return 0, nil, err
	}
	q := r.URL.Query()
	st, err := work.ParseStatus(q.Get("status"))
	if err != nil {
		return 0, nil, err
	}
	after, err := cursorParam(r)
	if err != nil {
		return 0, nil, err
	}
	params := work.ListFilter{Status: st, EndpointID: q.Get("endpoint"), ConversationID: q.Get("conversation"), After: after, Limit: limit}
	ws, err := s.work.ListWork(r.Context(), p, r.PathValue("tenant"), params)
	if err != nil {
		return 0, nil, err
	}
	out := pageOf(listOf(ws, toWireWork), len(ws) == limit, func() agentowl.Cursor {
		w := ws[len(ws)-1].Work
		return agentowl.Cursor{At: w.CreatedAt, ID: w.ID}
	})
	return http.StatusOK, out, nil
}

func (s *Server) inspectWork(r *http.Request, p *access.Principal) (int, any, error) {
	d, err := s.work.InspectWork(r.Context(), p, r.PathValue("tenant"), r.PathValue("id"))
	if err != nil {
		return 0, nil, err
	}
	out := toWireWork(&d.Summary)
	out.Timeline, out.CallbacksOmitted = []wireTimeline{}, d.CallbacksOmitted
	out.AttachmentsURL = s.work.Config().PublicURL + "/api/v1/tenants/" + url.PathEscape(r.PathValue("tenant")) + "/events/" +
		url.PathEscape(d.Work.EventID) + "/attachments"
	for _, e := range d.Timeline {
		wt := wireTimeline{At: timestamp(e.At), Kind: e.Kind, Quiet: e.Quiet}
		if a := e.Attempt; a != nil {
			wt.Attempt = &wireAttempt{N: a.N, URL: a.URL, StartedAt: timestamp(a.StartedAt), EndedAt: timestamp(a.EndedAt),
				StatusCode: a.StatusCode, Error: a.Error}
		}
		if c := e.Callback; c != nil {
			wt.Callback = &wireCallback{CallbackID: c.CallbackID, Sequence: c.Sequence, Status: string(c.Status),
				OccurredAt: c.OccurredAt, RuntimeSessionID: c.RuntimeSessionID, Stale: c.Stale, WorkStatus: string(c.WorkStatus),
				CredentialID: c.CredentialID, RecordedAt: timestamp(c.RecordedAt), Body: c.Body}
		}
		out.Timeline = append(out.Timeline, wt)
	}
	return http.StatusOK, out, nil
}

func (s *Server) replayWork(r *http.Request, p *access.Principal) (int, any, error) {
	w, err := s.work.Replay(r.Context(), p, r.PathValue("tenant"), r.PathValue("id"))
	if err != nil {
		return 0, nil, err
	}
	return http.StatusCreated, toWireWork(&work.Summary{Work: w}), nil
}

// readOverdue reads an endpoint's overdue expectations: an object of
// accept_within and report_interval (durations such as "10m", or "off")
// and input_expiry (true or false); fields left out keep the server's
// defaults. null (on update) restores every default.
func readOverdue(raw json.RawMessage, update bool) (*agentowl.EndpointOverdue, error) {
	out := &agentowl.EndpointOverdue{}
	if string(raw) == "null" && update {
		return out, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return nil, agentowl.FieldError(agentowl.ECodeInvalidField, "overdue", "overdue must be an object.")
	}
	for k, v := range obj {
		param := "overdue." + k
		switch k {
		case "accept_within", "report_interval":
			var text string
			if err := json.Unmarshal(v, &text); err != nil {
				return nil, agentowl.FieldError(agentowl.ECodeInvalidField, param, "%s must be a duration such as \"10m\", or \"off\".", param)
			}
			d := time.Duration(0)
			if text != "off" {
				var err error
				if d, err = time.ParseDuration(text); err != nil || d <= 0 {
					return nil, agentowl.FieldError(agentowl.ECodeInvalidField, param, "%s must be a duration such as \"10m\", or \"off\".", param)
				}
			}
			if k == "accept_within" {
				out.AcceptWithin = &d
			} else {
				out.ReportInterval = &d
			}
		case "input_expiry":
			var on bool
			if err := json.Unmarshal(v, &on); err != nil || string(v) == "null" {
				return nil, agentowl.FieldError(agentowl.ECodeInvalidField, param, "%s must be true or false.", param)
			}
			out.InputExpiry = &on
		default:
			return nil, agentowl.FieldError(agentowl.ECodeUnknownField, param, "Unknown field %q in overdue.", k)
		}
	}
	return out, nil
}
