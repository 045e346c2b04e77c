package work

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/access"
	"github.com/agentowl/agentowl/webhook"
)

// Endpoint limits (docs/limits.md).
const (
	maxNameBytes           = 256
	maxURLBytes            = 2048
	minDecisionSecretBytes = 16
	maxDecisionSecretBytes = 1024
	maxLabelBytes          = 256
)

// Runtime credential scopes.
const (
	// ScopeCallbacks allows POST /runtime/v1/work/{work}/callbacks.
	ScopeCallbacks = "callbacks:write"
	// ScopeAttachments allows reading the work's retained attachments
	// (GET /runtime/v1/work/{work}/attachments…).
	ScopeAttachments = "attachments:read"
	// ScopeDecisions allows decision recovery: GET
	// /runtime/v1/work/{work}/decisions and POST …/decisions/{decision}/receipt.
	ScopeDecisions = "decisions:read"
)

// Scopes lists every scope a runtime credential may hold. A credential
// created without scopes gets them all: what the seed's runtime does with
// its one token (callbacks, decision recovery and receipts, attachments).
// Narrower credentials name theirs.
var Scopes = []string{ScopeCallbacks, ScopeAttachments, ScopeDecisions}

// EndpointInput is a proposed endpoint, or a change to one: nil fields are
// left as they are on update. An empty DecisionURL on update removes the
// decision settings.
type EndpointInput struct {
	Name           *string
	URL            *string
	AgentWork      *bool
	DecisionURL    *string
	DecisionSecret *string
	// Overdue, when set, replaces the endpoint's overdue expectations (its
	// nil fields keep the server's defaults; a zero duration turns a rule
	// off).
	Overdue *agentowl.EndpointOverdue
}

// MaxOverdueDuration bounds an endpoint's overdue expectation durations.
const MaxOverdueDuration = 90 * 24 * time.Hour

// checkOverdue accepts durations of whole seconds up to
// MaxOverdueDuration, or zero (the rule off).
func checkOverdue(o *agentowl.EndpointOverdue) error {
	for _, f := range []struct {
		name string
		d    *time.Duration
	}{{"overdue.accept_within", o.AcceptWithin}, {"overdue.report_interval", o.ReportInterval}} {
		if f.d != nil && (*f.d < 0 || *f.d > MaxOverdueDuration || *f.d%time.Second != 0) {
			return agentowl.FieldError(agentowl.ECodeInvalidField, f.name,
				"%s must be whole seconds up to %s, or off.", f.name, MaxOverdueDuration)
		}
	}
	return nil
}

// EndpointResult is an endpoint and, on creation and rotation only, its
// signing secret in the clear.
type EndpointResult struct {
	Endpoint      *agentowl.Endpoint
	SigningSecret string
}

func (s *Service) checkEndpointURL(param, raw string) error {
	if len(raw) > maxURLBytes {
		return agentowl.FieldError(agentowl.ECodeInvalidWebhookURL, param, "The URL is longer than %d bytes.", maxURLBytes)
	}
	if err := agentowl.ValidateWebhookURL(raw); err != nil {
		var ae *agentowl.Error
		if errors.As(err, &ae) {
			return agentowl.FieldError(agentowl.ECodeInvalidWebhookURL, param, "%s", ae.Message)
		}
		return err
	}
	if s.checkURL != nil {
		if err := s.checkURL(raw); err != nil {
			return agentowl.FieldError(agentowl.ECodeInvalidWebhookURL, param, "The URL is not allowed: %s.", err)
		}
	}
	return nil
}

func checkName(name string) error {
	if strings.TrimSpace(name) == "" || len(name) > maxNameBytes || !utf8.ValidString(name) {
		return agentowl.FieldError(agentowl.ECodeInvalidField, "name", "name must be 1-%d bytes of text.", maxNameBytes)
	}
	return nil
}

// checkDecisionSecret accepts a bearer secret that fits an Authorization
// header: visible ASCII only.
func checkDecisionSecret(secret string) error {
	if len(secret) < minDecisionSecretBytes || len(secret) > maxDecisionSecretBytes {
		return agentowl.FieldError(agentowl.ECodeInvalidField, "decision_secret",
			"decision_secret must be %d-%d bytes.", minDecisionSecretBytes, maxDecisionSecretBytes)
	}
	for i := 0; i < len(secret); i++ {
		if secret[i] <= ' ' || secret[i] > '~' {
			return agentowl.FieldError(agentowl.ECodeInvalidField, "decision_secret",
				"decision_secret must be visible ASCII without spaces.")
		}
	}
	return nil
}

