package ingress

import (
	"context"
	"encoding/base32"
	"encoding/base64"
	"errors"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/access"
	"github.com/agentowl/agentowl/internal/work"
	"github.com/agentowl/agentowl/webhook"
)

// Limits of binding inputs (docs/limits.md).
const (
	maxAddressBytes   = 254 // RFC 5321's path limit, less the brackets
	maxLocalPartBytes = 64
	maxAuthTokenBytes = 256
)

// BindingInput is a proposed binding.
type BindingInput struct {
	Channel    string
	Name       string
	EndpointID string
	// SigningSecret (webhook only), when set, is the whsec_ secret the
	// sender signs events with (Standard Webhooks); unsigned events are
	// then refused.
	SigningSecret string
	// Address (smtp only) is the receiving email address. Empty: a
	// generated local part at the configured SMTP domain.
	Address string
	// AuthToken (sms and voice, required) is the provider account's auth
	// token that signs its webhooks (X-Twilio-Signature).
	AuthToken string
	// HandoffDelaySeconds (0 to agentowl.MaxHandoffDelay) holds each
	// event's handoff that long: a window to re-thread it (conversations
	// link).
	HandoffDelaySeconds int
}

// IssuedBinding is a new binding with what is shown once: its ingress URL
// (every channel but smtp; only the token's hash is stored) and, for
// cloudflare-email, the secret the Worker sends.
type IssuedBinding struct {
	Binding *agentowl.Binding
	URL     string
	Secret  string
}

