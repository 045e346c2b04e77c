// Package ingress turns what channels receive into events: bindings (a
// receiving address of a channel, routed to one endpoint), the generic
// webhook channel, conversations and routing. Each accepted event is stored
// durably, with its handoff (internal/work), before the channel is
// answered. It holds business rules only: no SQL, no HTTP serving.
package ingress

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/access"
	"github.com/agentowl/agentowl/internal/ratelimit"
	"github.com/agentowl/agentowl/internal/secret"
	"github.com/agentowl/agentowl/internal/store"
	"github.com/agentowl/agentowl/internal/work"
	"github.com/agentowl/agentowl/webhook"
)

// Config bounds what the webhook channel accepts. Every field has a default.
type Config struct {
	// MaxEventBytes caps an inbound event body; larger ones are 413.
	// Defaults to 256 KiB.
	MaxEventBytes int64
	// Limit bounds accepted events per binding, across processes. Defaults
	// to 6,000 per minute.
	Limit ratelimit.Limit
	// SignatureTolerance is how far a signed event's webhook-timestamp may
	// be from now. Defaults to 5m.
	SignatureTolerance time.Duration
}

func (c Config) withDefaults() Config {
	if c.MaxEventBytes <= 0 {
		c.MaxEventBytes = 256 << 10
	}
	if c.Limit.Per <= 0 {
		c.Limit = ratelimit.Limit{Events: 6000, Per: time.Minute}
	}
	if c.SignatureTolerance <= 0 {
		c.SignatureTolerance = webhook.DefaultTolerance
	}
	return c
}

// Input limits (docs/limits.md).
const (
	maxKeyBytes      = 256
	maxNameBytes     = 256
	maxHeaderEntries = 64
	maxHeaderBytes   = 16 << 10
)

// Header and field names of the webhook channel (docs/agent-work.md).
const (
	// HeaderConversationKey makes an event a follow-up of the open
	// conversation of its binding with that key.
	HeaderConversationKey = "AgentOwl-Conversation-Key"
	// FieldConversationKey is the body field read when the header is absent.
	FieldConversationKey = "conversation_key"
	// HeaderSender names who sent the event.
	HeaderSender = "AgentOwl-Sender"
	// HeaderIdempotencyKey deduplicates an unsigned sender's retries.
	HeaderIdempotencyKey = "Idempotency-Key"
)

// ChannelWebhook is the generic HTTP webhook channel.
const ChannelWebhook = "webhook"

// Service implements bindings and the webhook channel.
type Service struct {
	store store.Store
	clock agentowl.Clock
	work  *work.Service
	// box seals binding signing secrets: verifying an event needs them.
	box     *secret.Box
	cfg     Config
	limiter *ratelimit.Limiter
}

// New returns a Service that hands events over through w. box seals
// binding signing secrets (the store's box).
func New(st store.Store, clock agentowl.Clock, w *work.Service, box *secret.Box, cfg Config) *Service {
	cfg = cfg.withDefaults()
	return &Service{store: st, clock: clock, work: w, box: box, cfg: cfg,
		limiter: ratelimit.New("ingress-binding", cfg.Limit, st, clock)}
}

// Where a binding's signing secret is stored: it is sealed for that column
// of the binding's row.
const (
	bindingsTable        = "bindings"
	bindingSigningColumn = "signing_secret"
)

// MaxEventBytes is the largest event body accepted.
func (s *Service) MaxEventBytes() int64 { return s.cfg.MaxEventBytes }

func hashToken(token string) []byte { return agentowl.HashToken(token) }

// newToken returns an unguessable binding token: 32 random bytes.
func newToken() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return "in_" + base64.RawURLEncoding.EncodeToString(b[:])
}

// IngressURL is where a webhook binding with token receives events.
func (s *Service) IngressURL(token string) string {
	return s.work.Config().PublicURL + "/in/webhook/" + token
}

// ---- bindings

// BindingInput is a proposed binding.
type BindingInput struct {
	Channel    string
	Name       string
	EndpointID string
	// SigningSecret, when set, is the whsec_ secret the sender signs events
	// with (Standard Webhooks); unsigned events are then refused.
	SigningSecret string
}

