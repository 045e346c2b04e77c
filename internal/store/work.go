package store

import (
	"context"
	"encoding/json"
	"time"
)

// Records of agent work (docs/agent-work.md): endpoints and their runtime
// credentials, ingress bindings, inbound events grouped into conversations,
// the work handed to an endpoint for each event, and the runtime's
// callbacks about that work. The rules that move them live in internal/work
// and internal/ingress; the store only persists them.

// Endpoint is where a tenant's events are delivered. Secrets are stored
// sealed (encrypted) by the work use-cases: the store never sees them in
// the clear.
type Endpoint struct {
	ID       string // ep_…
	TenantID string
	Name     string
	URL      string
	// AgentWork adds the work block to deliveries and opens the runtime API.
	AgentWork bool
	// SigningSecret is the sealed whsec_ secret deliveries are signed with.
	SigningSecret []byte
	// DecisionURL and DecisionSecret (sealed bearer secret) are set together
	// or not at all.
	DecisionURL    string
	DecisionSecret []byte
	CreatedAt      time.Time
	UpdatedAt      time.Time
	DeletedAt      *time.Time

	// Overdue is when its work counts as overdue (internal/maintenance).
	Overdue EndpointOverdue
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

// Route is a binding with where its events go (BindingRoute).
type Route struct {
	Binding  *Binding
	Endpoint *Endpoint
	// Credential is the endpoint's RuntimeCredentialNewest ("" if none).
	Credential string
	// Open is the binding's open conversation with the key asked for (nil
	// if none, or none asked for).
	Open *Conversation
}

// Binding is a receiving address of a channel that routes its events to
// one endpoint. Every channel but smtp is addressed by an unguessable URL
// token, stored as its SHA-256; an smtp binding by its email address.
type Binding struct {
	ID         string // bnd_…
	TenantID   string
	Channel    string // webhook, smtp, cloudflare-email, sms or voice
	Name       string
	EndpointID string
	// TokenHash is nil for smtp bindings, set for every other channel.
	TokenHash []byte
	// SigningSecret, when set, is the sealed whsec_ secret inbound events
	// must be signed with (Standard Webhooks). Webhook bindings only.
	SigningSecret []byte
	// Address is an smtp binding's receiving address, lower-case; unique
	// among live bindings. Empty for other channels.
	Address string
	// ProviderSecret is the sealed secret a provider authenticates with:
	// the Worker's shared secret (cloudflare-email), the Twilio auth token
	// (sms, voice). Set for those channels only.
	ProviderSecret []byte
	CreatedAt      time.Time
	DeletedAt      *time.Time
}

// Conversation states. Events join only an open conversation; an ended one
// (reset by an operator, or past its channel's inactivity window) never
// takes another event.
const (
	ConversationOpen  = "open"
	ConversationEnded = "ended"
)

// Conversation groups a binding's events: a new one per event unless the
// channel's threading rule (internal/ingress) continues an open one.
type Conversation struct {
	ID        string // conv_…
	TenantID  string
	BindingID string
	Channel   string // the binding's channel
	// Key is the channel's thread identity: the webhook's conversation key,
	// the SMS remote number, the voice CallSid. Empty: never matched by key.
	// At most one open conversation of a binding has a given key.
	Key    string
	Status string // ConversationOpen or ConversationEnded
	// RuntimeSessionID is the latest session the runtime reported.
	RuntimeSessionID string
	CreatedAt        time.Time
	LastEventAt      time.Time
	EndedAt          *time.Time // set when Status is ended
}

// Event is one inbound message, channel-neutral.
type Event struct {
	ID             string // evt_…
	TenantID       string
	BindingID      string
	ConversationID string
	Channel        string
	Sender         string
	ReceivedAt     time.Time
	Headers        map[string][]string
	Payload        json.RawMessage
	Attachments    json.RawMessage // a JSON array; [] for the webhook channel
	// DedupeKey is the sender's idempotency key (webhook-id or
	// Idempotency-Key), unique per binding when set.
	DedupeKey string
	// FollowUp is true when the event joined an existing conversation.
	FollowUp bool
}

// WorkStatus is the runtime-reported state of work.
type WorkStatus string

// Work states. pending is set at handoff; every other state is set only by
// a runtime callback (internal/work). completed, failed and cancelled are
// terminal: no later callback changes them.
const (
	WorkPending    WorkStatus = "pending"
	WorkAccepted   WorkStatus = "accepted"
	WorkRunning    WorkStatus = "running"
	WorkNeedsInput WorkStatus = "needs_input"
	WorkCompleted  WorkStatus = "completed"
	WorkFailed     WorkStatus = "failed"
	WorkCancelled  WorkStatus = "cancelled"
)

// Terminal reports whether s ends the work.
func (s WorkStatus) Terminal() bool {
	return s == WorkCompleted || s == WorkFailed || s == WorkCancelled
}

// Work is one handoff of an event to an agent-work endpoint and everything
// the runtime has reported about it. Its identity (ID, generation) is fixed
// when the handoff is committed and reused by every transport retry; an
// intentional replay is new Work with the next generation.
type Work struct {
	ID             string // work_…
	TenantID       string
	EndpointID     string
	ConversationID string
	EventID        string
	Generation     int
	ReplayOf       string // the work this replays, if any
	// DeliveryID is the outbox message carrying the handoff.
	DeliveryID string
	// CredentialID is the credential named in the handoff's work block.
	CredentialID string
	Status       WorkStatus
	// Sequence is the highest sequence applied (0 before any callback).
	Sequence         int64
	RuntimeSessionID string
	ResultSummary    string
	ResultURL        string
	// Requests is the raw requests array of the latest needs_input callback
	// (questions and approvals); the next milestone interprets it.
	Requests json.RawMessage
	// Error is the raw error object of a failed or cancelled callback.
	Error json.RawMessage
	// Callbacks counts recorded callbacks, stale ones included.
	Callbacks int
	CreatedAt time.Time
	UpdatedAt time.Time
	EndedAt   *time.Time
}

// Callback is one recorded runtime report about work.
type Callback struct {
	WorkID     string
	CallbackID string
	Sequence   int64
	Status     WorkStatus
	// OccurredAt is the report's timestamp exactly as sent.
	OccurredAt       string
	RuntimeSessionID string
	// Body is the report in canonical JSON (whitespace removed, keys
	// sorted); BodyHash is its SHA-256, which duplicate detection compares.
	Body     []byte
	BodyHash []byte
	// Stale is true when a higher sequence had already been applied: the
	// callback is kept but changed nothing.
	Stale bool
	// WorkStatus is the work's state after this callback was recorded (the
	// receipt's recorded state).
	WorkStatus   WorkStatus
	CredentialID string
	RecordedAt   time.Time
}

// CallbackCheck is what WorkForCallback reads.
type CallbackCheck struct {
	Work *Work
	// ByID and BySequence are the work's callbacks with the new one's ID
	// and with its sequence (nil when none).
	ByID, BySequence *Callback
	// Items are the work's attention items that are not resolved and
	// every revision of the requests asked for, newest first; Decided the
	// IDs of the unresolved ones that have a decision. A work's resolved
	// items of other requests, which may be many, are not read.
	Items   []*AttentionItem
	Decided map[string]bool
}

// WorkListParams filters WorkList; results are newest first.
type WorkListParams struct {
	TenantID       string
	Status         WorkStatus // optional
	EndpointID     string     // optional
	ConversationID string     // optional
	After          *Cursor    // optional: the next page
	Limit          int
}

// AgentWork is the persistence of agent work, implemented by Tx. Callers
// are internal/work and internal/ingress; every method returns ErrNotFound
// when no row matches and ErrConflict when a uniqueness rule rejects a
// write, as noted.
type AgentWork interface {
	// EndpointCreate inserts an endpoint; ErrConflict if the tenant has a
	// live endpoint of the same name.
	EndpointCreate(ctx context.Context, e *Endpoint) error
	// EndpointGet returns an endpoint, deleted or not.
	EndpointGet(ctx context.Context, id string) (*Endpoint, error)
	// EndpointUpdate writes every mutable field (name, URL, agent work,
	// secrets, decision settings, updated and deleted times); ErrConflict
	// on a taken name.
	EndpointUpdate(ctx context.Context, e *Endpoint) error
	// EndpointList returns a tenant's live endpoints, oldest first.
	EndpointList(ctx context.Context, tenantID string) ([]*Endpoint, error)

	RuntimeCredentialCreate(ctx context.Context, c *RuntimeCredential) error
	// RuntimeCredentialGetByHash finds a credential, active or not.
	RuntimeCredentialGetByHash(ctx context.Context, hash []byte) (*RuntimeCredential, error)
	RuntimeCredentialGet(ctx context.Context, id string) (*RuntimeCredential, error)
	// RuntimeCredentialList returns an endpoint's credentials, oldest first.
	RuntimeCredentialList(ctx context.Context, endpointID string) ([]*RuntimeCredential, error)
	// RuntimeCredentialNewest returns the ID of the endpoint's newest
	// credential that is active at now (RuntimeCredential.Active) and has
	// scope, or "" when none has: the credential a work block names.
	RuntimeCredentialNewest(ctx context.Context, endpointID, scope string, now time.Time) (string, error)
	// RuntimeCredentialRevoke sets revoked_at if unset; ErrNotFound if no
	// such credential.
	RuntimeCredentialRevoke(ctx context.Context, id string, at time.Time) error
	// RuntimeCredentialRevokeByEndpoint revokes every live credential of an
	// endpoint.
	RuntimeCredentialRevokeByEndpoint(ctx context.Context, endpointID string, at time.Time) error

	// BindingCreate inserts a binding; ErrConflict if its token hash is
	// taken, or its address by a live binding.
	BindingCreate(ctx context.Context, b *Binding) error
	// BindingGet returns a binding, deleted or not.
	BindingGet(ctx context.Context, id string) (*Binding, error)
	// BindingRoute returns a binding, deleted or not, with the endpoint it
	// routes to and that endpoint's RuntimeCredentialNewest for scope at
	// now, in one statement, and, when openKey is not "", the binding's
	// open conversation with that key as ConversationGetOpenByKey finds it
	// (Route.Open), in the same round trip on PostgreSQL: what an inbound
	// event's write reads.
	BindingRoute(ctx context.Context, id, scope string, now time.Time, openKey string) (*Route, error)
	// BindingGetByToken finds a live binding by its token hash.
	BindingGetByToken(ctx context.Context, tokenHash []byte) (*Binding, error)
	// BindingGetByAddress finds the live smtp binding with a (lower-case)
	// receiving address.
	BindingGetByAddress(ctx context.Context, address string) (*Binding, error)
	// BindingList returns a tenant's live bindings, oldest first.
	BindingList(ctx context.Context, tenantID string) ([]*Binding, error)
	// BindingDelete sets deleted_at if unset.
	BindingDelete(ctx context.Context, id string, at time.Time) error
	// BindingCountByEndpoint counts live bindings routing to an endpoint.
	BindingCountByEndpoint(ctx context.Context, endpointID string) (int, error)

	// ConversationCreate inserts a conversation; ErrConflict if its key is
	// taken by an open conversation of the same binding.
	ConversationCreate(ctx context.Context, c *Conversation) error
	ConversationGet(ctx context.Context, id string) (*Conversation, error)
	// ConversationGetOpenByKey finds the open conversation of a binding
	// with key.
	ConversationGetOpenByKey(ctx context.Context, bindingID, key string) (*Conversation, error)
	// ConversationTouch records a new event at lastEventAt.
	ConversationTouch(ctx context.Context, id string, lastEventAt time.Time) error
	// ConversationEnd ends an open conversation at at; ErrNotFound if there
	// is no such conversation, ErrConflict if it has already ended.
	ConversationEnd(ctx context.Context, id string, at time.Time) error
	// ConversationEndIdle ends up to limit open conversations of channel
	// whose last event is at or before now - window, each as of the moment
	// its window closed (last event + window), and returns how many.
	ConversationEndIdle(ctx context.Context, channel string, now time.Time, window time.Duration, limit int) (int, error)
	// ConversationSetSession records the runtime session ID.
	ConversationSetSession(ctx context.Context, id, sessionID string) error

	// EventCreate inserts an event; ErrConflict if its binding already has
	// an event with the same dedupe key.
	EventCreate(ctx context.Context, e *Event) error
	EventGet(ctx context.Context, id string) (*Event, error)
	EventGetByDedupeKey(ctx context.Context, bindingID, key string) (*Event, error)

	// WorkCreate inserts work; ErrConflict if the event already has work of
	// that generation for the endpoint.
	WorkCreate(ctx context.Context, w *Work) error
	WorkGet(ctx context.Context, id string) (*Work, error)
	// WorkGetForUpdate is WorkGet that also serializes the caller with
	// other writers of the work (row lock on PostgreSQL).
	WorkGetForUpdate(ctx context.Context, id string) (*Work, error)
	// WorkUpdate writes the runtime state: status, sequence, session,
	// result, requests, error, callback count, updated and ended times.
	WorkUpdate(ctx context.Context, w *Work) error
	WorkList(ctx context.Context, p WorkListParams) ([]*Work, error)
	// WorkByEvent returns an event's work, oldest first.
	WorkByEvent(ctx context.Context, eventID string) ([]*Work, error)
	// WorkMaxGeneration returns the highest generation of an event's work
	// for an endpoint (0 if none).
	WorkMaxGeneration(ctx context.Context, eventID, endpointID string) (int, error)

	// CallbackCreate inserts a callback; ErrConflict if the work already has
	// a callback with its ID or its sequence.
	CallbackCreate(ctx context.Context, c *Callback) error
	CallbackGet(ctx context.Context, workID, callbackID string) (*Callback, error)
	CallbackGetBySequence(ctx context.Context, workID string, sequence int64) (*Callback, error)
	// WorkForCallback reads what a new callback (callbackID, sequence,
	// carrying the requests of IDs requests) is checked and applied
	// against, in one round trip on PostgreSQL: the work, as
	// WorkGetForUpdate (ErrNotFound when it is not there), and then, once
	// the work is locked, its callbacks and attention items.
	WorkForCallback(ctx context.Context, workID, callbackID string, sequence int64, requests []string) (*CallbackCheck, error)
	// CallbackList returns a work's latest limit callbacks in the order
	// recorded.
	CallbackList(ctx context.Context, workID string, limit int) ([]*Callback, error)
}
