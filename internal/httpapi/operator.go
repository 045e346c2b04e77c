package httpapi

import (
	"net/http"
	"strconv"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/access"
	"github.com/agentowl/agentowl/internal/approval"
)

type list[T any] struct {
	Items []T `json:"items"`
}

func listOf[S any, T any](in []S, f func(S) T) list[T] {
	out := list[T]{Items: make([]T, 0, len(in))}
	for _, v := range in {
		out.Items = append(out.Items, f(v))
	}
	return out
}

// reply is the tail most handlers share after one service call: the
// service's error unchanged, or its result in wire form with status. It
// keeps the error check and the wire mapping in one place instead of four
// lines per handler.
func reply[T, W any](status int, v T, err error, wire func(T) W) (int, any, error) {
	if err != nil {
		return 0, nil, err
	}
	return status, wire(v), nil
}

func limitParam(r *http.Request) (int, error) {
	v := r.URL.Query().Get("limit")
	if v == "" {
		return 100, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 1000 {
		return 0, agentowl.FieldError(agentowl.ECodeInvalidField, "limit", "limit must be between 1 and 1000.")
	}
	return n, nil
}

// ---- tenants and operators

type wireMembership struct {
	Tenant string `json:"tenant"`
	Role   string `json:"role"`
}

func (s *Server) whoami(r *http.Request, p *access.Principal) (int, any, error) {
	return http.StatusOK, map[string]any{
		"operator": p.Operator.Name,
		"tenants": listOf(s.access.ListTenants(p), func(m *agentowl.Membership) wireMembership {
			return wireMembership{Tenant: m.TenantName, Role: string(m.Role)}
		}).Items,
	}, nil
}

type wireTenant struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Role      string `json:"role,omitempty"`
	CreatedAt string `json:"created_at,omitempty"`
}

func (s *Server) listTenants(r *http.Request, p *access.Principal) (int, any, error) {
	return http.StatusOK, listOf(s.access.ListTenants(p), func(m *agentowl.Membership) wireTenant {
		return wireTenant{ID: m.TenantID, Name: m.TenantName, Role: string(m.Role)}
	}), nil
}

type wireNewTenant struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	CreatedAt string    `json:"created_at"`
	Admin     wireToken `json:"admin"`
}

func (s *Server) createTenant(r *http.Request, p *access.Principal) (int, any, error) {
	fields, err := readObject(r, "name", "admin", "days")
	if err != nil {
		return 0, nil, err
	}
	var name, admin string
	var days int
	if err := requiredField(fields, "name", &name); err != nil {
		return 0, nil, err
	}
	if present, err := field(fields, "admin", &admin); err != nil {
		return 0, nil, err
	} else if present && admin == "" {
		return 0, nil, agentowl.FieldError(agentowl.ECodeInvalidField, "admin", "admin names the new tenant's first operator; leave it out for your own name.")
	}
	if _, err := field(fields, "days", &days); err != nil {
		return 0, nil, err
	}
	nt, err := s.access.CreateTenant(r.Context(), p, name, admin, days)
	if err != nil {
		return 0, nil, err
	}
	tok := s.toWireToken(nt.Admin.Token)
	tok.Token, tok.Operator = nt.Admin.Secret, nt.Admin.OperatorName
	return http.StatusCreated, wireNewTenant{ID: nt.Tenant.ID, Name: nt.Tenant.Name, CreatedAt: timestamp(nt.Tenant.CreatedAt), Admin: tok}, nil
}

type wireOperator struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Role      string `json:"role"`
	CreatedAt string `json:"created_at"`
}

func toWireOperator(o *agentowl.Operator) wireOperator {
	return wireOperator{ID: o.ID, Name: o.Name, Role: string(o.Role), CreatedAt: timestamp(o.CreatedAt)}
}

func (s *Server) listOperators(r *http.Request, p *access.Principal) (int, any, error) {
	ops, err := s.access.ListOperators(r.Context(), p, r.PathValue("tenant"))
	return http.StatusOK, listOf(ops, toWireOperator), err
}

func (s *Server) createOperator(r *http.Request, p *access.Principal) (int, any, error) {
	fields, err := readObject(r, "name", "role")
	if err != nil {
		return 0, nil, err
	}
	var name, role string
	if err := requiredField(fields, "name", &name); err != nil {
		return 0, nil, err
	}
	if err := requiredField(fields, "role", &role); err != nil {
		return 0, nil, err
	}
	op, err := s.access.CreateOperator(r.Context(), p, r.PathValue("tenant"), name, agentowl.Role(role))
	return reply(http.StatusCreated, op, err, toWireOperator)
}