// applyDecision sets or clears an endpoint's decision settings.
func (s *Service) applyDecision(ep *agentowl.Endpoint, in EndpointInput) error {
	switch {
	case in.DecisionURL == nil && in.DecisionSecret == nil:
		return nil
	case in.DecisionURL != nil && *in.DecisionURL == "":
		if in.DecisionSecret != nil && *in.DecisionSecret != "" {
			return agentowl.FieldError(agentowl.ECodeInvalidField, "decision_secret", "decision_secret needs a decision_url.")
		}
		ep.DecisionURL, ep.DecisionSecret = "", nil
		return nil
	case in.DecisionURL == nil:
		return agentowl.FieldError(agentowl.ECodeMissingField, "decision_url", "decision_secret needs a decision_url.")
	case in.DecisionSecret == nil && ep.DecisionSecret == nil:
		return agentowl.FieldError(agentowl.ECodeMissingField, "decision_secret", "A decision_url needs a decision_secret.")
	}
	if err := s.checkEndpointURL("decision_url", *in.DecisionURL); err != nil {
		return err
	}
	ep.DecisionURL = *in.DecisionURL
	if in.DecisionSecret != nil {
		if err := checkDecisionSecret(*in.DecisionSecret); err != nil {
			return err
		}
		ep.DecisionSecret = []byte(*in.DecisionSecret) // sealed at rest by the store
	}
	return nil
}

func nameTaken(name string) error {
	return agentowl.FieldError(agentowl.ECodeAlreadyExists, "name", "An endpoint named %q already exists in this tenant.", name)
}

// CreateEndpoint adds an endpoint with a fresh signing secret, returned
// once. Admin only.
func (s *Service) CreateEndpoint(ctx context.Context, p *access.Principal, tenant string, in EndpointInput) (*EndpointResult, error) {
	m, err := p.Tenant(tenant, agentowl.RoleAdmin)
	if err != nil {
		return nil, err
	}
	if in.Name == nil {
		return nil, agentowl.FieldError(agentowl.ECodeMissingField, "name", "name is required.")
	}
	if in.URL == nil {
		return nil, agentowl.FieldError(agentowl.ECodeMissingField, "url", "url is required.")
	}
	if err := checkName(*in.Name); err != nil {
		return nil, err
	}
	if err := s.checkEndpointURL("url", *in.URL); err != nil {
		return nil, err
	}
	now := s.clock.Now()
	ep := &agentowl.Endpoint{ID: agentowl.NewID("ep"), TenantID: m.TenantID, Name: *in.Name, URL: *in.URL, CreatedAt: now, UpdatedAt: now}
	if in.AgentWork != nil {
		ep.AgentWork = *in.AgentWork
	}
	if in.DecisionURL != nil && *in.DecisionURL == "" {
		in.DecisionURL = nil
	}
	if err := s.applyDecision(ep, in); err != nil {
		return nil, err
	}
	if in.Overdue != nil {
		if err := checkOverdue(in.Overdue); err != nil {
			return nil, err
		}
		ep.Overdue = *in.Overdue
	}
	secret := webhook.NewSecret()
	ep.SigningSecret = []byte(secret) // sealed at rest by the store
	err = s.store.Write(ctx, func(tx agentowl.Tx) error {
		if err := tx.EndpointCreate(ctx, ep); err != nil {
			if errors.Is(err, agentowl.ErrConflict) {
				return nameTaken(ep.Name)
			}
			return err
		}
		return access.Audit(ctx, tx, now, m.TenantID, p, "endpoint.create", "endpoint:"+ep.ID, endpointDetails(ep))
	})
	if err != nil {
		return nil, err
	}
	return &EndpointResult{Endpoint: ep, SigningSecret: secret}, nil
}

// endpointDetails is what the audit log records of an endpoint: never a
// secret.
func endpointDetails(ep *agentowl.Endpoint) map[string]any {
	d := map[string]any{"name": ep.Name, "url": ep.URL, "agent_work": ep.AgentWork, "decision_url": ep.DecisionURL}
	if o := OverdueDetails(ep.Overdue); len(o) > 0 {
		d["overdue"] = o
	}
	return d
}

// OverdueDetails shows the expectations an endpoint sets itself: durations
// as Go durations ("5m0s"), "off" for zero.
func OverdueDetails(o agentowl.EndpointOverdue) map[string]any {
	out := map[string]any{}
	for name, d := range map[string]*time.Duration{"accept_within": o.AcceptWithin, "report_interval": o.ReportInterval} {
		switch {
		case d == nil:
		case *d == 0:
			out[name] = "off"
		default:
			out[name] = d.String()
		}
	}
	if o.InputExpiry != nil {
		out["input_expiry"] = *o.InputExpiry
	}
	return out
}

