package httpapi

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/access"
	"github.com/agentowl/agentowl/internal/approval"
)

// Limits on provider input beyond the overall body bound.
const (
	maxToolNameBytes     = 256
	maxInstanceNameBytes = 256
)

func (s *Server) idempotencyKey(r *http.Request) (string, error) {
	k := r.Header.Get("Idempotency-Key")
	if k == "" {
		return "", agentowl.FieldError(agentowl.ECodeMissingIdempotencyKey, "Idempotency-Key", "The Idempotency-Key header is required.")
	}
	if len(k) > s.cfg.MaxIdempotencyKeyBytes || !utf8.ValidString(k) {
		return "", agentowl.FieldError(agentowl.ECodeInvalidField, "Idempotency-Key",
			"The Idempotency-Key header must be valid UTF-8 of at most %d bytes.", s.cfg.MaxIdempotencyKeyBytes)
	}
	return k, nil
}

// keyedObject reads the Idempotency-Key header, then the JSON object body
// with the allowed fields: what every keyed write of the provider API reads
// first.
func (s *Server) keyedObject(r *http.Request, allowed ...string) (string, map[string]json.RawMessage, error) {
	key, err := s.idempotencyKey(r)
	if err != nil {
		return "", nil, err
	}
	fields, err := readObject(r, allowed...)
	return key, fields, err
}

// ---- wire objects

type wireDelivery struct {
	Type           string `json:"type"`
	URL            string `json:"url"`
	RegistrationID string `json:"registration_id"`
}

type wireInstance struct {
	ID       string        `json:"id"`
	Name     string        `json:"name"`
	Delivery *wireDelivery `json:"delivery,omitempty"`
}

func toWireInstance(in *agentowl.Instance) *wireInstance {
	w := &wireInstance{ID: in.ID, Name: in.Name}
	if in.Receiver != nil {
		w.Delivery = &wireDelivery{Type: in.Receiver.Type, URL: in.Receiver.URL, RegistrationID: in.Receiver.RegistrationID}
	}
	return w
}

type wireCredential struct {
	Token     string  `json:"token"`
	ExpiresAt *string `json:"expires_at,omitempty"`
}

type wireProvisioned struct {
	Instance   *wireInstance  `json:"instance"`
	Credential wireCredential `json:"credential"`
}

type wireDecision struct {
	Status    string  `json:"status"`
	Note      string  `json:"note,omitempty"`
	DecidedAt string  `json:"decided_at"`
	ExpiresAt *string `json:"expires_at,omitempty"`
}

// WireRequest is the contract's ApprovalRequest object: submitted fields
// echoed exactly, optional ones omitted when not sent.
type WireRequest struct {
	ID             string          `json:"id"`
	Tool           string          `json:"tool"`
	Arguments      json.RawMessage `json:"arguments"`
	Timeout        string          `json:"timeout"`
	AgentReasoning *string         `json:"agent_reasoning,omitempty"`
	Context        json.RawMessage `json:"context,omitempty"`
	Status         string          `json:"status"`
	CreatedAt      string          `json:"created_at"`
	DeadlineAt     string          `json:"deadline_at"`
	Decision       *wireDecision   `json:"decision,omitempty"`
}

func toWireRequest(r *agentowl.ApprovalRequest) *WireRequest {
	w := &WireRequest{
		ID: r.ID, Tool: r.Tool, Arguments: r.Arguments, Timeout: r.Timeout, AgentReasoning: r.AgentReasoning,
		Context: r.Context, Status: string(r.Status), CreatedAt: timestamp(r.CreatedAt), DeadlineAt: timestamp(r.DeadlineAt),
	}
	if d := r.Decision; d != nil {
		w.Decision = &wireDecision{Status: string(d.Status), Note: d.Note, DecidedAt: timestamp(d.DecidedAt)}
		if d.Status == agentowl.StatusApproved {
			w.Decision.ExpiresAt = timestampPtr(&d.ExpiresAt)
		}
	}
	return w
}