// ---- tokens

type wireToken struct {
	ID        string  `json:"id"`
	Kind      string  `json:"kind"`
	Label     string  `json:"label"`
	Operator  string  `json:"operator,omitempty"`
	Status    string  `json:"status"`
	CreatedAt string  `json:"created_at"`
	ExpiresAt *string `json:"expires_at,omitempty"`
	RevokedAt *string `json:"revoked_at,omitempty"`
	Token     string  `json:"token,omitempty"`
}

// credentialStatus is a token's or a runtime credential's status on the
// wire: revoked wins over expired.
func credentialStatus(revoked, active bool) string {
	switch {
	case revoked:
		return "revoked"
	case !active:
		return "expired"
	}
	return "active"
}

func (s *Server) toWireToken(t *agentowl.Token) wireToken {
	status := credentialStatus(t.RevokedAt != nil, t.Active(s.clock.Now()))
	return wireToken{ID: t.ID, Kind: string(t.Kind), Label: t.Label, Status: status, CreatedAt: timestamp(t.CreatedAt),
		ExpiresAt: timestampPtr(t.ExpiresAt), RevokedAt: timestampPtr(t.RevokedAt)}
}

type tokenInput struct {
	operator, label string
	days            int
}

func readTokenInput(r *http.Request, allowOperator bool) (*tokenInput, error) {
	allowed := []string{"label", "days"}
	if allowOperator {
		allowed = append(allowed, "operator")
	}
	fields, err := readObject(r, allowed...)
	if err != nil {
		return nil, err
	}
	var in tokenInput
	for name, dst := range map[string]any{"operator": &in.operator, "label": &in.label, "days": &in.days} {
		if _, err := field(fields, name, dst); err != nil {
			return nil, err
		}
	}
	if len(in.label) > 256 {
		return nil, agentowl.FieldError(agentowl.ECodeInvalidField, "label", "label is limited to 256 bytes.")
	}
	return &in, nil
}

func (s *Server) createOperatorToken(r *http.Request, p *access.Principal) (int, any, error) {
	in, err := readTokenInput(r, true)
	if err != nil {
		return 0, nil, err
	}
	it, err := s.access.CreateOperatorToken(r.Context(), p, r.PathValue("tenant"), in.operator, in.label, in.days)
	if err != nil {
		return 0, nil, err
	}
	w := s.toWireToken(it.Token)
	w.Token, w.Operator = it.Secret, it.OperatorName
	return http.StatusCreated, w, nil
}

func (s *Server) createProvisionerToken(r *http.Request, p *access.Principal) (int, any, error) {
	in, err := readTokenInput(r, false)
	if err != nil {
		return 0, nil, err
	}
	it, err := s.access.CreateProvisionerToken(r.Context(), p, r.PathValue("tenant"), in.label, in.days)
	if err != nil {
		return 0, nil, err
	}
	w := s.toWireToken(it.Token)
	w.Token = it.Secret
	return http.StatusCreated, w, nil
}

func (s *Server) listTokens(kind agentowl.TokenKind) handler[*access.Principal] {
	return func(r *http.Request, p *access.Principal) (int, any, error) {
		toks, err := s.access.ListTokens(r.Context(), p, r.PathValue("tenant"), kind)
		return http.StatusOK, listOf(toks, s.toWireToken), err
	}
}

func (s *Server) revokeToken(kind agentowl.TokenKind) handler[*access.Principal] {
	return func(r *http.Request, p *access.Principal) (int, any, error) {
		tok, err := s.access.RevokeToken(r.Context(), p, r.PathValue("tenant"), kind, r.PathValue("id"))
		return reply(http.StatusOK, tok, err, s.toWireToken)
	}
}

// ---- instances and approvals

type wireOperatorInstance struct {
	ID               string        `json:"id"`
	Name             string        `json:"name"`
	Delivery         *wireDelivery `json:"delivery,omitempty"`
	ApprovalValidity string        `json:"approval_validity"`
	CreatedAt        string        `json:"created_at"`
	DeletedAt        *string       `json:"deleted_at,omitempty"`
}