// UpdateEndpoint changes an endpoint's name, URL, agent work or decision
// settings. Queued deliveries go to the new URL. Admin only.
func (s *Service) UpdateEndpoint(ctx context.Context, p *access.Principal, tenant, id string, in EndpointInput) (*agentowl.Endpoint, error) {
	m, err := p.Tenant(tenant, agentowl.RoleAdmin)
	if err != nil {
		return nil, err
	}
	if in.Name != nil {
		if err := checkName(*in.Name); err != nil {
			return nil, err
		}
	}
	if in.URL != nil {
		if err := s.checkEndpointURL("url", *in.URL); err != nil {
			return nil, err
		}
	}
	if in.Overdue != nil {
		if err := checkOverdue(in.Overdue); err != nil {
			return nil, err
		}
	}
	return s.changeEndpoint(ctx, m, id, func(tx agentowl.Tx, ep *agentowl.Endpoint) error {
		before := endpointDetails(ep)
		if in.Name != nil {
			ep.Name = *in.Name
		}
		if in.URL != nil {
			ep.URL = *in.URL
		}
		if in.AgentWork != nil {
			ep.AgentWork = *in.AgentWork
		}
		if err := s.applyDecision(ep, in); err != nil {
			return err
		}
		if in.Overdue != nil {
			ep.Overdue = *in.Overdue
		}
		ep.UpdatedAt = s.clock.Now()
		if err := tx.EndpointUpdate(ctx, ep); err != nil {
			if errors.Is(err, agentowl.ErrConflict) {
				return nameTaken(ep.Name)
			}
			return err
		}
		details := map[string]any{"before": before, "after": endpointDetails(ep)}
		if in.DecisionSecret != nil {
			details["decision_secret_replaced"] = true
		}
		return access.Audit(ctx, tx, ep.UpdatedAt, m.TenantID, p, "endpoint.update", "endpoint:"+ep.ID, details)
	})
}

// RotateSigningSecret replaces an endpoint's signing secret; the new one is
// returned once and signs every attempt from now on, queued ones included.
// Admin only.
func (s *Service) RotateSigningSecret(ctx context.Context, p *access.Principal, tenant, id string) (*EndpointResult, error) {
	m, err := p.Tenant(tenant, agentowl.RoleAdmin)
	if err != nil {
		return nil, err
	}
	secret := webhook.NewSecret()
	out, err := s.changeEndpoint(ctx, m, id, func(tx agentowl.Tx, ep *agentowl.Endpoint) error {
		ep.SigningSecret = []byte(secret)
		ep.UpdatedAt = s.clock.Now()
		if err := tx.EndpointUpdate(ctx, ep); err != nil {
			return err
		}
		return access.Audit(ctx, tx, ep.UpdatedAt, m.TenantID, p, "endpoint.rotate_secret", "endpoint:"+ep.ID, nil)
	})
	if err != nil {
		return nil, err
	}
	return &EndpointResult{Endpoint: out, SigningSecret: secret}, nil
}

// DeleteEndpoint retires an endpoint: its runtime credentials are revoked
// and its queued deliveries cancelled. It is refused (endpoint_in_use)
// while bindings route to it. Work records are kept. Admin only.
func (s *Service) DeleteEndpoint(ctx context.Context, p *access.Principal, tenant, id string) error {
	m, err := p.Tenant(tenant, agentowl.RoleAdmin)
	if err != nil {
		return err
	}
	_, err = s.changeEndpoint(ctx, m, id, func(tx agentowl.Tx, ep *agentowl.Endpoint) error {
		n, err := tx.BindingCountByEndpoint(ctx, ep.ID)
		if err != nil {
			return err
		}
		if n > 0 {
			return agentowl.Errorf(agentowl.ECodeEndpointInUse,
				"%d binding(s) route events to endpoint %q; delete them first.", n, ep.ID)
		}
		now := s.clock.Now()
		ep.DeletedAt, ep.UpdatedAt = &now, now
		if err := tx.EndpointUpdate(ctx, ep); err != nil {
			return err
		}
		if err := tx.RuntimeCredentialRevokeByEndpoint(ctx, ep.ID, now); err != nil {
			return err
		}
		cancelled, err := tx.MessageCancelDestination(ctx, Destination(ep.ID), now, deliveredGrace)
		if err != nil {
			return err
		}
		return access.Audit(ctx, tx, now, m.TenantID, p, "endpoint.delete", "endpoint:"+ep.ID,
			map[string]any{"name": ep.Name, "cancelled_deliveries": len(cancelled)})
	})
	return err
}