// CreateBinding adds a receiving address that routes to an endpoint of the
// tenant. Admin only. A named smtp address must be the tenant's
// (addressAllowed, domains.go) and free; otherwise, whatever the reason,
// the answer is the one invalid_field of errAddressRefused.
func (s *Service) CreateBinding(ctx context.Context, p *access.Principal, tenant string, in BindingInput) (*IssuedBinding, error) {
	m, err := p.Tenant(tenant, agentowl.RoleAdmin)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(Channels, in.Channel) {
		return nil, agentowl.FieldError(agentowl.ECodeInvalidField, "channel", "channel must be one of %s.",
			strings.Join(Channels, ", "))
	}
	if in.EndpointID == "" {
		return nil, agentowl.FieldError(agentowl.ECodeMissingField, "endpoint", "endpoint is required.")
	}
	if len(in.Name) > maxNameBytes || !utf8.ValidString(in.Name) {
		return nil, agentowl.FieldError(agentowl.ECodeInvalidField, "name", "name is limited to %d bytes of text.", maxNameBytes)
	}
	if in.HandoffDelaySeconds < 0 || in.HandoffDelaySeconds > int(agentowl.MaxHandoffDelay/time.Second) {
		return nil, agentowl.FieldError(agentowl.ECodeInvalidField, "handoff_delay_seconds",
			"handoff_delay_seconds must be a whole number of seconds from 0 to %d.", int(agentowl.MaxHandoffDelay/time.Second))
	}
	for field, given := range map[string]bool{"signing_secret": in.SigningSecret != "", "address": in.Address != "",
		"auth_token": in.AuthToken != ""} {
		if given && !channelTakes(in.Channel, field) {
			return nil, agentowl.FieldError(agentowl.ECodeInvalidField, field, "A %s binding takes no %s.", in.Channel, field)
		}
	}
	now := s.clock.Now()
	b := &agentowl.Binding{ID: agentowl.NewID("bnd"), TenantID: m.TenantID, Channel: in.Channel, Name: in.Name,
		EndpointID: in.EndpointID, HandoffDelay: time.Duration(in.HandoffDelaySeconds) * time.Second, CreatedAt: now}
	out := &IssuedBinding{Binding: b}
	if err := s.channelInputs(b, in, out); err != nil {
		return nil, err
	}
	err = s.store.Write(ctx, func(tx agentowl.Tx) error {
		if _, err := work.EndpointForBinding(ctx, tx, m, in.EndpointID); err != nil {
			return err
		}
		if b.Channel == ChannelSMTP && in.Address != "" {
			ok, err := addressAllowed(ctx, tx, m.TenantID, b.Address)
			if err != nil {
				return err
			}
			if !ok {
				return errAddressRefused()
			}
		}
		if err := tx.BindingCreate(ctx, b); err != nil {
			if errors.Is(err, agentowl.ErrConflict) && b.Address != "" {
				return errAddressRefused()
			}
			return err
		}
		return access.Audit(ctx, tx, now, m.TenantID, p, "binding.create", "binding:"+b.ID,
			map[string]any{"channel": b.Channel, "endpoint": b.EndpointID, "name": b.Name, "signed": b.SigningSecret != nil,
				"address": b.Address, "handoff_delay_seconds": int(b.HandoffDelay / time.Second)})
	})
	if errors.Is(err, agentowl.ErrConflict) && b.Address != "" { // PostgreSQL may report the taken address at COMMIT
		return nil, errAddressRefused()
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// channelTakes reports whether a binding of channel takes an optional
// input field.
func channelTakes(channel, field string) bool {
	switch field {
	case "signing_secret":
		return channel == ChannelWebhook
	case "address":
		return channel == ChannelSMTP
	case "auth_token":
		return channel == ChannelSMS || channel == ChannelVoice
	}
	return false
}

// channelInputs fills in what a binding of b's channel needs: its address
// or URL token, and its secrets, and what out shows once.
func (s *Service) channelInputs(b *agentowl.Binding, in BindingInput, out *IssuedBinding) error {
	if b.Channel == ChannelSMTP {
		addr := in.Address
		if addr == "" {
			if s.cfg.SMTPDomain == "" {
				return agentowl.FieldError(agentowl.ECodeMissingField, "address",
					"address is required: no SMTP domain is configured (AGENTOWL_SMTP_DOMAIN) to generate one at.")
			}
			local := strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(random(8)))
			addr = generatedPrefix + local + "@" + s.cfg.SMTPDomain
		}
		norm, ok := NormalizeAddress(addr)
		if !ok {
			return agentowl.FieldError(agentowl.ECodeInvalidField, "address",
				"address must be local-part@domain: at most %d bytes, an ASCII dot-atom local part of at most %d, a host name domain.",
				maxAddressBytes, maxLocalPartBytes)
		}
		b.Address = norm
		return nil
	}
	token := newToken()
	b.TokenHash, out.URL = hashToken(token), s.IngressURL(b.Channel, token)
	var provider string
	switch b.Channel {
	case ChannelWebhook:
		if in.SigningSecret == "" {
			return nil
		}
		if _, err := webhook.ParseSecret(in.SigningSecret); err != nil {
			return agentowl.FieldError(agentowl.ECodeInvalidField, "signing_secret",
				"signing_secret must be whsec_ followed by base64 of 24-64 bytes.")
		}
		b.SigningSecret = []byte(in.SigningSecret) // sealed at rest by the store
		return nil
	case ChannelCloudflareEmail:
		provider = "cfe_" + base64.RawURLEncoding.EncodeToString(random(32))
		out.Secret = provider
	case ChannelSMS, ChannelVoice:
		if in.AuthToken == "" {
			return agentowl.FieldError(agentowl.ECodeMissingField, "auth_token",
				"auth_token is required: the provider account's auth token that signs its webhooks.")
		}
		if err := textValue("auth_token", in.AuthToken, maxAuthTokenBytes); err != nil || strings.ContainsRune(in.AuthToken, ' ') {
			return agentowl.FieldError(agentowl.ECodeInvalidField, "auth_token",
				"auth_token must be at most %d bytes of text without spaces.", maxAuthTokenBytes)
		}
		provider = in.AuthToken
	}
	b.ProviderSecret = []byte(provider) // sealed at rest by the store
	return nil
}

// NormalizeAddress returns the canonical form of an email address as
// bindings store and match it: lower-case (addresses match whatever their
// case, as most mail systems do), an ASCII dot-atom local part of at most
// 64 bytes, a host name domain, at most 254 bytes in all. ok is false for
// anything else (quoted local parts, address literals, display names).
func NormalizeAddress(addr string) (norm string, ok bool) {
	if len(addr) == 0 || len(addr) > maxAddressBytes {
		return "", false
	}
	local, domain, found := strings.Cut(strings.ToLower(addr), "@")
	if !found || !dotAtom(local) || len(local) > maxLocalPartBytes || !hostName(domain) {
		return "", false
	}
	return local + "@" + domain, true
}

// dotAtom reports whether s is an RFC 5322 dot-atom of ASCII atext.
func dotAtom(s string) bool {
	if s == "" || s[0] == '.' || s[len(s)-1] == '.' || strings.Contains(s, "..") {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-/=?^_`{|}~.", c) >= 0) {
			return false
		}
	}
	return true
}

// hostName reports whether s is a host name: dot-separated labels of
// letters, digits and inner hyphens, at most 63 bytes each.
func hostName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

// ListBindings lists a tenant's live bindings. Members may.
func (s *Service) ListBindings(ctx context.Context, p *access.Principal, tenant string) ([]*agentowl.Binding, error) {
	return access.ReadAs(ctx, s.store, p, tenant, agentowl.RoleMember, func(tx agentowl.Tx, m *agentowl.Membership) ([]*agentowl.Binding, error) {
		return tx.BindingList(ctx, m.TenantID)
	})
}

// tenantBinding reads a live binding of membership m; not found names the
// tenant searched.
func tenantBinding(ctx context.Context, tx agentowl.Tx, m *agentowl.Membership, id string) (*agentowl.Binding, error) {
	b, err := tx.BindingGet(ctx, id)
	if errors.Is(err, agentowl.ErrNotFound) || (err == nil && (b.TenantID != m.TenantID || b.DeletedAt != nil)) {
		return nil, agentowl.Errorf(agentowl.ECodeNotFound, "No binding %q in tenant %q.", id, m.TenantName)
	}
	return b, err
}

// InspectBinding returns a live binding of the tenant. Members may.
func (s *Service) InspectBinding(ctx context.Context, p *access.Principal, tenant, id string) (*agentowl.Binding, error) {
	return access.ReadAs(ctx, s.store, p, tenant, agentowl.RoleMember, func(tx agentowl.Tx, m *agentowl.Membership) (*agentowl.Binding, error) {
		return tenantBinding(ctx, tx, m, id)
	})
}

// DeleteBinding retires a binding: its URL or address stops accepting
// events at once. Admin only.
func (s *Service) DeleteBinding(ctx context.Context, p *access.Principal, tenant, id string) error {
	return access.WriteAs(ctx, s.store, p, tenant, agentowl.RoleAdmin, func(tx agentowl.Tx, m *agentowl.Membership) error {
		b, err := tenantBinding(ctx, tx, m, id)
		if err != nil {
			return err
		}
		now := s.clock.Now()
		if err := tx.BindingDelete(ctx, b.ID, now); err != nil {
			return err
		}
		return access.Audit(ctx, tx, now, m.TenantID, p, "binding.delete", "binding:"+b.ID,
			map[string]any{"endpoint": b.EndpointID})
	})
}