// ---- instances

func (s *Server) provisionInstance(r *http.Request, p *access.Principal) (int, any, error) {
	key, fields, err := s.keyedObject(r, "instance_name", "delivery")
	if err != nil {
		return 0, nil, err
	}
	in := &approval.ProvisionInput{}
	if present, err := field(fields, "instance_name", &in.Name); err != nil {
		return 0, nil, err
	} else if present {
		if err := validName(in.Name); err != nil {
			return 0, nil, err
		}
	}
	if raw, ok := fields["delivery"]; ok {
		if in.Receiver, err = decodeDelivery(raw, false); err != nil {
			return 0, nil, err
		}
	}
	res, err := s.approval.ProvisionInstance(r.Context(), p, key, in)
	if err != nil {
		return 0, nil, err
	}
	return createdStatus(res.Replayed), wireProvisioned{
		Instance:   toWireInstance(res.Instance),
		Credential: wireCredential{Token: res.Credential, ExpiresAt: timestampPtr(res.CredentialExpiresAt)},
	}, nil
}

func validName(name string) error {
	if name == "" || len(name) > maxInstanceNameBytes || !utf8.ValidString(name) {
		return agentowl.FieldError(agentowl.ECodeInvalidField, "instance_name", "instance_name must be 1-%d bytes of UTF-8.", maxInstanceNameBytes)
	}
	return nil
}

// decodeDelivery decodes a WebhookDeliveryInput (null allowed on update).
func decodeDelivery(raw json.RawMessage, allowNull bool) (*agentowl.Receiver, error) {
	if string(raw) == "null" {
		if allowNull {
			return nil, nil
		}
		return nil, agentowl.FieldError(agentowl.ECodeInvalidField, "delivery", "delivery must be an object.")
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return nil, agentowl.FieldError(agentowl.ECodeInvalidField, "delivery", "delivery must be an object.")
	}
	for k := range obj {
		if !contains([]string{"type", "url", "registration_id", "signing_secret"}, k) {
			return nil, agentowl.FieldError(agentowl.ECodeUnknownField, "delivery."+k, "Unknown field %q in delivery.", k)
		}
	}
	var d agentowl.Receiver
	for name, dst := range map[string]*string{"type": &d.Type, "url": &d.URL, "registration_id": &d.RegistrationID, "signing_secret": &d.SigningSecret} {
		if err := requiredField(obj, name, dst); err != nil {
			e := err.(*agentowl.Error)
			e.Param = "delivery." + name
			return nil, e
		}
	}
	return &d, d.Validate()
}

func (s *Server) getInstance(r *http.Request, p *access.Principal) (int, any, error) {
	inst, err := s.approval.GetInstance(r.Context(), p, r.PathValue("id"))
	return reply(http.StatusOK, inst, err, toWireInstance)
}

func (s *Server) updateInstance(r *http.Request, p *access.Principal) (int, any, error) {
	key, fields, err := s.keyedObject(r, "instance_name", "delivery")
	if err != nil {
		return 0, nil, err
	}
	if len(fields) == 0 {
		return 0, nil, agentowl.Errorf(agentowl.ECodeInvalidRequest, "Supply instance_name, delivery or both.")
	}
	in := &approval.UpdateInput{}
	var name string
	if present, err := field(fields, "instance_name", &name); err != nil {
		return 0, nil, err
	} else if present {
		if err := validName(name); err != nil {
			return 0, nil, err
		}
		in.Name = &name
	}
	if raw, ok := fields["delivery"]; ok {
		in.ReceiverSet = true
		if in.Receiver, err = decodeDelivery(raw, true); err != nil {
			return 0, nil, err
		}
	}
	inst, err := s.approval.UpdateInstance(r.Context(), p, r.PathValue("id"), key, in)
	return reply(http.StatusOK, inst, err, toWireInstance)
}

func (s *Server) deleteInstance(r *http.Request, p *access.Principal) (int, any, error) {
	return http.StatusNoContent, nil, s.approval.DeleteInstance(r.Context(), p, r.PathValue("id"))
}