func toWireOperatorInstance(in *agentowl.Instance) wireOperatorInstance {
	wi := toWireInstance(in)
	return wireOperatorInstance{ID: in.ID, Name: in.Name, Delivery: wi.Delivery, ApprovalValidity: formatDuration(in.ApprovalValidity),
		CreatedAt: timestamp(in.CreatedAt), DeletedAt: timestampPtr(in.DeletedAt)}
}

// formatDuration writes d in the contract's Duration form (30s, 5m, 2h).
func formatDuration(d time.Duration) string {
	switch {
	case d%time.Hour == 0:
		return strconv.FormatInt(int64(d/time.Hour), 10) + "h"
	case d%time.Minute == 0:
		return strconv.FormatInt(int64(d/time.Minute), 10) + "m"
	}
	return strconv.FormatInt(int64(d/time.Second), 10) + "s"
}

// tenant resolves the path's membership for the outbox views, which have
// no use-case service of their own; the use-case services resolve it
// themselves from the principal and the tenant name.
func (s *Server) tenant(r *http.Request, p *access.Principal, role agentowl.Role) (*agentowl.Membership, error) {
	return p.Tenant(r.PathValue("tenant"), role)
}

func (s *Server) listInstances(r *http.Request, p *access.Principal) (int, any, error) {
	insts, err := s.approval.TenantInstances(r.Context(), p, r.PathValue("tenant"))
	return http.StatusOK, listOf(insts, toWireOperatorInstance), err
}

func (s *Server) inspectInstance(r *http.Request, p *access.Principal) (int, any, error) {
	inst, err := s.approval.TenantInstance(r.Context(), p, r.PathValue("tenant"), r.PathValue("id"))
	return reply(http.StatusOK, inst, err, toWireOperatorInstance)
}

func (s *Server) patchInstance(r *http.Request, p *access.Principal) (int, any, error) {
	fields, err := readObject(r, "approval_validity")
	if err != nil {
		return 0, nil, err
	}
	var v string
	if err := requiredField(fields, "approval_validity", &v); err != nil {
		return 0, nil, err
	}
	d, ok := agentowl.ParseDuration(v)
	if !ok {
		return 0, nil, agentowl.FieldError(agentowl.ECodeInvalidField, "approval_validity", "approval_validity must be a duration such as 5m.")
	}
	inst, err := s.approval.SetApprovalValidity(r.Context(), p, r.PathValue("tenant"), r.PathValue("id"), d)
	return reply(http.StatusOK, inst, err, toWireOperatorInstance)
}

// wireApproval is the operator view of a request: the exact provider object
// plus who asked and who decided.
type wireApproval struct {
	Request    *WireRequest `json:"request"`
	InstanceID string       `json:"instance_id"`
	DecidedBy  string       `json:"decided_by,omitempty"`
}

func toWireApproval(r *agentowl.ApprovalRequest) wireApproval {
	w := wireApproval{Request: toWireRequest(r), InstanceID: r.InstanceID}
	if r.Decision != nil {
		w.DecidedBy = r.Decision.DecidedBy
	}
	return w
}

func (s *Server) listApprovals(r *http.Request, p *access.Principal) (int, any, error) {
	limit, err := limitParam(r)
	if err != nil {
		return 0, nil, err
	}
	params := approval.ListFilter{InstanceID: r.URL.Query().Get("instance"), Limit: limit}
	if st := r.URL.Query().Get("status"); st != "" {
		switch agentowl.ApprovalStatus(st) {
		case agentowl.StatusPending, agentowl.StatusApproved, agentowl.StatusDenied, agentowl.StatusExpired, agentowl.StatusCancelled:
			params.Status = agentowl.ApprovalStatus(st)
		default:
			return 0, nil, agentowl.FieldError(agentowl.ECodeInvalidField, "status", "status must be pending, approved, denied, expired or cancelled.")
		}
	}
	reqs, err := s.approval.ListRequests(r.Context(), p, r.PathValue("tenant"), params)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, listOf(reqs, toWireApproval), nil
}

func (s *Server) inspectApproval(r *http.Request, p *access.Principal) (int, any, error) {
	req, err := s.approval.TenantRequest(r.Context(), p, r.PathValue("tenant"), r.PathValue("id"))
	return reply(http.StatusOK, req, err, toWireApproval)
}