// IssuedBinding is a new binding and its ingress URL, shown once: only the
// token's hash is stored.
type IssuedBinding struct {
	Binding *store.Binding
	URL     string
}

// CreateBinding adds a receiving address that routes to an endpoint of the
// tenant. Admin only.
func (s *Service) CreateBinding(ctx context.Context, p *access.Principal, tenant string, in BindingInput) (*IssuedBinding, error) {
	m, err := p.Tenant(tenant, agentowl.RoleAdmin)
	if err != nil {
		return nil, err
	}
	if in.Channel != ChannelWebhook {
		return nil, agentowl.FieldError(agentowl.ECodeInvalidField, "channel", "channel must be webhook (other channels come later).")
	}
	if in.EndpointID == "" {
		return nil, agentowl.FieldError(agentowl.ECodeMissingField, "endpoint", "endpoint is required.")
	}
	if len(in.Name) > maxNameBytes || !utf8.ValidString(in.Name) {
		return nil, agentowl.FieldError(agentowl.ECodeInvalidField, "name", "name is limited to %d bytes of text.", maxNameBytes)
	}
	token := newToken()
	now := s.clock.Now()
	b := &store.Binding{ID: work.NewID("bnd"), TenantID: m.TenantID, Channel: in.Channel, Name: in.Name,
		EndpointID: in.EndpointID, TokenHash: hashToken(token), CreatedAt: now}
	if in.SigningSecret != "" {
		if _, err := webhook.ParseSecret(in.SigningSecret); err != nil {
			return nil, agentowl.FieldError(agentowl.ECodeInvalidField, "signing_secret",
				"signing_secret must be whsec_ followed by base64 of 24-64 bytes.")
		}
		if b.SigningSecret, err = s.box.Seal(bindingsTable, bindingSigningColumn, b.ID, []byte(in.SigningSecret)); err != nil {
			return nil, err
		}
	}
	err = s.store.Write(ctx, func(tx store.Tx) error {
		if _, err := work.EndpointForBinding(ctx, tx, m, in.EndpointID); err != nil {
			return err
		}
		if err := tx.BindingCreate(ctx, b); err != nil {
			return err
		}
		return access.Audit(ctx, tx, now, m.TenantID, p, "binding.create", "binding:"+b.ID,
			map[string]any{"channel": b.Channel, "endpoint": b.EndpointID, "name": b.Name, "signed": b.SigningSecret != nil})
	})
	if err != nil {
		return nil, err
	}
	return &IssuedBinding{Binding: b, URL: s.IngressURL(token)}, nil
}

// ListBindings lists a tenant's live bindings. Members may.
func (s *Service) ListBindings(ctx context.Context, p *access.Principal, tenant string) ([]*store.Binding, error) {
	m, err := p.Tenant(tenant, agentowl.RoleMember)
	if err != nil {
		return nil, err
	}
	var out []*store.Binding
	err = s.store.Read(ctx, func(tx store.Tx) (err error) {
		out, err = tx.BindingList(ctx, m.TenantID)
		return err
	})
	return out, err
}

// tenantBinding reads a live binding of tenant scope m; not found names the
// tenant searched.
func tenantBinding(ctx context.Context, tx store.Tx, m *agentowl.TenantScope, id string) (*store.Binding, error) {
	b, err := tx.BindingGet(ctx, id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && (b.TenantID != m.TenantID || b.DeletedAt != nil)) {
		return nil, agentowl.Errorf(agentowl.ECodeNotFound, "No binding %q in tenant %q.", id, m.TenantName)
	}
	return b, err
}

// InspectBinding returns a live binding of the tenant. Members may.
func (s *Service) InspectBinding(ctx context.Context, p *access.Principal, tenant, id string) (*store.Binding, error) {
	m, err := p.Tenant(tenant, agentowl.RoleMember)
	if err != nil {
		return nil, err
	}
	var out *store.Binding
	err = s.store.Read(ctx, func(tx store.Tx) (err error) {
		out, err = tenantBinding(ctx, tx, m, id)
		return err
	})
	return out, err
}