// PauseEndpoint holds the endpoint's handoffs: events keep being recorded
// and their handoffs queued, but no attempt starts until ResumeEndpoint,
// so an operator can re-thread a message (conversations link) before the
// runtime sees it. Handoffs already queued are held too; an attempt in
// flight ends as usual. Pausing a paused endpoint changes nothing. Admin
// only; audited.
func (s *Service) PauseEndpoint(ctx context.Context, p *access.Principal, tenant, id string) (*agentowl.Endpoint, error) {
	return s.setPaused(ctx, p, tenant, id, true)
}

// ResumeEndpoint hands the endpoint's held handoffs off, claimed in the
// order they were queued, and ends the pause. Admin only; audited.
func (s *Service) ResumeEndpoint(ctx context.Context, p *access.Principal, tenant, id string) (*agentowl.Endpoint, error) {
	return s.setPaused(ctx, p, tenant, id, false)
}

func (s *Service) setPaused(ctx context.Context, p *access.Principal, tenant, id string, pause bool) (*agentowl.Endpoint, error) {
	m, err := p.Tenant(tenant, agentowl.RoleAdmin)
	if err != nil {
		return nil, err
	}
	out, err := s.changeEndpoint(ctx, m, id, func(tx agentowl.Tx, ep *agentowl.Endpoint) (err error) {
		if (ep.PausedAt != nil) == pause {
			return nil // already so: nothing to record
		}
		now := s.clock.Now()
		action, n := "endpoint.resume", 0
		if pause {
			ep.PausedAt, action = &now, "endpoint.pause"
			n, err = tx.MessageHoldDestination(ctx, Destination(ep.ID))
		} else {
			ep.PausedAt = nil
			n, err = tx.MessageReleaseDestination(ctx, Destination(ep.ID), now)
		}
		if err != nil {
			return err
		}
		ep.UpdatedAt = now
		if err := tx.EndpointUpdate(ctx, ep); err != nil {
			return err
		}
		return access.Audit(ctx, tx, now, m.TenantID, p, action, "endpoint:"+ep.ID,
			map[string]any{"name": ep.Name, "handoffs": n})
	})
	if err == nil && !pause {
		s.wake()
	}
	return out, err
}

// deliveredGrace is how long cancelled handoffs stay visible, matching the
// delivery engine's default.
const deliveredGrace = 24 * time.Hour

// ListEndpoints lists a tenant's live endpoints. Members may.
func (s *Service) ListEndpoints(ctx context.Context, p *access.Principal, tenant string) ([]*agentowl.Endpoint, error) {
	return access.ReadAs(ctx, s.store, p, tenant, agentowl.RoleMember, func(tx agentowl.Tx, m *agentowl.Membership) ([]*agentowl.Endpoint, error) {
		return tx.EndpointList(ctx, m.TenantID)
	})
}

// EndpointView is an endpoint with its runtime credentials.
type EndpointView struct {
	Endpoint    *agentowl.Endpoint
	Credentials []*agentowl.RuntimeCredential
	Bindings    int
}

// InspectEndpoint returns a live endpoint of the tenant. Members may.
func (s *Service) InspectEndpoint(ctx context.Context, p *access.Principal, tenant, id string) (*EndpointView, error) {
	return access.ReadAs(ctx, s.store, p, tenant, agentowl.RoleMember, func(tx agentowl.Tx, m *agentowl.Membership) (v *EndpointView, err error) {
		v = &EndpointView{}
		if v.Endpoint, err = tenantEndpoint(ctx, tx, m, id); err != nil {
			return nil, err
		}
		if v.Credentials, err = tx.RuntimeCredentialList(ctx, id); err != nil {
			return nil, err
		}
		v.Bindings, err = tx.BindingCountByEndpoint(ctx, id)
		return v, err
	})
}

// EndpointForBinding returns the live endpoint a new binding would route
// to, for ingress: not_found otherwise.
func EndpointForBinding(ctx context.Context, tx agentowl.Tx, m *agentowl.Membership, id string) (*agentowl.Endpoint, error) {
	return tenantEndpoint(ctx, tx, m, id)
}

// ---- runtime credentials

// IssuedCredential is a new runtime credential and its secret, shown once.
type IssuedCredential struct {
	Credential *agentowl.RuntimeCredential
	Secret     string
}