// decideApproval records approve or deny and answers with the exact provider
// request object, as GET /v1/requests/{id} would return it.
func (s *Server) decideApproval(r *http.Request, p *access.Principal) (int, any, error) {
	fields, err := readObject(r, "decision", "note", "valid_for")
	if err != nil {
		return 0, nil, err
	}
	var decision, validFor string
	var dp approval.DecideParams
	if err := requiredField(fields, "decision", &decision); err != nil {
		return 0, nil, err
	}
	switch decision {
	case "approve":
		dp.Approve = true
	case "deny":
	default:
		return 0, nil, agentowl.FieldError(agentowl.ECodeInvalidField, "decision", "decision must be approve or deny.")
	}
	if _, err := field(fields, "note", &dp.Note); err != nil {
		return 0, nil, err
	}
	if present, err := field(fields, "valid_for", &validFor); err != nil {
		return 0, nil, err
	} else if present {
		d, ok := agentowl.ParseDuration(validFor)
		if !ok || !dp.Approve {
			return 0, nil, agentowl.FieldError(agentowl.ECodeInvalidField, "valid_for", "valid_for is a duration such as 5m, for approvals only.")
		}
		dp.ValidFor = d
	}
	req, err := s.approval.Decide(r.Context(), p, r.PathValue("tenant"), r.PathValue("id"), dp)
	return reply(http.StatusOK, req, err, toWireRequest)
}

// ---- policies and audit

type wirePolicy struct {
	ID         string `json:"id"`
	Name       string `json:"name"`
	InstanceID string `json:"instance_id,omitempty"`
	Tool       string `json:"tool"`
	Condition  string `json:"condition,omitempty"`
	Effect     string `json:"effect"`
	Note       string `json:"note,omitempty"`
	Priority   int    `json:"priority"`
	CreatedAt  string `json:"created_at"`
}

func toWirePolicy(p *agentowl.Policy) wirePolicy {
	return wirePolicy{ID: p.ID, Name: p.Name, InstanceID: p.InstanceID, Tool: p.Tool, Condition: p.Condition,
		Effect: string(p.Effect), Note: p.Note, Priority: p.Priority, CreatedAt: timestamp(p.CreatedAt)}
}

func (s *Server) listPolicies(r *http.Request, p *access.Principal) (int, any, error) {
	rules, err := s.approval.ListPolicies(r.Context(), p, r.PathValue("tenant"))
	return http.StatusOK, listOf(rules, toWirePolicy), err
}

func (s *Server) createPolicy(r *http.Request, p *access.Principal) (int, any, error) {
	fields, err := readObject(r, "name", "instance_id", "tool", "condition", "effect", "note", "priority")
	if err != nil {
		return 0, nil, err
	}
	var rule agentowl.Policy
	var effect string
	if err := requiredField(fields, "tool", &rule.Tool); err != nil {
		return 0, nil, err
	}
	if err := requiredField(fields, "effect", &effect); err != nil {
		return 0, nil, err
	}
	rule.Effect = agentowl.PolicyEffect(effect)
	for name, dst := range map[string]any{"name": &rule.Name, "instance_id": &rule.InstanceID, "condition": &rule.Condition,
		"note": &rule.Note, "priority": &rule.Priority} {
		if _, err := field(fields, name, dst); err != nil {
			return 0, nil, err
		}
	}
	created, err := s.approval.CreatePolicy(r.Context(), p, r.PathValue("tenant"), &rule)
	return reply(http.StatusCreated, created, err, toWirePolicy)
}

func (s *Server) deletePolicy(r *http.Request, p *access.Principal) (int, any, error) {
	return http.StatusNoContent, nil, s.approval.DeletePolicy(r.Context(), p, r.PathValue("tenant"), r.PathValue("id"))
}

type wireAudit struct {
	ID        int64          `json:"id"`
	At        string         `json:"at"`
	Actor     string         `json:"actor"`
	Action    string         `json:"action"`
	Target    string         `json:"target"`
	RequestID string         `json:"request_id"`
	Details   map[string]any `json:"details"`
}

func (s *Server) listAudit(r *http.Request, p *access.Principal) (int, any, error) {
	limit, err := limitParam(r)
	if err != nil {
		return 0, nil, err
	}
	entries, err := s.access.ListAudit(r.Context(), p, r.PathValue("tenant"), limit)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, listOf(entries, func(e *agentowl.AuditEntry) wireAudit {
		return wireAudit{ID: e.ID, At: timestamp(e.At), Actor: e.Actor, Action: e.Action, Target: e.Target,
			RequestID: e.RequestID, Details: e.Details}
	}), nil
}