// DeleteBinding retires a binding: its URL stops accepting events at once.
// Admin only.
func (s *Service) DeleteBinding(ctx context.Context, p *access.Principal, tenant, id string) error {
	m, err := p.Tenant(tenant, agentowl.RoleAdmin)
	if err != nil {
		return err
	}
	return s.store.Write(ctx, func(tx store.Tx) error {
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

// ---- the webhook channel

// Accepted is the outcome of one inbound event.
type Accepted struct {
	EventID        string
	ConversationID string
	FollowUp       bool
	// Duplicate is true when the sender's idempotency key matched an event
	// already accepted; nothing new was stored or delivered.
	Duplicate bool
	// WorkID is the work handed to an agent-work endpoint, if any.
	WorkID string
}

// headersKept drops credentials and hop-by-hop headers from what an event
// records and forwards.
var headersDropped = map[string]bool{
	"Authorization": true, "Proxy-Authorization": true, "Cookie": true, "Webhook-Signature": true,
	"Connection": true, "Keep-Alive": true, "Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true,
}

func keptHeaders(h http.Header) map[string][]string {
	out := map[string][]string{}
	size := 0
	for k, vs := range h {
		ck := http.CanonicalHeaderKey(k)
		if headersDropped[ck] || len(out) >= maxHeaderEntries {
			continue
		}
		for _, v := range vs {
			size += len(ck) + len(v)
			if size > maxHeaderBytes {
				return out
			}
			out[ck] = append(out[ck], v)
		}
	}
	return out
}

func textValue(param, v string, max int) error {
	if len(v) > max || !utf8.ValidString(v) || strings.ContainsFunc(v, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		return agentowl.FieldError(agentowl.ECodeInvalidField, param, "%s must be at most %d bytes of text.", param, max)
	}
	return nil
}

// Admit returns the live binding that token addresses, taking one event
// from its rate limit. Call it before reading the event's body, so that an
// unknown address or a sender over its limit is refused without waiting
// for a body. An unknown or deleted binding is not_found.
func (s *Service) Admit(ctx context.Context, token string) (*store.Binding, error) {
	if token == "" || len(token) > 256 {
		return nil, agentowl.Errorf(agentowl.ECodeNotFound, "No such ingress address.")
	}
	var b *store.Binding
	err := s.store.Read(ctx, func(tx store.Tx) (err error) {
		b, err = tx.BindingGetByToken(ctx, hashToken(token))
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil, agentowl.Errorf(agentowl.ECodeNotFound, "No such ingress address.")
	}
	if err != nil {
		return nil, err
	}
	if ok, wait := s.limiter.Allow(ctx, b.ID); !ok {
		return nil, ratelimit.Error("events for this ingress address", wait)
	}
	return b, nil
}

// AcceptWebhook stores one event received at binding b (from Admit) and
// hands it to the binding's endpoint, both committed before it returns.
// The body must be one JSON object. A binding with a signing secret
// refuses events without a valid Standard Webhooks signature
// (invalid_signature).
func (s *Service) AcceptWebhook(ctx context.Context, b *store.Binding, h http.Header, body []byte) (*Accepted, error) {
	now := s.clock.Now()
	dedupe := h.Get(HeaderIdempotencyKey)
	if b.SigningSecret != nil {
		plain, err := s.box.Open(bindingsTable, bindingSigningColumn, b.ID, b.SigningSecret)
		if err != nil {
			return nil, err
		}
		key, err := webhook.ParseSecret(string(plain))
		if err != nil {
			return nil, err
		}
		id, err := key.Verify(h, body, now, s.cfg.SignatureTolerance)
		if err != nil {
			return nil, agentowl.Errorf(agentowl.ECodeInvalidSignature, "The event's Standard Webhooks signature is missing or invalid: %s.",
				strings.TrimPrefix(err.Error(), "webhook: "))
		}
		dedupe = id // senders retry with the same webhook-id
	}
	var fields map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&fields); err != nil || fields == nil || len(bytes.TrimSpace(body[dec.InputOffset():])) != 0 {
		return nil, agentowl.Errorf(agentowl.ECodeInvalidJSON, "The event body must be one JSON object.")
	}
	key := h.Get(HeaderConversationKey)
	if key == "" {
		if raw, ok := fields[FieldConversationKey]; ok {
			if err := json.Unmarshal(raw, &key); err != nil {
				return nil, agentowl.FieldError(agentowl.ECodeInvalidField, FieldConversationKey, "conversation_key must be a string.")
			}
		}
	}
	sender := h.Get(HeaderSender)
	for _, c := range []struct {
		param, v string
	}{{HeaderConversationKey, key}, {HeaderSender, sender}, {HeaderIdempotencyKey, dedupe}} {
		if err := textValue(c.param, c.v, maxKeyBytes); err != nil {
			return nil, err
		}
	}
	ev := &store.Event{TenantID: b.TenantID, BindingID: b.ID, Channel: b.Channel, Sender: sender, ReceivedAt: now,
		Headers: keptHeaders(h), Payload: json.RawMessage(body), Attachments: json.RawMessage(`[]`), DedupeKey: dedupe}
	var out *Accepted
	var err error
	// A concurrent first event with the same conversation or idempotency
	// key can win the insert; the retry then finds it.
	for attempt := 0; ; attempt++ {
		out, err = s.accept(ctx, b, ev, key)
		if errors.Is(err, store.ErrConflict) && attempt < 2 {
			continue
		}
		break
	}
	if err != nil {
		return nil, err
	}
	if !out.Duplicate {
		s.work.Wake()
	}
	return out, nil
}

func (s *Service) accept(ctx context.Context, b *store.Binding, proto *store.Event, key string) (*Accepted, error) {
	var out *Accepted
	err := s.store.Write(ctx, func(tx store.Tx) error {
		// The binding was admitted before the body was read: it may have been
		// deleted while the body arrived.
		if cur, err := tx.BindingGet(ctx, b.ID); err != nil || cur.DeletedAt != nil {
			if err == nil || errors.Is(err, store.ErrNotFound) {
				return agentowl.Errorf(agentowl.ECodeNotFound, "No such ingress address.")
			}
			return err
		}
		if proto.DedupeKey != "" {
			prev, err := tx.EventGetByDedupeKey(ctx, b.ID, proto.DedupeKey)
			if err == nil {
				out = &Accepted{EventID: prev.ID, ConversationID: prev.ConversationID, FollowUp: prev.FollowUp, Duplicate: true}
				return nil
			}
			if !errors.Is(err, store.ErrNotFound) {
				return err
			}
		}
		ev := *proto
		ev.ID = work.NewID("evt")
		var conv *store.Conversation
		if key != "" {
			c, err := tx.ConversationGetOpenByKey(ctx, b.ID, key)
			switch {
			case err == nil:
				conv, ev.FollowUp = c, true
				if err := tx.ConversationTouch(ctx, c.ID, ev.ReceivedAt); err != nil {
					return err
				}
			case !errors.Is(err, store.ErrNotFound):
				return err
			}
		}
		if conv == nil {
			conv = &store.Conversation{ID: work.NewID("conv"), TenantID: b.TenantID, BindingID: b.ID, Key: key, Status: "open",
				CreatedAt: ev.ReceivedAt, LastEventAt: ev.ReceivedAt}
			if err := tx.ConversationCreate(ctx, conv); err != nil {
				return err
			}
		}
		ev.ConversationID = conv.ID
		if err := tx.EventCreate(ctx, &ev); err != nil {
			return err
		}
		out = &Accepted{EventID: ev.ID, ConversationID: conv.ID, FollowUp: ev.FollowUp}
		// Routing is authoritative: the binding's endpoint, nothing the
		// event says, decides where it goes.
		ep, err := tx.EndpointGet(ctx, b.EndpointID)
		if err != nil {
			return err
		}
		if ep.DeletedAt != nil {
			return nil // cannot happen while the binding lives; kept, not delivered
		}
		w, err := s.work.HandoffTx(ctx, tx, ep, &ev, conv)
		if err != nil {
			return err
		}
		if w != nil {
			out.WorkID = w.ID
		}
		return nil
	})
	return out, err
}