func (s *Service) checkScopes(scopes []string) ([]string, error) {
	if len(scopes) == 0 {
		return slices.Sorted(slices.Values(Scopes)), nil
	}
	var out []string
	for _, sc := range scopes {
		if !slices.Contains(Scopes, sc) {
			return nil, agentowl.FieldError(agentowl.ECodeInvalidField, "scopes", "Unknown scope %q; scopes are %s.", sc,
				strings.Join(Scopes, ", "))
		}
		if !slices.Contains(out, sc) {
			out = append(out, sc)
		}
	}
	slices.Sort(out)
	return out, nil
}

// CreateCredential issues a runtime credential bound to an endpoint:
// expiring after days, 1 to Config.MaxCredentialDays (nil: the configured
// default; 0 is refused, it is no lifetime), with scopes (default: all of
// Scopes). Admin only.
func (s *Service) CreateCredential(ctx context.Context, p *access.Principal, tenant, endpointID, label string, days *int, scopes []string) (*IssuedCredential, error) {
	m, err := p.Tenant(tenant, agentowl.RoleAdmin)
	if err != nil {
		return nil, err
	}
	lifetime := s.cfg.DefaultCredentialDays
	if days != nil {
		lifetime = *days
	}
	if lifetime < 1 || lifetime > s.cfg.MaxCredentialDays {
		return nil, agentowl.FieldError(agentowl.ECodeInvalidField, "days", "days must be between 1 and %d.", s.cfg.MaxCredentialDays)
	}
	if len(label) > maxLabelBytes || !utf8.ValidString(label) {
		return nil, agentowl.FieldError(agentowl.ECodeInvalidField, "label", "label is limited to %d bytes of text.", maxLabelBytes)
	}
	if scopes, err = s.checkScopes(scopes); err != nil {
		return nil, err
	}
	secret := agentowl.NewTokenSecret(agentowl.TokenRuntime)
	now := s.clock.Now()
	c := &agentowl.RuntimeCredential{ID: agentowl.NewID("rtc"), TenantID: m.TenantID, EndpointID: endpointID, Hash: agentowl.HashToken(secret),
		Label: label, Scopes: scopes, CreatedAt: now, ExpiresAt: now.Add(time.Duration(lifetime) * 24 * time.Hour)}
	err = s.store.Write(ctx, func(tx agentowl.Tx) error {
		if _, err := tenantEndpoint(ctx, tx, m, endpointID); err != nil {
			return err
		}
		if err := tx.RuntimeCredentialCreate(ctx, c); err != nil {
			return err
		}
		return access.Audit(ctx, tx, now, m.TenantID, p, "runtime_credential.create", "runtime-credential:"+c.ID,
			map[string]any{"endpoint": endpointID, "scopes": scopes, "expires_at": c.ExpiresAt.Format(time.RFC3339), "label": label})
	})
	if err != nil {
		return nil, err
	}
	return &IssuedCredential{Credential: c, Secret: secret}, nil
}

// ListCredentials lists an endpoint's runtime credentials (never their
// secrets), revoked and expired ones included. Admin only.
func (s *Service) ListCredentials(ctx context.Context, p *access.Principal, tenant, endpointID string) ([]*agentowl.RuntimeCredential, error) {
	m, err := p.Tenant(tenant, agentowl.RoleAdmin)
	if err != nil {
		return nil, err
	}
	var out []*agentowl.RuntimeCredential
	err = s.store.Read(ctx, func(tx agentowl.Tx) error {
		if _, err := tenantEndpoint(ctx, tx, m, endpointID); err != nil {
			return err
		}
		out, err = tx.RuntimeCredentialList(ctx, endpointID)
		return err
	})
	return out, err
}

// RevokeCredential revokes a runtime credential at once; repeating it
// changes nothing. Admin only.
func (s *Service) RevokeCredential(ctx context.Context, p *access.Principal, tenant, id string) (*agentowl.RuntimeCredential, error) {
	var out *agentowl.RuntimeCredential
	err := access.WriteAs(ctx, s.store, p, tenant, agentowl.RoleAdmin, func(tx agentowl.Tx, m *agentowl.Membership) error {
		c, err := ofTenant(ctx, m, "runtime credential", id, tx.RuntimeCredentialGet,
			func(c *agentowl.RuntimeCredential) bool { return c.TenantID == m.TenantID })
		if err != nil {
			return err
		}
		now := s.clock.Now()
		if c.RevokedAt == nil {
			if err := tx.RuntimeCredentialRevoke(ctx, id, now); err != nil {
				return err
			}
			if err := access.Audit(ctx, tx, now, m.TenantID, p, "runtime_credential.revoke", "runtime-credential:"+id,
				map[string]any{"endpoint": c.EndpointID}); err != nil {
				return err
			}
		}
		out, err = tx.RuntimeCredentialGet(ctx, id)
		return err
	})
	return out, err
}
