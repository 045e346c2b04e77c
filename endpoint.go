package agentowl

import "time"

// EndpointOverdue is an endpoint's overdue expectations
// (docs/maintenance.md). A nil field keeps the server's default; a zero
// duration turns its rule off.
type EndpointOverdue struct {
	// AcceptWithin: the first callback is due this long after the handoff
	// was delivered.
	AcceptWithin *time.Duration
	// ReportInterval: while accepted or running, a callback is due at least
	// this often.
	ReportInterval *time.Duration
	// InputExpiry: while needs_input, every request is answered before its
	// expiry.
	InputExpiry *bool
}

// Endpoint is where a tenant's events are delivered. Its secrets are held
// in plain text in memory and sealed (encrypted) at rest by the store,
// each bound to its table, column and row.
type Endpoint struct {
	ID       string // ep_…
	TenantID string
	Name     string
	URL      string
	// AgentWork adds the work block to deliveries and opens the runtime API.
	AgentWork bool
	// SigningSecret is the whsec_ secret deliveries are signed with, in
	// plain text (sealed at rest by the store).
	SigningSecret []byte
	// DecisionURL and DecisionSecret (the bearer secret decision pushes
	// carry, in plain text; sealed at rest) are set together or not at all.
	DecisionURL    string
	DecisionSecret []byte
	CreatedAt      time.Time
	UpdatedAt      time.Time
	DeletedAt      *time.Time

	// Overdue is when its work counts as overdue (internal/maintenance).
	Overdue EndpointOverdue
	// PausedAt is set while an operator holds the endpoint's handoffs
	// (endpoints pause): events are recorded and their handoffs queued,
	// held (OutboxHeld) until resume hands them off in order.
	PausedAt *time.Time
}

// RuntimeCredential is an endpoint-bound bearer credential of an agent
// runtime. Only the SHA-256 of its secret is stored.
type RuntimeCredential struct {
	ID         string // rtc_…, public: handoffs carry it
	TenantID   string
	EndpointID string
	Hash       []byte
	Label      string
	Scopes     []string
	CreatedAt  time.Time
	ExpiresAt  time.Time
	RevokedAt  *time.Time
}

// Active reports whether c may authenticate at now.
func (c *RuntimeCredential) Active(now time.Time) bool {
	return c.RevokedAt == nil && now.Before(c.ExpiresAt)
}

// Binding is a receiving address of a channel that routes its events to
// one endpoint. Every channel but smtp is addressed by an unguessable URL
// token, stored as its SHA-256; an smtp binding by its email address. Its
// secrets are held in plain text in memory and sealed (encrypted) at rest by
// the store, each bound to its table, column and row.
type Binding struct {
	ID         string // bnd_…
	TenantID   string
	Channel    string // webhook, smtp, cloudflare-email, sms or voice
	Name       string
	EndpointID string
	// TokenHash is nil for smtp bindings, set for every other channel.
	TokenHash []byte
	// SigningSecret, when set (non-nil), is the whsec_ secret inbound
	// events must be signed with (Standard Webhooks), in plain text.
	// Webhook bindings only.
	SigningSecret []byte
	// Address is an smtp binding's receiving address, lower-case; unique
	// among live bindings. Empty for other channels.
	Address string
	// ProviderSecret is the secret a provider authenticates with, in plain
	// text: the Worker's shared secret (cloudflare-email), the Twilio auth
	// token (sms, voice). Set for those channels only.
	ProviderSecret []byte
	// HandoffDelay holds each event's handoff this long after it is
	// received (0 to MaxHandoffDelay): a window in which an operator can
	// re-thread a message (conversations link) before the runtime sees it.
	HandoffDelay time.Duration
	CreatedAt    time.Time
	DeletedAt    *time.Time
}

// MaxHandoffDelay bounds a binding's HandoffDelay.
const MaxHandoffDelay = 10 * time.Minute