// ---- requests

func (s *Server) createRequest(r *http.Request, p *access.Principal) (int, any, error) {
	key, fields, err := s.keyedObject(r, "tool", "arguments", "timeout", "agent_reasoning", "context")
	if err != nil {
		return 0, nil, err
	}
	in, err := decodeCreateRequest(fields)
	if err != nil {
		return 0, nil, err
	}
	res, err := s.approval.CreateRequest(r.Context(), p, key, in)
	if err != nil {
		return 0, nil, err
	}
	return createdStatus(res.Replayed), toWireRequest(res.Request), nil
}

func decodeCreateRequest(fields map[string]json.RawMessage) (*agentowl.CreateRequestInput, error) {
	in := &agentowl.CreateRequestInput{}
	if err := requiredField(fields, "tool", &in.Tool); err != nil {
		return nil, err
	}
	if in.Tool == "" || len(in.Tool) > maxToolNameBytes {
		return nil, agentowl.FieldError(agentowl.ECodeInvalidField, "tool", "tool must be 1-%d bytes.", maxToolNameBytes)
	}
	var err error
	if in.Arguments, err = objectField(fields, "arguments", true); err != nil {
		return nil, err
	}
	if err := requiredField(fields, "timeout", &in.Timeout); err != nil {
		return nil, err
	}
	var ok bool
	if in.TimeoutDur, ok = agentowl.ParseDuration(in.Timeout); !ok {
		return nil, agentowl.FieldError(agentowl.ECodeInvalidField, "timeout",
			"timeout must be a positive whole number of seconds, minutes or hours with its unit, such as 30s, 30m or 24h.")
	}
	var reasoning string
	if present, err := field(fields, "agent_reasoning", &reasoning); err != nil {
		return nil, err
	} else if present {
		in.AgentReasoning = &reasoning
	}
	if in.Context, err = objectField(fields, "context", false); err != nil {
		return nil, err
	}
	return in, nil
}

// objectField returns a JSON object member compacted, keeping its keys and
// number literals exactly as sent.
func objectField(fields map[string]json.RawMessage, name string, required bool) (json.RawMessage, error) {
	raw, ok := fields[name]
	if !ok {
		if required {
			return nil, agentowl.FieldError(agentowl.ECodeMissingField, name, "%s is required.", name)
		}
		return nil, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return nil, agentowl.FieldError(agentowl.ECodeInvalidField, name, "%s must be a JSON object.", name)
	}
	var buf strings.Builder
	compacted, err := compact(raw)
	if err != nil {
		return nil, agentowl.FieldError(agentowl.ECodeInvalidField, name, "%s must be a JSON object.", name)
	}
	buf.Write(compacted)
	return json.RawMessage(buf.String()), nil
}

func (s *Server) getRequest(r *http.Request, p *access.Principal) (int, any, error) {
	var wait time.Duration
	if r.URL.Query().Has("wait") {
		d, ok := agentowl.ParseDuration(r.URL.Query().Get("wait"))
		if !ok {
			return 0, nil, agentowl.FieldError(agentowl.ECodeInvalidField, "wait",
				"wait must be a positive whole number of seconds, minutes or hours with its unit, such as 30s.")
		}
		wait = d
		s.extendWriteDeadline(r, wait)
	}
	req, err := s.approval.GetRequest(r.Context(), p, r.PathValue("id"), wait)
	return reply(http.StatusOK, req, err, toWireRequest)
}

func (s *Server) cancelRequest(r *http.Request, p *access.Principal) (int, any, error) {
	req, err := s.approval.CancelRequest(r.Context(), p, r.PathValue("id"))
	return reply(http.StatusOK, req, err, toWireRequest)
}

// createdStatus is the status of an idempotent create: 201 the first time,
// 200 when the idempotency key replays an earlier result.
func createdStatus(replayed bool) int {
	if replayed {
		return http.StatusOK
	}
	return http.StatusCreated
}
